"""Calls sent ahead of their replies (``Session.ahead``): the answer sees exactly the calls, in
the order, that it would see one at a time, and each reply is judged as a lone call's would be.

A declarative task sends all its cases at once; the HumanEval verifier sends its leading asserts'
calls. These runs check what pipelining could get wrong: a stateful answer, a process that dies
or hangs in the middle (the calls it had not served go again, one at a time, to the process that
replaces it), more requests than one write holds, and a verifier that misuses the mechanism.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from deepgym import DeepGym, Environment

from .conftest import SANDBOXES

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module", params=SANDBOXES)
def dg(request: pytest.FixtureRequest) -> Iterator[DeepGym]:
    with DeepGym(sandbox=request.param) as client:
        yield client


def counting(body: str) -> str:
    """An answer whose ``f(x)`` knows how many calls its process has served (``n``)."""
    return "n = 0\ndef f(x):\n    global n\n    n += 1\n" + textwrap.indent(body, "    ")


def cases(*pairs: tuple[object, object]) -> list[dict[str, object]]:
    return [{"args": [x], "expected": y} for x, y in pairs]


def env(test_cases: list[dict[str, object]], **kw: object) -> Environment:
    limits = {"timeout": 20.0, "case_timeout": 2.0, **kw}  # partial: the score counts the cases
    return Environment(
        name="ahead", entry_point="f", test_cases=test_cases, scoring="partial", **limits
    )


def outcome(r: object) -> list[tuple[bool, str]]:
    return [(c.passed, c.message) for c in r.cases]  # type: ignore[attr-defined]


def test_a_stateful_answer_sees_its_calls_in_order(dg: DeepGym) -> None:
    r = dg.run(env(cases((10, 11), (20, 22), (30, 33))), counting("return x + n\n"))
    assert r.has_verdict and r.score == 1.0, outcome(r)


def test_calls_after_a_death_go_to_a_fresh_process_one_at_a_time(dg: DeepGym) -> None:
    # The second call kills the process; the third and fourth were sent to it ahead, unserved:
    # they go again, to a new process whose count starts afresh.
    answer = counting("if x == 20:\n    import os\n    os._exit(3)\nreturn x + n\n")
    r = dg.run(env(cases((10, 11), (20, 0), (30, 31), (40, 42))), answer)
    assert r.has_verdict and r.score == 0.75, outcome(r)
    got = outcome(r)
    assert got[1][0] is False and "exited with code 3" in got[1][1], got
    assert [ok for ok, _ in got] == [True, False, True, True], got


def test_a_call_past_its_limit_fails_alone_and_the_rest_still_run(dg: DeepGym) -> None:
    answer = counting("if n == 2:\n    import time\n    time.sleep(30)\nreturn x + n\n")
    r = dg.run(env(cases((10, 11), (20, 0), (30, 31)), case_timeout=1.0), answer)
    assert r.has_verdict and [ok for ok, _ in outcome(r)] == [True, False, True], outcome(r)
    assert "timeout" in outcome(r)[1][1]


def test_an_answer_that_raises_keeps_serving_what_was_sent_ahead(dg: DeepGym) -> None:
    answer = counting("if n == 2:\n    raise ValueError('second')\nreturn x + n\n")
    r = dg.run(env(cases((10, 11), (20, 0), (30, 33))), answer)
    assert [ok for ok, _ in outcome(r)] == [True, False, True], outcome(r)
    assert "ValueError: second" in outcome(r)[1][1]


def test_more_cases_than_one_write_holds_and_a_request_larger_than_one(dg: DeepGym) -> None:
    big = "x" * 10_000  # one request larger than a write of requests sent ahead
    many = cases(*((str(i) * 40, str(i) * 40 + "!") for i in range(150)), (big, big + "!"))
    r = dg.run(env(many + cases(("a", "a!"))), "def f(x):\n    return x + '!'\n")
    assert r.has_verdict and r.score == 1.0 and len(r.cases) == 152, outcome(r)[:3]


VERIFIER_MISUSE = """
def verify(solution, test_cases):
    planned = solution.ahead("f", [([1], {}), ([2], {})])
    first = planned(1)
    other = solution.f(5)  # a call before the second reply sent ahead was taken
    return {"score": 1.0}
"""

VERIFIER_WRONG_CALL = """
def verify(solution, test_cases):
    planned = solution.ahead("f", [([1], {}), ([2], {})])
    try:
        planned(3)  # not the call sent ahead
    except Exception:
        return {"score": 0.0}
    return {"score": 1.0}
"""


@pytest.mark.parametrize("verifier", [VERIFIER_MISUSE, VERIFIER_WRONG_CALL])
def test_a_verifier_that_misuses_calls_sent_ahead_gives_no_verdict(
    dg: DeepGym, verifier: str
) -> None:
    bad = Environment(name="ahead-misuse", verifier_code=verifier, timeout=20.0)
    r = dg.run(bad, "def f(x):\n    return x\n")
    assert not r.has_verdict and r.error_type == "verifier_error", r
    assert "AheadError" in (r.error or ""), r.error
