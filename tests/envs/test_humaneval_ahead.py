"""The HumanEval verifier sends the calls of a check's leading plain asserts ahead of their
replies. Which asserts qualify, and that the cases it reports are those of running the check one
call at a time, whatever the answer does with its state."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from deepgym import DeepGym, load_suite
from deepgym.envs.verifiers import humaneval_check as hc


def planned(stmt: str) -> list[tuple[list[Any], dict[str, Any]]] | None:
    return hc._planned(ast.parse(stmt).body[0], "candidate")


@pytest.mark.parametrize(
    ("stmt", "calls"),
    [
        ("assert candidate([1, 2], 3) == [4]", [([[1, 2], 3], {})]),
        ("assert not candidate('a')", [(["a"], {})]),
        ("assert candidate(x=-1.5)", [([], {"x": -1.5})]),
        ("assert candidate((1, 'b')) != {1: None}, 'message'", [([(1, "b")], {})]),
        ("assert True, 'This prints if this assert fails'", []),
    ],
)
def test_plain_asserts_are_planned(stmt: str, calls: list[Any]) -> None:
    assert planned(stmt) == calls


@pytest.mark.parametrize(
    "stmt",
    [
        "assert abs(candidate(1) - 2) < 1e-6",  # the call is not evaluated first
        "assert candidate(1) == candidate(2)",  # two calls
        "assert 1 < candidate(1) < 3",  # a chained comparison
        "assert candidate(1) < 2 < 3",
        "assert candidate(y) == 1",  # an argument known only when it runs
        "assert candidate(*xs)",
        "assert candidate(**kw)",
        "assert candidate(1) == 2, f'{x}'",  # a message that runs code
        "assert candidate(1) or candidate(2)",
        "assert helper(1) == 2",  # a helper may call the candidate itself
        "assert candidate(1) == x",  # a name may be bound by earlier code
        "assert x",
        "for x in range(3): assert candidate(x)",
        "y = candidate(1)",
    ],
)
def test_anything_else_is_called_one_at_a_time(stmt: str) -> None:
    assert planned(stmt) is None


def test_only_the_leading_planned_asserts_go_ahead() -> None:
    test = (
        "def check(candidate):\n"
        "    assert candidate(1) == 2\n"
        "    assert True\n"
        "    assert candidate(2) == 3\n"
        "    assert abs(candidate(3) - 4) < 1e-6\n"
        "    assert candidate(4) == 5\n"
    )
    *_, n_ahead, ahead = hc._compile("def f(x):\n    return x + 1\n", test)
    assert n_ahead == 3
    assert ahead == [([1], {}), ([2], {})]


WRAPS = {
    "every_second_call_wrong": "    if n % 2 == 0:\n        return None\n",
    "raises_at_the_third": "    if n == 3:\n        raise ValueError('third')\n",
    "counts_its_calls": "    if n > 3:\n        return n\n",
}


def _wrapped(source: str, entry: str, body: str) -> str:
    return (
        f"{source}\n_real = {entry}\nn = 0\n"
        f"def {entry}(*args, **kwargs):\n    global n\n    n += 1\n{body}"
        "    return _real(*args, **kwargs)\n"
    )


def _one_at_a_time(env: Any, answer: str) -> list[bool]:
    """The check's asserts run here, in this process, each call made when the assert runs."""
    spec = env.test_cases[0]
    answer_ns: dict[str, Any] = {}
    exec(answer, answer_ns)
    setup, module_code, param, steps, _, _ = hc._compile(
        spec["prompt"] + spec["canonical_solution"], spec["test"]
    )
    ns: dict[str, Any] = {"__name__": "humaneval_problem"}
    exec(setup, ns)
    for code in module_code:
        exec(code, ns)
    ns[param] = answer_ns[env.entry_point]
    out = []
    for code, is_test, _ in steps:
        try:
            exec(code, ns)
            ok = True
        except Exception:
            ok = False
        if is_test:
            out.append(ok)
    return out


@pytest.mark.sandbox
@pytest.mark.parametrize("sandbox", ["pool", "strict"])
def test_cases_match_running_the_check_one_call_at_a_time(sandbox: str) -> None:
    envs = [e for e in load_suite("humaneval") if e.name in {f"humaneval/{i}" for i in range(8)}]
    runs = [
        (e, _wrapped(e.reference_solution or "", e.entry_point, body))
        for e in envs
        for body in WRAPS.values()
    ]
    with DeepGym(sandbox=sandbox) as dg:
        results = dg.run_batch([e for e, _ in runs], [a for _, a in runs], max_parallel=8).results
    for (env, answer), r in zip(runs, results, strict=True):
        assert r.has_verdict, r
        assert [c.passed for c in r.cases] == _one_at_a_time(env, answer), (env.name, r.cases)
