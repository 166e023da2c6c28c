"""``results``: an environment's scoring turns a judged run's score into reward (``scored``); a run
that reached its memory limit names it in its cause and in the cases it killed."""

from __future__ import annotations

import pytest

from deepgym.results import build_result, scored
from deepgym.sandbox.base import RawRun
from deepgym.verdict import Classification, Outcome


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


def _memory_run(cases: list[dict[str, object]], in_compile: bool = False) -> RawRun:
    report = {"event": "report", "status": "ok", "score": 0.0, "passed": False, "cases": cases}
    outcome = Outcome(report=report, in_play=True, verifier_exit_code=0)
    return RawRun(
        outcome=outcome, report=report, isolation="pool", limit_fired="memory",
        in_compile=in_compile,
    )  # fmt: skip


def test_a_case_killed_at_the_memory_limit_names_the_limit() -> None:
    killed = "solution process killed by signal 9"
    raw = _memory_run(
        [
            {"name": "a", "passed": True, "message": ""},
            {"name": "b", "passed": False, "message": killed},
            {"name": "c", "passed": False, "message": "expected 3, got 4"},
        ]
    )
    result, _ = build_result(raw, "toy", 1.0, memory_mb=256, scoring="all")
    assert result.error == "the answer hit its 256 MB memory limit"
    assert [c.message for c in result.cases] == [
        "",
        f"the answer hit its 256 MB memory limit ({killed})",
        "expected 3, got 4",  # not the limit's doing: as the judge said it
    ]


def test_a_compiler_killed_at_its_memory_limit_keeps_its_own_words() -> None:
    killed = "solution process killed by signal 9"
    raw = _memory_run([{"name": "b", "passed": False, "message": killed}], in_compile=True)
    result, _ = build_result(raw, "toy", 1.0, memory_mb=256, scoring="all")
    assert result.cases[0].message == killed
