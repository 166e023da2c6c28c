"""``keep_output``: a script task's result keeps what its program printed on each case, how it
ended and how long it took (``CaseResult.output``), within the limits the judge reports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deepgym import DeepGym, Environment
from deepgym.judge.codes import KEPT_STDOUT_CHARS

ANSWER = """\
import sys
text = sys.stdin.read().strip()
if text == "loop":
    while True:
        pass
if text == "big":
    sys.stdout.write("y" * (2 * 2**20))
print(text)
print("to stderr", file=sys.stderr)
sys.exit(3 if text == "three" else 0)
"""


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def env(*stdins: str, keep: bool = True) -> Environment:
    return Environment(
        name="echo",
        kind="script",
        test_cases=[{"stdin": s, "expected_stdout": s + "\n"} for s in stdins],
        keep_output=keep,
        case_timeout=1.0,
        timeout=8.0,
        scoring="partial",
    )


def test_each_case_keeps_its_output_exit_code_and_time(dg: DeepGym) -> None:
    r = dg.run(env("hello", "three"), ANSWER)
    first, second = (c.output for c in r.cases)
    assert first is not None and second is not None
    assert (first.stdout, first.stderr, first.exit_code, first.timed_out) == (
        "hello\n",
        "to stderr\n",
        0,
        False,
    )
    assert second.exit_code == 3 and second.signal is None
    assert 0.0 < first.time_ms < 8000.0
    assert r.evidence.compile_ms is None  # Python: no compile phase


def test_a_case_past_its_time_limit_says_so_and_was_killed(dg: DeepGym) -> None:
    r = dg.run(env("loop"), ANSWER)
    out = r.cases[0].output
    assert out is not None and out.timed_out and out.exit_code is None and out.signal == 9
    assert out.time_ms >= 900.0


def test_kept_stdout_is_bounded(dg: DeepGym) -> None:
    out = dg.run(env("big"), ANSWER).cases[0].output
    assert out is not None and len(out.stdout) == KEPT_STDOUT_CHARS


def test_nothing_is_kept_unless_asked(dg: DeepGym) -> None:
    r = dg.run(env("hello", keep=False), ANSWER)
    assert r.passed and r.cases[0].output is None


def test_keep_output_is_for_script_tasks_only() -> None:
    with pytest.raises(ValueError, match="keep_output applies to kind 'script' only"):
        Environment(
            name="f", entry_point="f", test_cases=[{"args": [], "expected": 1}], keep_output=True
        )
