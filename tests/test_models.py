"""The data model: result validation and the totals' arithmetic (conservative and judged-only)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from deepgym.models import (
    BatchResult,
    CaseResult,
    Environment,
    EvalResult,
    RunResult,
    ServiceTime,
    Totals,
)
from deepgym.verdict import MODEL_FAULT_ERRORS, NO_VERDICT_ERRORS


def judged(score: float, passed: bool | None = None, **kw: Any) -> RunResult:
    return RunResult(score=score, passed=score == 1.0 if passed is None else passed, **kw)


def unjudged(error_type: str = "sandbox_error") -> RunResult:
    return RunResult.no_verdict(error_type, "the sandbox died")


def mix(passed: int, failed: int, no_verdict: int, fail_score: float = 0.0) -> list[RunResult]:
    return (
        [judged(1.0) for _ in range(passed)]
        + [judged(fail_score, passed=False) for _ in range(failed)]
        + [unjudged() for _ in range(no_verdict)]
    )


# --- RunResult --------------------------------------------------------------------------------


def test_a_run_result_refuses_an_invented_error_type() -> None:
    with pytest.raises(ValidationError, match="not one of"):
        RunResult(score=0.0, passed=False, has_verdict=False, error_type="oops")


@pytest.mark.parametrize("error_type", sorted(NO_VERDICT_ERRORS))
def test_a_verdict_needs_a_model_fault(error_type: str) -> None:
    with pytest.raises(ValidationError, match="no verdict"):
        RunResult(score=0.0, passed=False, has_verdict=True, error_type=error_type)
    assert not RunResult.no_verdict(error_type, "x").has_verdict


@pytest.mark.parametrize("error_type", sorted(MODEL_FAULT_ERRORS))
def test_a_model_fault_is_a_verdict(error_type: str) -> None:
    r = RunResult(score=0.0, passed=False, error_type=error_type)
    assert r.has_verdict


def test_a_run_without_a_verdict_cannot_pass() -> None:
    with pytest.raises(ValidationError, match="cannot pass"):
        RunResult(score=1.0, passed=True, has_verdict=False, error_type="timeout")


@pytest.mark.parametrize("score", [-0.1, 1.1, math.nan, math.inf, -math.inf])
def test_a_score_outside_the_unit_interval_is_refused(score: float) -> None:
    with pytest.raises(ValidationError):
        RunResult(score=score, passed=False)


def test_no_verdict_is_score_zero_and_not_passed() -> None:
    r = RunResult.no_verdict("verifier_error", "the verifier exited 2", env_name="e")
    assert (r.score, r.passed, r.has_verdict, r.error_type, r.env_name) == (
        0.0,
        False,
        False,
        "verifier_error",
        "e",
    )


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError):
        RunResult(score=1.0, passed=True, verdict=True)  # type: ignore[call-arg]


def test_per_test_rewards() -> None:
    r = RunResult(
        score=0.5,
        passed=False,
        cases=[
            CaseResult(name="test_0", passed=True),
            CaseResult(name="test_1", passed=False),
            CaseResult(name="test_2", passed=False, score=0.25),
        ],
    )
    assert r.per_test_rewards() == {"test_0": 1.0, "test_1": 0.0, "test_2": 0.25, "overall": 0.5}


def test_run_result_json_round_trip() -> None:
    r = RunResult(score=0.5, passed=False, cases=[CaseResult(name="t", passed=False)])
    assert RunResult.model_validate_json(r.model_dump_json()) == r


# --- Totals -----------------------------------------------------------------------------------


def test_the_contracts_example_line() -> None:
    t = Totals.of(mix(passed=63, failed=27, no_verdict=10))
    assert t.summary_line() == "Pass Rate: 63.00% (judged 70.00%, 10.00% no verdict)"
    assert (t.total, t.passed, t.failed, t.judged_count, t.no_verdict_count) == (
        100,
        63,
        37,
        90,
        10,
    )
    assert t.pass_rate == pytest.approx(0.63)
    assert t.judged_pass_rate == pytest.approx(0.70)


def test_headline_counts_no_verdict_as_a_failed_zero() -> None:
    t = Totals.of(mix(passed=2, failed=1, no_verdict=1, fail_score=0.5))
    assert t.passed == 2 and t.failed == 2
    assert t.avg_score == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert t.pass_rate == pytest.approx(2 / 4)
    assert t.judged_mean_score == pytest.approx((1 + 1 + 0.5) / 3)
    assert t.judged_pass_rate == pytest.approx(2 / 3)


def test_a_no_verdict_run_never_counts_as_passed_or_scored() -> None:
    # Built without validation: a run without a verdict that claims a pass and a score.
    forged = RunResult.model_construct(
        score=1.0, passed=True, has_verdict=False, error_type="verifier_error"
    )
    t = Totals.of([forged, judged(0.0, passed=False)])
    assert (t.passed, t.failed, t.avg_score, t.pass_rate) == (0, 2, 0.0, 0.0)
    assert (t.judged_count, t.judged_pass_rate, t.judged_mean_score) == (1, 0.0, 0.0)


def test_nothing_judged_gives_zeros() -> None:
    t = Totals.of([unjudged(), unjudged("timeout")])
    assert (t.judged_count, t.judged_pass_rate, t.judged_mean_score) == (0, 0.0, 0.0)
    assert t.summary_line() == "Pass Rate: 0.00% (judged 0.00%, 100.00% no verdict)"
    empty = Totals.of([])
    assert (empty.total, empty.avg_score, empty.pass_rate, empty.judged_pass_rate) == (0, 0, 0, 0)
    assert empty.summary_line() == "Pass Rate: 0.00% (judged 0.00%, 0.00% no verdict)"


def test_a_judged_model_fault_counts_as_judged() -> None:
    t = Totals.of([judged(0.0, passed=False, error_type="solution_timeout"), judged(1.0)])
    assert (t.judged_count, t.no_verdict_count, t.passed) == (2, 0, 1)
    assert t.judged_pass_rate == 0.5


def test_headline_never_exceeds_judged() -> None:
    for p, f, n in [(0, 0, 3), (3, 0, 0), (5, 2, 7), (1, 9, 1)]:
        t = Totals.of(mix(p, f, n, fail_score=0.3))
        assert t.pass_rate <= t.judged_pass_rate
        assert t.avg_score <= t.judged_mean_score
        assert t.passed + t.failed == t.total
        assert t.judged_count + t.no_verdict_count == t.total


# --- BatchResult / EvalResult -----------------------------------------------------------------


def test_batch_totals_are_computed_not_taken() -> None:
    b = BatchResult(results=mix(1, 1, 1), passed=99, pass_rate=1.0, judged_count=7)
    assert (b.passed, b.failed, b.judged_count, b.no_verdict_count) == (1, 2, 2, 1)
    assert b.pass_rate == pytest.approx(1 / 3)
    assert b.totals == Totals.of(b.results)
    assert b.summary_line() == "Pass Rate: 33.33% (judged 50.00%, 33.33% no verdict)"
    again = BatchResult.model_validate_json(b.model_dump_json())
    assert again.totals == b.totals


def test_eval_result_names_every_result() -> None:
    e = EvalResult(results=mix(1, 0, 1), env_names=["a", "b"])
    assert e.summary_line() == "Pass Rate: 50.00% (judged 100.00%, 50.00% no verdict)"
    with pytest.raises(ValidationError, match="env_names"):
        EvalResult(results=mix(1, 0, 1), env_names=["a"])


def test_timeout_rate_counts_both_sides_of_the_line() -> None:
    results = [
        unjudged("timeout"),
        judged(0.0, passed=False, error_type="solution_timeout"),
        judged(1.0),
        unjudged("sandbox_error"),
    ]
    assert BatchResult(results=results).timeout_rate == 0.5
    assert BatchResult(results=[]).timeout_rate == 0.0


def test_service_time_quantiles() -> None:
    results = [judged(1.0, service=ServiceTime(total_ms=float(ms))) for ms in range(1, 101)]
    q = BatchResult(results=results).service_time_quantiles()
    assert q["max"] == 100.0
    assert q["mean"] == pytest.approx(50.5)
    assert q["p50"] in (50.0, 51.0)
    assert q["p90"] in (90.0, 91.0)
    assert q["p99"] in (99.0, 100.0)
    assert BatchResult(results=[]).service_time_quantiles() == {
        "p50": 0.0,
        "p90": 0.0,
        "p99": 0.0,
        "max": 0.0,
        "mean": 0.0,
    }


def test_service_time_is_the_run_without_the_wait_for_a_sandbox() -> None:
    """One definition: ``run_ms`` leaves out the queue (145 ms of a cold pool's 157 ms)."""
    cold = ServiceTime(
        queue_ms=145.0, start_ms=2.0, verifier_ms=6.0, solution_ms=4.0, total_ms=157.0
    )
    assert cold.run_ms == 12.0
    assert ServiceTime(queue_ms=5.0, total_ms=4.0).run_ms == 0.0  # never negative
    assert "run_ms" not in cold.model_dump()  # derived: the wire format is unchanged
    results = [
        judged(1.0, service=ServiceTime(queue_ms=1000.0, total_ms=1000.0 + ms)) for ms in (1, 2, 3)
    ]
    assert BatchResult(results=results).service_time_quantiles()["max"] == 3.0


# --- Environment ------------------------------------------------------------------------------


def test_environment_needs_a_way_to_verify() -> None:
    with pytest.raises(ValidationError, match="needs test_cases"):
        Environment(name="e", entry_point="f")
    with pytest.raises(ValidationError, match="entry_point"):
        Environment(name="e", test_cases=[{"args": [], "expected": 1}])
    with pytest.raises(ValidationError, match="no 'expected'"):
        Environment(name="e", entry_point="f", test_cases=[{"args": [1]}])
    with pytest.raises(ValidationError, match="expected_stdout"):
        Environment(name="e", kind="script", test_cases=[{"stdin": ""}])
    with pytest.raises(ValidationError, match="repo_path"):
        Environment(name="e", kind="patch")
    with pytest.raises(ValidationError, match="not both"):
        Environment(name="e", verifier_code="x", verifier_path=Path("v.py"))


@pytest.mark.parametrize(
    ("cases", "match"),
    [
        ([1], r"test_cases\[0\]|dict"),
        ([{"args": 1, "expected": 1}], r"args must be a list"),
        ([{"args": [], "kwargs": [], "expected": 1}], r"kwargs must be an object"),
    ],
)
def test_environment_validates_test_cases(cases: list[Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        Environment(name="e", entry_point="f", test_cases=cases)


def test_environment_limits_are_positive() -> None:
    with pytest.raises(ValidationError):
        Environment(name="e", verifier_code="x", timeout=0)
    with pytest.raises(ValidationError):
        Environment(name="e", verifier_code="x", memory_mb=8)
    ok = Environment(name="e", entry_point="f", test_cases=[{"args": [1], "expected": 2}])
    assert ok.timeout == 10.0 and ok.kind == "function"


def test_an_environment_prints_in_a_line() -> None:
    env = Environment(
        name="long",
        entry_point="f",
        test_cases=[{"args": [], "expected": 1}],
        task="Write f.\n" + "A very long task text. " * 100,
    )
    text = repr(env)
    task = "Write f.; A very long task text. A very…"
    assert text == f"Environment(name='long', kind='function', task={task!r})"
    assert "\n" not in text and len(text) < 120
    assert env.model_dump()["task"] == env.task  # the whole task is still there


def test_root_and_a_verifier_image_are_for_a_session_on_an_image() -> None:
    fields = {"name": "t", "kind": "session", "verifier_code": "def verify(w, t):\n    return 1\n"}
    assert Environment(**fields, image="a:1", user="root").user == "root"
    for extra in ({"user": "root"}, {"verifier_image": "b:1"}):
        with pytest.raises(ValueError, match="on an image only"):
            Environment(**fields, **extra)
    with pytest.raises(ValueError, match="user"):
        Environment(**fields, image="a:1", user="admin")
