"""Caps of ours are never the answer's 0, and the task's limits stay its 0, on both sandboxes.

- A run's time limit that is only a backstop of the runner's (``timeout_kind="backstop"``, as
  the SandboxFusion routes set it) gives no verdict when it cuts the cases short; the same limit
  as the task's own (the default) is the answer's ``solution_timeout``.
- Each case's own time limit, and every task's output limit (``MAX_OUTPUT_BYTES``), are the
  task's: past them, the answer's judged 0.
- The result channel's line (``REPORT_MAX_BYTES``) is ours: the judge fits its report under it,
  so no output of the answer's turns its verdict into none.
- A task no answer could pass (an expected output over the output limit) is refused before
  anything runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from deepgym import DeepGym, Environment
from deepgym.judge.codes import MAX_CASE_ARGS_BYTES, MAX_OUTPUT_BYTES
from deepgym.models import RunResult

pytestmark = pytest.mark.sandbox

SLEEPY_SCRIPT = "import time\nx = input()\ntime.sleep(3 if x == '1' else 0)\nprint(x)\n"
SLEEPY_FUNCTION = "import time\n\ndef echo(x):\n    time.sleep(3 if x == 1 else 0)\n    return x\n"


@pytest.fixture(scope="module", params=["pool", "strict"])
def dg(request: pytest.FixtureRequest) -> Iterator[DeepGym]:
    with DeepGym(sandbox=request.param) as client:
        yield client


def _script(**kw: Any) -> Environment:
    """Three cases; the second sleeps 3 s, within its own 5 s but past the run's 1.5 s: the
    run's limit stops it while it sleeps (the answer's own doing, if the limit is the task's)."""
    fields: dict[str, Any] = {
        "name": "caps",
        "kind": "script",
        "test_cases": [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(3)],
        "case_timeout": 5.0,
        "timeout": 1.5,
        "scoring": "partial",
    }
    return Environment(**(fields | kw))


def _function(**kw: Any) -> Environment:
    fields: dict[str, Any] = {
        "name": "caps-fn",
        "entry_point": "echo",
        "test_cases": [{"args": [i], "expected": i} for i in range(3)],
        "case_timeout": 5.0,
        "timeout": 1.5,
    }
    return Environment(**(fields | kw))


def _no_verdict(r: RunResult) -> None:
    assert not r.has_verdict and r.error_type == "timeout", r
    assert "backstop" in r.error and "not the task's" in r.error, r.error


@pytest.mark.parametrize("make, answer", [(_script, SLEEPY_SCRIPT), (_function, SLEEPY_FUNCTION)])
def test_a_backstop_that_cuts_the_cases_short_gives_no_verdict(
    dg: DeepGym, make: Any, answer: str
) -> None:
    _no_verdict(dg.run_one(make(timeout_kind="backstop"), answer))


@pytest.mark.parametrize("make, answer", [(_script, SLEEPY_SCRIPT), (_function, SLEEPY_FUNCTION)])
def test_the_same_limit_as_the_tasks_own_is_the_answers_zero(
    dg: DeepGym, make: Any, answer: str
) -> None:
    r = dg.run_one(make(), answer)  # timeout_kind="limit", the default
    assert r.has_verdict and r.error_type == "solution_timeout" and r.score == 0.0, r


def test_a_cases_own_limit_stays_the_answers_under_a_backstop(dg: DeepGym) -> None:
    env = _script(case_timeout=1.5, timeout=20.0, timeout_kind="backstop")
    r = dg.run_one(env, SLEEPY_SCRIPT)
    assert r.has_verdict and r.score == pytest.approx(2 / 3), r
    assert [c.passed for c in r.cases] == [True, False, True]
    assert r.cases[1].message == "timeout"


def test_the_output_limit_is_the_tasks_own(dg: DeepGym) -> None:
    flood = "import sys\nfor _ in range(64):\n    sys.stdout.write('3' * 2**20)\n"
    env = _script(test_cases=[{"stdin": "", "expected_stdout": "3"}], timeout=30.0)
    r = dg.run_one(env.model_copy(update={"timeout_kind": "backstop"}), flood)
    assert r.has_verdict and r.score == 0.0, r
    assert r.cases[0].message == "limit: output_size"


def test_a_report_past_the_hosts_line_keeps_its_verdict(dg: DeepGym) -> None:
    # 20 cases of 1 MiB each kept, six characters a byte on the wire: 120 MiB of report, over
    # the host's line (16 MiB). It used to be dropped there: no verdict for a wrong answer.
    answer = "import sys\nsys.stdout.write('\\x01' * 2**20)\n"
    cases = [{"stdin": "", "expected_stdout": "x"}] * 20
    r = dg.run_one(_script(test_cases=cases, timeout=60.0, keep_output=True), answer)
    assert r.has_verdict and r.score == 0.0 and len(r.cases) == 20, r.error
    kept = [c.output.stdout for c in r.cases if c.output is not None]
    assert len(kept) == 20 and all(0 < len(s) < 2**20 for s in kept)


def test_an_expected_output_no_answer_could_print_is_refused() -> None:
    with pytest.raises(ValueError, match=f"over the {MAX_OUTPUT_BYTES} bytes a program may print"):
        _script(test_cases=[{"stdin": "", "expected_stdout": "3" * (MAX_OUTPUT_BYTES + 1)}])


def test_arguments_no_program_could_start_with_are_refused(dg: DeepGym) -> None:
    # They travel in one control message: a case past it never started (no verdict, each run).
    with pytest.raises(ValueError, match=f"over the {MAX_CASE_ARGS_BYTES} a script case"):
        _script(test_cases=[{"stdin": "", "args": ["x" * 70_000], "expected_stdout": "ok\n"}])
    fits = ["x" * (MAX_CASE_ARGS_BYTES - 10)]  # at the limit, the program starts and is judged
    env = _script(test_cases=[{"stdin": "", "args": fits, "expected_stdout": "ok\n"}], timeout=9)
    r = dg.run_one(env, "print('ok')")
    assert r.has_verdict and r.passed, r
