"""One verdict, as the commands that end with one show it and exit on it: ``run``'s exit codes and
``run``'s report (each case with the verifier's message), for an episode and a session as for
an answer.

Invariants:

- ``exit_code`` is the one rule: 0 the result passed, 1 it was judged and did not pass
  (``EXIT_FAILED``), 3 it has no verdict (``EXIT_NO_VERDICT``). It reads only
  ``RunResult.has_verdict`` and ``passed``; nothing here recomputes a verdict.
- ``show_result`` prints the ``--- verdict: ...`` line, then ``run``'s own report of the result
  (``deepgym.cli.runs``), so a failing case's message reads the same everywhere.
"""

from __future__ import annotations

from typing import Any

import click
from pydantic import ValidationError

from deepgym.cli import runs
from deepgym.cli.common import EXIT_FAILED, EXIT_NO_VERDICT
from deepgym.models import RunResult

__all__ = ["exit_code", "exit_on", "show_result", "verdict_text"]


def exit_code(result: RunResult) -> int:
    """``run``'s exit code for ``result``: 0 passed, 1 judged and not passed, 3 no verdict."""
    if not result.has_verdict:
        return EXIT_NO_VERDICT
    return 0 if result.passed else EXIT_FAILED


def exit_on(result: RunResult) -> None:
    """End the command with ``exit_code(result)`` unless that is 0."""
    code = exit_code(result)
    if code:
        raise click.exceptions.Exit(code)


def verdict_text(result: dict[str, Any] | None) -> str:
    """``0.400``, ``1.000 passed``, ``no verdict (<error_type>)`` or ``unfinished`` (no result
    yet): a stored result's verdict in a few words."""
    if result is None:
        return "unfinished"
    if not result.get("has_verdict", True):
        return f"no verdict ({result.get('error_type')})"
    return f"{result.get('score', 0.0):.3f}" + (" passed" if result.get("passed") else "")


def show_result(result: RunResult | dict[str, Any] | None) -> None:
    """The ``--- verdict: ...`` line, then ``run``'s report of ``result`` (a stored one is read
    back first): its fields and each case with the verifier's message. A stored result this
    version cannot read (written by another) is shown by its verdict line alone."""
    stored = result.model_dump(mode="json") if isinstance(result, RunResult) else result
    click.echo(f"--- verdict: {verdict_text(stored)}")
    if result is None or isinstance(result, RunResult):
        parsed = result
    else:
        try:
            parsed = RunResult.model_validate(result)
        except ValidationError:
            click.echo("(a result stored by another version of deepgym: --json shows it whole)")
            return
    if parsed is not None:
        runs.run_report(parsed)  # the report ``run`` prints, so that it reads the same
