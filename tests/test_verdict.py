"""The verdict contract as pure functions: property tests over scores, error types and outcomes."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deepgym.exceptions import InvalidScoreError
from deepgym.models import RunResult
from deepgym.verdict import (
    ALL_ERROR_TYPES,
    MODEL_FAULT_ERRORS,
    NO_VERDICT_ERRORS,
    STOP_SIGNALS,
    Outcome,
    checked_score,
    classify,
    compile_outcome,
    has_verdict,
    killed_from_outside,
)

ERROR_TYPES = sorted(ALL_ERROR_TYPES)
exit_codes = st.none() | st.integers(min_value=-300, max_value=300) | st.integers()
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def test_error_type_sets_partition_the_closed_set() -> None:
    assert MODEL_FAULT_ERRORS | NO_VERDICT_ERRORS == ALL_ERROR_TYPES
    assert not MODEL_FAULT_ERRORS & NO_VERDICT_ERRORS
    assert {
        "invalid_patch",
        "patch_apply_failed",
        "test_infra_tampering",
        "solution_error",
        "solution_timeout",
        "policy_sandbox_failure",
        "compile_error",
    } == MODEL_FAULT_ERRORS
    assert {
        "sandbox_error",
        "runtime_error",
        "verifier_error",
        "timeout",
        "invalid_score",
        "generation_error",
    } == NO_VERDICT_ERRORS


# --- checked_score ----------------------------------------------------------------------------


@given(st.floats(allow_nan=True, allow_infinity=True))
@example(float("nan"))
@example(float("inf"))
@example(-0.0)
@example(1.0000000000000002)
def test_checked_score_floats(x: float) -> None:
    if 0.0 <= x <= 1.0:
        assert checked_score(x) == x
    else:
        with pytest.raises(InvalidScoreError):
            checked_score(x)


@given(st.integers() | st.sampled_from([10**400, -(10**400), 2**1024]))
def test_checked_score_ints(x: int) -> None:
    if x in (0, 1):
        assert checked_score(x) == float(x)
        assert type(checked_score(x)) is float
    else:
        with pytest.raises(InvalidScoreError):
            checked_score(x)


@given(json_values | st.binary() | st.complex_numbers())
def test_checked_score_is_in_unit_interval_or_raises(value: Any) -> None:
    try:
        score = checked_score(value)
    except InvalidScoreError:
        return
    assert isinstance(score, float)
    assert not math.isnan(score)
    assert 0.0 <= score <= 1.0


def test_checked_score_maps_booleans_and_refuses_strings() -> None:
    assert checked_score(True) == 1.0
    assert checked_score(False) == 0.0
    for bad in ("1", "0.5", None, [1.0], b"1"):
        with pytest.raises(InvalidScoreError):
            checked_score(bad)


# --- has_verdict ------------------------------------------------------------------------------


@given(st.sampled_from([None, *ERROR_TYPES]), exit_codes)
def test_has_verdict_is_total_over_error_types_and_exit_codes(
    error_type: str | None, exit_code: int | None
) -> None:
    expected = (error_type is None or error_type in MODEL_FAULT_ERRORS) and exit_code != 2
    assert has_verdict(error_type, exit_code) is expected


@pytest.mark.parametrize("error_type", ERROR_TYPES)
def test_a_verifier_exit_of_2_is_never_a_verdict(error_type: str) -> None:
    assert has_verdict(None, 2) is False
    assert has_verdict(error_type, 2) is False


@given(st.text(max_size=20).filter(lambda s: s not in ALL_ERROR_TYPES))
def test_has_verdict_refuses_an_invented_error_type(error_type: str) -> None:
    with pytest.raises(ValueError, match="not one of"):
        has_verdict(error_type, 0)


# --- classify ---------------------------------------------------------------------------------

STATUSES = [
    "ok",
    "verifier_error",
    "invalid_score",
    "timeout",
    *sorted(MODEL_FAULT_ERRORS),
    "bogus",
]
reports = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(STATUSES) | json_values,
        "score": json_values | st.sampled_from([0.0, 0.5, 1.0, 1]),
        "passed": st.none() | st.booleans() | st.text(max_size=3),
        "message": st.text(max_size=20),
    },
)
outcomes = st.builds(
    Outcome,
    report=reports,
    in_play=st.booleans(),
    verifier_exit_code=st.none() | st.sampled_from([0, 1, 2, -9, 137]) | st.integers(),
    sandbox_died=st.booleans(),
    wall_timeout=st.booleans(),
    solution_busy=st.booleans(),
    start_failed=st.booleans(),
    worker_died=st.booleans(),
    verifier_signal=st.none() | st.sampled_from([1, 2, 6, 9, 11, 15, 24]) | st.integers(1, 64),
    verifier_out_of_reach=st.booleans(),
    detail=st.text(max_size=10),
)


@given(outcomes)
def test_classify_follows_the_contract(o: Outcome) -> None:
    c = classify(o)
    assert isinstance(c.score, float)
    assert not math.isnan(c.score)
    assert 0.0 <= c.score <= 1.0
    assert c.error_type is None or c.error_type in ALL_ERROR_TYPES
    assert c.has_verdict is has_verdict(c.error_type)
    if c.has_verdict:
        assert c.error_type is None or c.error_type in MODEL_FAULT_ERRORS
    else:
        assert not c.passed
        assert c.score == 0.0
    if c.passed:
        assert c.has_verdict and c.error_type is None
    if c.error_type is not None:  # a failure is a 0, judged or not
        assert c.score == 0.0 and not c.passed
    if c.raise_as is not None:
        assert c.raise_as in ("sandbox", "timeout", "verifier")
        assert not c.has_verdict
    if o.verifier_exit_code == 2 or o.start_failed:
        assert not c.has_verdict
    if killed_from_outside(o):  # ours for certain: never the answer's 0, in play or not
        assert not c.has_verdict and c.error_type == "sandbox_error"
    if not o.in_play and c.error_type in {
        "solution_error",
        "solution_timeout",
        "policy_sandbox_failure",
    }:
        pytest.fail(f"blamed the answer before it came into play: {c}")
    # Every classification is a valid RunResult.
    RunResult(score=c.score, passed=c.passed, has_verdict=c.has_verdict, error_type=c.error_type)


@given(
    score=json_values | st.sampled_from([1.0, 1, True]),
    passed=st.none() | st.booleans(),
    exit_code=st.sampled_from([None, 0, 1]),
)
def test_a_score_reported_before_a_crash_is_never_kept(
    score: Any, passed: bool | None, exit_code: int | None
) -> None:
    report = {"status": "verifier_error", "score": score, "passed": passed, "message": "boom"}
    c = classify(Outcome(report=report, in_play=True, verifier_exit_code=exit_code))
    assert (c.error_type, c.score, c.passed, c.has_verdict) == ("solution_error", 0.0, False, True)
    before = classify(Outcome(report=report, in_play=False, verifier_exit_code=exit_code))
    assert (before.error_type, before.score, before.has_verdict) == ("verifier_error", 0.0, False)


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(), st.booleans())
def test_an_out_of_range_score_is_never_reward(score: float, in_play: bool) -> None:
    c = classify(Outcome(report={"status": "ok", "score": score, "passed": True}, in_play=in_play))
    if (isinstance(score, float) and 0.0 <= score <= 1.0) or score in (0, 1):
        assert c.error_type is None and c.score == float(score)
    else:
        assert c.score == 0.0 and not c.passed
        assert c.error_type == ("solution_error" if in_play else "invalid_score")


def test_timeouts_are_dated_and_need_evidence() -> None:
    busy = classify(Outcome(report=None, in_play=True, wall_timeout=True, solution_busy=True))
    assert (busy.error_type, busy.has_verdict) == ("solution_timeout", True)
    idle = classify(Outcome(report=None, in_play=True, wall_timeout=True, solution_busy=False))
    assert (idle.error_type, idle.has_verdict, idle.raise_as) == ("timeout", False, None)
    before = classify(Outcome(report=None, in_play=False, wall_timeout=True, solution_busy=True))
    assert (before.error_type, before.has_verdict, before.raise_as) == ("timeout", False, "timeout")


def test_a_dead_sandbox_is_dated_too() -> None:
    after = classify(Outcome(report=None, in_play=True, sandbox_died=True))
    assert (after.error_type, after.has_verdict) == ("policy_sandbox_failure", True)
    before = classify(Outcome(report=None, in_play=False, sandbox_died=True))
    assert (before.error_type, before.has_verdict, before.raise_as) == (
        "sandbox_error",
        False,
        "sandbox",
    )
    silent = classify(Outcome(report=None, in_play=True, verifier_exit_code=0))
    assert (silent.error_type, silent.has_verdict, silent.raise_as) == (
        "verifier_error",
        False,
        "verifier",
    )


@pytest.mark.parametrize("sig", sorted(STOP_SIGNALS))
@pytest.mark.parametrize("in_play", [False, True])
def test_a_verifier_out_of_reach_stopped_from_outside_is_ours(sig: int, in_play: bool) -> None:
    died = Outcome(
        report=None,
        in_play=in_play,
        verifier_exit_code=128 + sig,
        sandbox_died=True,
        verifier_signal=sig,
        verifier_out_of_reach=True,
    )
    c = classify(died)
    assert (c.error_type, c.has_verdict, c.raise_as) == ("sandbox_error", False, "sandbox")
    # A report already sent does not stand either: the judge did not finish the run.
    sent = classify(replace(died, report={"status": "ok", "score": 0.0}))
    assert (sent.error_type, sent.has_verdict) == ("sandbox_error", False)
    # The host's own wall limit killed it: dated as a timeout, as before.
    late = classify(replace(died, wall_timeout=True, solution_busy=True))
    assert late.error_type == ("solution_timeout" if in_play else "timeout")


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGXCPU])
def test_a_verifier_fault_after_play_stays_the_answers_zero(sig: int) -> None:
    """A fault of the verifier's own may come from the answer's output it was handling."""
    c = classify(
        Outcome(
            report=None,
            in_play=True,
            verifier_exit_code=128 + sig,
            sandbox_died=True,
            verifier_signal=sig,
            verifier_out_of_reach=True,
        )
    )
    assert (c.error_type, c.has_verdict) == ("policy_sandbox_failure", True)


def test_a_verifier_the_answer_can_reach_killed_in_play_stays_the_answers_zero() -> None:
    """``unsafe``: the answer runs as the verifier's user and could have killed it."""
    c = classify(
        Outcome(
            report=None,
            in_play=True,
            verifier_exit_code=-9,
            sandbox_died=True,
            verifier_signal=9,
            verifier_out_of_reach=False,
        )
    )
    assert (c.error_type, c.has_verdict) == ("policy_sandbox_failure", True)


