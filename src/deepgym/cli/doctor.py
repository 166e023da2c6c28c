"""``deepgym doctor``: this host's check (``deepgym.sandbox.doctor``), as a table or JSON."""

from __future__ import annotations

import json

import click
from rich.text import Text

from deepgym.cli.common import json_option, line, out
from deepgym.cli.tables import Cell, Column, print_table
from deepgym.sandbox import doctor as checks

_STYLES = {
    checks.OK: "bold green",
    checks.WEAK: "bold yellow",
    checks.FAIL: "bold red",
    checks.SKIPPED: "dim",
    checks.ABSENT: "dim",
}


@click.command("doctor")
@json_option
def doctor_cmd(as_json: bool) -> None:
    """Check that this host can run the sandbox, and with which limits.

    Each line says what was found, what it means for isolation and limits, and the fix when
    something is missing (the docs' Deploy page explains every line).

    \b
    Exit codes: 0 the default sandbox runs with full limits; 1 it runs with
    weaker limits (the lines marked weak); 2 it cannot run here.
    """
    report = checks.diagnose()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        rows: list[list[Cell]] = [
            [
                c.name,
                Text(c.status, style=_STYLES[c.status]),
                line(c.found),
                line(c.means),
                line(c.fix) if c.fix else "",
            ]
            for c in report.checks
        ]
        columns = [
            Column("check"),
            Column("status"),
            Column("found", wrap=True),
            Column("means", wrap=True),
            Column("fix", wrap=True),
        ]
        print_table(out(), "deepgym doctor", columns, rows)
        click.echo(report.summary)
    if report.exit_code:
        raise click.exceptions.Exit(report.exit_code)
