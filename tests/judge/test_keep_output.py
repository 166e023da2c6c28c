"""``keep_output``: a script task's result keeps what its program printed on each case, how it
ended and how long it took (``CaseResult.output``), within the environment's ``kept_output_kb``;
what the answer printed, an uncaught exception's traceback included, reaches ``RunResult.stderr``
and a failed case's message, on both sandboxes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deepgym import DeepGym, Environment
from deepgym.judge.codes import KEPT_OUTPUT_BYTES
from tests.sandbox.conftest import held_back

pytestmark = pytest.mark.sandbox

ANSWER = """\
import sys
text = sys.stdin.read().strip()
if text == "loop":
    while True:
        pass
if text == "big":
    sys.stdout.write("y" * (2 * 2**20))
if text == "flood":
    sys.stderr.write("e" * (2 * 2**20))
    raise ValueError("after the flood")
if text == "boom":
    sys.stderr.write("EEE\\n")
    raise ValueError("boom")
print(text)
print("to stderr", file=sys.stderr)
sys.exit(3 if text == "three" else 0)
"""


@pytest.fixture(scope="module", params=["pool", "strict"])
def dg(request: pytest.FixtureRequest) -> Iterator[DeepGym]:
    with DeepGym(sandbox=request.param) as client:
        yield client


def env(*stdins: str, keep: bool = True, kept_kb: int = 1024) -> Environment:
    return Environment(
        name="echo",
        kind="script",
        test_cases=[{"stdin": s, "expected_stdout": s + "\n"} for s in stdins],
        keep_output=keep,
        kept_output_kb=kept_kb,
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
    """(A loop the loaded host held back past its backstop has no verdict, never a pass: tried
    again, up to three times.)"""
    for _ in range(3):
        r = dg.run(env("loop"), ANSWER)
        if not held_back(r):
            break
    else:
        pytest.skip("the loop was held back by the loaded host three times (no verdict)")
    out = r.cases[0].output
    assert out is not None and out.timed_out and out.exit_code is None and out.signal == 9
    assert out.time_ms >= 900.0


def test_kept_stdout_is_bounded(dg: DeepGym) -> None:
    out = dg.run(env("big"), ANSWER).cases[0].output
    assert out is not None and len(out.stdout) <= KEPT_OUTPUT_BYTES
    assert out.stdout.startswith("y" * 1000) and out.stdout.endswith("big\n")
    assert "bytes left out" in out.stdout


def test_the_traceback_reaches_stderr_and_the_case_message(dg: DeepGym) -> None:
    r = dg.run(env("boom"), ANSWER)
    out = r.cases[0].output
    assert out is not None and out.exit_code == 1
    assert out.stderr.startswith("EEE\nTraceback (most recent call last):\n")
    assert out.stderr.endswith("ValueError: boom\n")
    assert 'File "/work/solution.py"' in out.stderr and "deepgym" not in out.stderr
    assert r.stderr == out.stderr  # the failed case's program is the result's
    assert "ValueError: boom" in r.cases[0].message and "exit 1" in r.cases[0].message
    r = dg.run(env("boom", keep=False), ANSWER)  # not kept per case: still the result's
    assert r.cases[0].output is None and r.stderr.endswith("ValueError: boom\n")


def test_a_flooded_stderr_keeps_its_start_and_its_traceback(dg: DeepGym) -> None:
    r = dg.run(env("flood"), ANSWER)
    out = r.cases[0].output
    assert out is not None
    for stderr in (out.stderr, r.stderr):
        assert KEPT_OUTPUT_BYTES - 100 <= len(stderr) <= KEPT_OUTPUT_BYTES  # 1 MiB of 2
        assert stderr.startswith("e" * 1000) and stderr.endswith("ValueError: after the flood\n")
    assert "ValueError: after the flood" in r.cases[0].message


def test_the_kept_output_is_configured_once_per_environment(dg: DeepGym) -> None:
    r = dg.run(env("flood", kept_kb=64), ANSWER)
    out = r.cases[0].output
    assert out is not None
    for stderr in (out.stderr, r.stderr):
        assert 64 * 1024 - 100 <= len(stderr) <= 64 * 1024
        assert stderr.endswith("ValueError: after the flood\n")


def test_nothing_is_kept_unless_asked(dg: DeepGym) -> None:
    r = dg.run(env("hello", keep=False), ANSWER)
    assert r.passed and r.cases[0].output is None


def test_keep_output_is_for_script_tasks_only() -> None:
    with pytest.raises(ValueError, match="keep_output applies to kind 'script' only"):
        Environment(
            name="f", entry_point="f", test_cases=[{"args": [], "expected": 1}], keep_output=True
        )