@pytest.mark.parametrize("status", ["solution_error", "solution_timeout", "policy_sandbox_failure"])
def test_a_model_fault_status_before_play_is_not_a_verdict(status: str) -> None:
    assert classify(Outcome(report={"status": status}, in_play=True)).has_verdict
    assert not classify(Outcome(report={"status": status}, in_play=False)).has_verdict


@pytest.mark.parametrize(
    "status", ["invalid_patch", "patch_apply_failed", "test_infra_tampering", "compile_error"]
)
def test_faults_found_by_reading_the_answer_are_verdicts_before_any_process_starts(
    status: str,
) -> None:
    c = classify(Outcome(report={"status": status}, in_play=False))
    assert (c.error_type, c.has_verdict, c.score) == (status, True, 0.0)


@given(
    detail=st.text(min_size=1, max_size=20).filter(str.strip),
    started=st.booleans(),
    toolchain_ok=st.booleans(),
    timed_out=st.booleans(),
    starved=st.booleans(),
    outside=st.booleans(),
)
def test_a_failed_compile_is_the_answers_once_the_compiler_started(
    detail: str, started: bool, toolchain_ok: bool, timed_out: bool, starved: bool, outside: bool
) -> None:
    """Dated by the compiler's start, like a verifier opening the answer: after it, any way a
    compile fails is a judged 0 (its time ``solution_timeout``); before it, or where the host
    (starved, a kill from outside) or the toolchain (its known-good program fails too)
    explains it, no verdict."""
    o = compile_outcome(
        detail,
        started=started,
        toolchain_ok=toolchain_ok,
        timed_out=timed_out,
        starved=starved,
        outside=outside,
    )
    c = classify(o)
    assert c.score == 0.0 and not c.passed and c.message == detail
    answers = started and toolchain_ok and not starved and not outside
    assert c.has_verdict is answers
    if answers:
        assert c.error_type == ("solution_timeout" if timed_out else "compile_error")
        assert c.raise_as is None
    elif started and toolchain_ok and not outside:  # the host held it back: no verdict
        assert (c.error_type, c.raise_as) == ("timeout", None)
    else:  # the build's sandbox, its set-up or the toolchain: ours
        assert (c.error_type, c.raise_as) == ("sandbox_error", "sandbox")


@pytest.mark.parametrize("status", [["ok"], {"a": 1}, 3, None])
def test_a_malformed_status_is_no_verdict(status: Any) -> None:
    c = classify(Outcome(report={"status": status, "score": 1.0}, in_play=True))
    assert (c.error_type, c.has_verdict, c.passed) == ("verifier_error", False, False)


SANDBOX_MODULES = [
    "deepgym.judge.harness",
    "deepgym.judge.worker",
    "deepgym.judge.worker_judge",
    "deepgym.judge.program_host",
    "deepgym.judge.solution_host",
    "deepgym.judge.launch",
    "deepgym.judge.rpc",
    "deepgym.sandbox",
]


def test_the_contract_loads_none_of_the_sandbox_code() -> None:
    # The contract is pure: it shares the judge's exit codes (``deepgym.judge.codes``) and
    # nothing else of the code that runs inside a sandbox.
    probe = "import json, sys\nimport deepgym.verdict\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert "deepgym.verdict" in loaded
    assert "deepgym.judge.codes" in loaded
    assert [m for m in SANDBOX_MODULES if m in loaded] == []
