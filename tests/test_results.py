"""``results.scored``: an environment's scoring turns a judged run's score into reward."""

from __future__ import annotations

import pytest

from deepgym.results import scored
from deepgym.verdict import Classification


def judged(score: float, passed: bool) -> Classification:
    return Classification(score=score, passed=passed, error_type=None, has_verdict=True)


@pytest.mark.parametrize(
    ("score", "passed", "all_", "partial"),
    [
        (0.25, False, 0.0, 0.25),  # a share of cases: nothing unless every case holds
        (0.99, False, 0.0, 0.99),
        (1.0, True, 1.0, 1.0),
        (0.0, False, 0.0, 0.0),
        (0.8, True, 0.8, 0.8),  # a verifier that says it passed keeps its score
    ],
)
def test_all_or_nothing_pays_only_a_pass(
    score: float, passed: bool, all_: float, partial: float
) -> None:
    c = judged(score, passed)
    assert scored(c, "all").score == all_
    assert scored(c, "partial") is c and c.score == partial
    assert scored(c, "all").passed is passed


def test_a_run_without_a_verdict_is_left_as_it_is() -> None:
    c = Classification(score=0.0, passed=False, error_type="sandbox_error", has_verdict=False)
    assert scored(c, "all") is c
