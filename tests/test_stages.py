"""``deepgym.session.stages_result``: a session in stages' result from its stages' (pure)."""

from __future__ import annotations

import pytest

from deepgym.models import CaseResult, RunResult
from deepgym.session import stages_result


def _judged(score: float, case: str = "t") -> RunResult:
    return RunResult(score=score, passed=score == 1.0, cases=[CaseResult(name=case, passed=True)])


def test_the_mean_of_the_stages_run_each_a_component() -> None:
    got = stages_result([("a", _judged(1.0)), ("b", _judged(0.0, "u"))])
    assert (got.has_verdict, got.score, got.passed) == (True, 0.5, False)
    assert got.reward_components == {"a": 1.0, "b": 0.0}
    assert [c.name for c in got.cases] == ["a: t", "b: u"]
    assert stages_result([("a", _judged(1.0)), ("b", _judged(0.25))], "final").score == 0.25


def test_a_stage_without_a_verdict_is_the_episodes() -> None:
    lost = RunResult.no_verdict("sandbox_error", "the sandbox could not start")
    got = stages_result([("a", _judged(1.0)), ("b", lost)])
    assert got is lost
    assert not stages_result([]).has_verdict


@pytest.mark.parametrize("rule", ["mean", "final"])
def test_every_stage_passed_is_a_pass(rule: str) -> None:
    got = stages_result([("a", _judged(1.0)), ("b", _judged(1.0))], rule)
    assert (got.score, got.passed) == (1.0, True)
