"""The commands about environments themselves: ``list``, ``show``, ``check`` and ``qa``.

``check`` and ``qa`` run ``deepgym.envs.check`` (the reference scores 1.0, wrong answers about 0,
reruns agree, time limits fit) and exit 1 when a check fails; the checks are decided there, and
only printed here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click
from rich.table import Table
from rich.text import Text

from deepgym.cli import common
from deepgym.cli.common import (
    EXIT_FAILED,
    CliError,
    json_option,
    line,
    load_env,
    out,
    parallel_option,
    progress,
    sandbox_option,
)
from deepgym.envs.check import CheckReport, check_environment, check_environments
from deepgym.envs.registry import list_environments, load_environment, load_suite

__all__ = ["check", "list_cmd", "qa", "show"]


@click.command("list")
def list_cmd() -> None:
    """List the built-in environments."""
    table = Table(title="built-in environments", title_justify="left")
    for column in ("name", "kind", "difficulty", "tags"):
        table.add_column(column)
    for name in list_environments():
        e = load_environment(name)
        table.add_row(Text(e.name), e.kind, Text(e.difficulty or "-"), Text(", ".join(e.tags)))
    out().print(table)


@click.command()
@click.argument("env")
def show(env: str) -> None:
    """Print ENV's task (its task.md)."""
    environment = load_env(env)
    if not environment.task.strip():
        raise CliError(f"{environment.name} has no task text")
    click.echo(environment.task.rstrip("\n"))


def _check_json(reports: Sequence[CheckReport]) -> str:
    return json.dumps(
        [
            {
                "env": r.env_name,
                "ok": r.ok,
                "checks": [{"name": c.name, "ok": c.ok, "message": c.message} for c in r.checks],
            }
            for r in reports
        ],
        indent=2,
    )


@click.command()
@click.argument("env")
@sandbox_option
@parallel_option
@json_option
def check(env: str, sandbox: str | None, max_parallel: int, as_json: bool) -> None:
    """Check ENV (a built-in name or a folder): its reference scores 1.0, wrong answers ~0,
    reruns agree, time limits fit. Exit 1 when a check fails."""
    environment = load_env(env)
    with common.make_client(sandbox) as dg:
        report = check_environment(environment, dg, max_parallel=max_parallel)
    if as_json:
        click.echo(_check_json([report]))
    else:
        table = Table(title=f"{environment.name} ({environment.kind})", title_justify="left")
        for column in ("check", "result", "detail"):
            table.add_column(column, overflow="fold")
        for c in report.checks:
            mark = Text("ok", style="bold green") if c.ok else Text("FAILED", style="bold red")
            table.add_row(Text(c.name), mark, Text(line(c.message) if c.message else ""))
        out().print(table)
        failed = [c.name for c in report.failures]
        click.echo(
            f"{len(failed)} of {len(report.checks)} checks failed: {', '.join(failed)}"
            if failed
            else f"all {len(report.checks)} checks passed"
        )
    if not report.ok:
        raise click.exceptions.Exit(EXIT_FAILED)


@click.command()
@sandbox_option
@parallel_option
@json_option
def qa(sandbox: str | None, max_parallel: int, as_json: bool) -> None:
    """Run ``deepgym check`` on every built-in environment. Exit 1 when any check fails."""
    envs = load_suite("builtin")
    with common.make_client(sandbox) as dg, progress("qa") as advance:
        reports = check_environments(envs, dg, max_parallel=max_parallel, progress=advance)
    if as_json:
        click.echo(_check_json(reports))
    else:
        table = Table(title="built-in environments", title_justify="left")
        for column in ("environment", "result", "failed checks"):
            table.add_column(column, overflow="fold")
        for r in reports:
            mark = Text("ok", style="bold green") if r.ok else Text("FAILED", style="bold red")
            why = "; ".join(f"{c.name}: {line(c.message)}" for c in r.failures)
            table.add_row(Text(r.env_name), mark, Text(why))
        out().print(table)
        good = sum(r.ok for r in reports)
        click.echo(f"{good}/{len(reports)} environments pass every check")
    if not all(r.ok for r in reports):
        raise click.exceptions.Exit(EXIT_FAILED)
