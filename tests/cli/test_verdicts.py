"""``deepgym.cli.verdicts``: ``run``'s exit codes and ``run``'s report, for every command that
ends with a verdict."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

from deepgym.cli.common import EXIT_FAILED, EXIT_NO_VERDICT
from deepgym.cli.verdicts import exit_code, exit_on, show_result, verdict_text
from deepgym.models import RunResult

FAILED = RunResult(
    score=0.5,
    passed=False,
    cases=[
        {"name": "case_1", "passed": False, "message": "expected '42', got '41'"},
        {"name": "case_2", "passed": True},
    ],
)
PASSED = RunResult(score=1.0, passed=True)
NONE = RunResult(
    score=0.0,
    passed=False,
    has_verdict=False,
    error_type="verifier_error",
    error="RuntimeError: broken verifier",
)


@pytest.mark.parametrize(
    ("result", "code"), [(PASSED, 0), (FAILED, EXIT_FAILED), (NONE, EXIT_NO_VERDICT)]
)
def test_exit_codes_are_runs(result: RunResult, code: int) -> None:
    assert exit_code(result) == code
    if code:
        with pytest.raises(click.exceptions.Exit) as info:
            exit_on(result)
        assert info.value.exit_code == code
    else:
        exit_on(result)


def shown(result: RunResult | dict[str, Any] | None) -> str:
    @click.command()
    def show() -> None:
        show_result(result)

    return CliRunner(env={"COLUMNS": "120"}).invoke(show, []).output


@pytest.mark.parametrize("stored", [False, True])
def test_each_case_is_shown_with_its_message(stored: bool) -> None:
    text = shown(FAILED.model_dump(mode="json") if stored else FAILED)
    assert text.startswith("--- verdict: 0.500\n")
    assert "tests (1/2 passed)" in text
    assert "case_1" in text and "expected '42', got '41'" in text


def test_a_result_without_a_verdict_says_why() -> None:
    text = shown(NONE)
    assert text.startswith("--- verdict: no verdict (verifier_error)\n")
    assert "RuntimeError: broken verifier" in text


def test_an_unfinished_or_foreign_stored_result() -> None:
    assert shown(None) == "--- verdict: unfinished\n"
    foreign = {**FAILED.model_dump(mode="json"), "a_field_of_another_version": 1}
    text = shown(foreign)
    assert text.startswith("--- verdict: 0.500\n") and "--json shows it whole" in text
    assert verdict_text({"has_verdict": True, "score": 1.0, "passed": True}) == "1.000 passed"
