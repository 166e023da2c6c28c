"""The commands about environments themselves: ``list``, ``show``, ``check`` and ``qa``.

``list`` and ``qa`` cover every environment deepgym ships (``shipped``): the built-in answer
environments (function, script, patch) and the session environments (``agent/<id>``), each
listed with its kind.

``check`` and ``qa`` run ``deepgym.envs.qa.check`` (the reference scores 1.0, wrong answers about 0,
reruns agree, time limits fit; for a session, ``deepgym.envs.qa.session_check``: the reference
agent scores 1.0, a no-op, a busy and a random agent about 0 with a verdict) and exit 1 when a
check fails; the checks are decided there, and only printed here. With ``--mutants`` they
measure each verifier's mutation score (``deepgym.envs.qa.mutants``), and with ``--augment``
add the inputs that killed its survivors to its tests (``deepgym.envs.qa.augment``). Each keeps
its report, what ``--json`` prints, in the run store (``--store``, ``--no-store``), where the
console's QA page shows it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.text import Text

from deepgym.cli import common
from deepgym.cli.common import (
    EXIT_FAILED,
    CliError,
    json_option,
    line,
    load_env,
    load_targets,
    no_store_option,
    out,
    parallel_option,
    progress,
    sandbox_option,
    store_option,
)
from deepgym.cli.tables import Cell, Column, print_table
from deepgym.envs.qa import augment as augmentation
from deepgym.envs.qa.augment import Augmentation
from deepgym.envs.qa.check import CheckReport, check_environment, check_environments
from deepgym.envs.qa.mutants import (
    MUTATION_THRESHOLD,
    MutationReport,
    mutation_summary,
    mutation_test,
    mutation_tests,
)
from deepgym.envs.registry import (
    list_session_environments,
    list_suites,
    load_environment,
    load_suite,
)
from deepgym.exceptions import ConfigError
from deepgym.models import Environment
from deepgym.store import save_qa

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = ["check", "limits_cmd", "list_cmd", "qa", "shipped", "show"]


def shipped() -> list[Environment]:
    """Every environment deepgym ships: the ``builtin`` suite, then the session environments."""
    return [*load_suite("builtin"), *(load_environment(n) for n in list_session_environments())]


@click.command("list")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the environments as JSON: name, kind, difficulty, tags, description.",
)
def list_cmd(as_json: bool) -> None:
    """List the built-in environments with their kind: function, script and patch (an answer
    is scored: 'deepgym run'), and session (an agent acts: 'deepgym episode')."""
    envs = shipped()
    if as_json:
        click.echo(json.dumps([e.catalog_entry() for e in envs], indent=2))
        return
    columns = [Column("name"), Column("kind"), Column("difficulty"), Column("tags", wrap=True)]
    table: list[list[Cell]] = [
        [e.name, e.kind, e.difficulty or "-", ", ".join(e.tags)] for e in envs
    ]
    print_table(out(), "built-in environments", columns, table)


@click.command()
@click.argument("env")
def show(env: str) -> None:
    """Print ENV's task (its task.md)."""
    environment = load_env(env)
    if not environment.task.strip():
        raise CliError(f"{environment.name} has no task text")
    click.echo(environment.task.rstrip("\n"))


def _mark(ok: bool) -> Text:
    return Text("ok", style="bold green") if ok else Text("FAILED", style="bold red")


def _check_json(
    reports: Sequence[CheckReport],
    envs: Sequence[Environment] = (),
    mutations: Sequence[MutationReport] | None = None,
    augmented: Sequence[Augmentation] | None = None,
) -> str:
    """The reports as JSON: ``{"env", "ok", "checks"}`` each, and with ``mutations`` (one per
    report) also ``"kind"`` and ``"mutation"`` (``MutationReport.to_json``); with ``augmented``
    also ``"augmented"`` (``Augmentation.to_json``)."""
    entries: list[dict[str, object]] = []
    for i, r in enumerate(reports):
        entry: dict[str, object] = {
            "env": r.env_name,
            "ok": r.ok,
            "checks": [{"name": c.name, "ok": c.ok, "message": c.message} for c in r.checks],
        }
        if mutations is not None:
            entry["kind"] = envs[i].kind
            entry["mutation"] = mutations[i].to_json()
        if augmented is not None:
            entry["augmented"] = augmented[i].to_json()
        entries.append(entry)
    return json.dumps(entries, indent=2)


def _score(m: MutationReport) -> Text:
    style = "bold green" if m.ok else "bold red" if m.gated else "bold yellow"
    return Text(
        "-" if m.score is None else f"{m.score:.2f}",
        style="bold" if m.score is None and m.ok else style,
    )


def _print_mutations(reports: Sequence[MutationReport], title: str) -> None:
    """The mutation table, then each survivor as a diff with the input that kills it."""
    columns = [
        Column("environment"),
        Column("kind"),
        Column("mutants", justify="right"),
        Column("equivalent", justify="right"),
        Column("killed", justify="right"),
        Column("survived", justify="right"),
        Column("undecided", justify="right"),
        Column("score", justify="right"),
        Column("seconds", justify="right"),
    ]
    rows: list[list[Cell]] = [
        [
            m.env,
            m.kind,
            str(m.mutants),
            str(len(m.equivalents)),
            str(m.killed),
            str(m.survived) + (f" (+{m.no_verdict} no verdict)" if m.no_verdict else ""),
            str(m.undecided),
            _score(m),
            f"{m.seconds:.1f}",
        ]
        for m in reports
    ]
    print_table(out(), title, columns, rows)
    for m in reports:
        for s in m.survivors:
            click.echo(f"\n{m.env}: survivor {s.id} ({s.description})")
            click.echo(s.diff.rstrip("\n"))
            if s.killing_input is not None:
                click.echo(f"  killed by this test case: {s.killing_input}")
        for u in m.undecideds:
            click.echo(f"\n{m.env}: undecided {u.id} ({u.description}): {u.why}")
            click.echo(u.diff.rstrip("\n"))


def _augment_all(
    envs: Sequence[Environment],
    mutations: Sequence[MutationReport],
    dg: DeepGym,
    path: Path | None,
    max_parallel: int,
) -> list[Augmentation]:
    """``augment`` for each environment with its mutation report."""
    with progress("augment") as advance:
        out = []
        for i, (env, m) in enumerate(zip(envs, mutations, strict=True)):
            out.append(augmentation.augment(env, m, dg, path=path, max_parallel=max_parallel))
            advance(i + 1, len(envs))
    return out


def _print_augmented(done: Sequence[Augmentation]) -> None:
    """What ``--augment`` added, environment by environment, and the totals."""
    for a in done:
        if a.written is not None:
            click.echo(
                f"{a.env}: {a.added} test case(s) added to {a.written} ({len(a.cases)} checked: "
                f"the reference passes them; they kill {a.killed} of {a.survivors} survivors"
                + (f"; {a.dropped} dropped" if a.dropped else "")
                + ")"
            )
        elif a.why and a.why != "no survivor with a killing input":
            click.echo(f"{a.env}: nothing added: {a.why}")
    gained = sum(1 for a in done if a.added)
    click.echo(
        f"--augment: {gained}/{len(done)} environments gained tests "
        f"({sum(a.added for a in done)} cases); the amplified tests kill "
        f"{sum(a.killed for a in done)} of {sum(a.survivors for a in done)} survivors"
    )


def _keep(
    text: str, meta: Mapping[str, str | bool | None], store_path: Path | None, quiet: bool
) -> None:
    """Keep the report ``text`` (what ``--json`` prints) in the run store for the console; a
    default store that cannot open is skipped with a note, a ``--store`` one is an error."""
    try:
        report_id = save_qa(json.loads(text), meta, path=store_path)
    except ConfigError as exc:
        if store_path is not None:
            raise
        click.echo(f"note: QA report not kept ({exc})", err=True)
        return
    if not quiet:
        click.echo(f"QA report {report_id} kept: 'deepgym console' shows it")


augment_option = click.option(
    "--augment",
    is_flag=True,
    help="Also (implies --mutants) add the inputs that kill the survivors to the tests, with the "
    "reference's outputs, once the reference passes them: a folder's test_cases.json, or a "
    "suite's side file ($DEEPGYM_HOME/augmented/SUITE.json; load_suite(..., augmented=True)).",
)
augment_file_option = click.option(
    "--augment-file",
    "augment_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --augment: keep the added cases in this side file instead.",
)


@click.command()
@click.argument("env")
@sandbox_option
@parallel_option
@json_option
@click.option(
    "--mutants",
    is_flag=True,
    help="Also run the reference's mutants and report the mutation score "
    f"(exit 1 below {MUTATION_THRESHOLD}).",
)
@augment_option
@augment_file_option
@store_option
@no_store_option
def check(
    env: str,
    sandbox: str | None,
    max_parallel: int,
    as_json: bool,
    mutants: bool,
    augment: bool,
    augment_file: Path | None,
    store_path: Path | None,
    no_store: bool,
) -> None:
    """Check ENV (a built-in name or a folder): its reference scores 1.0, wrong answers ~0,
    reruns agree, time limits fit; with --mutants, its tests fail the reference's mutants;
    with --augment, the inputs that kill the survivors become new test cases.

    \b
    Exit codes: 0 every check passed; 1 a check failed (its detail says what to
    do) or the mutation score is below the threshold; 2 bad input; 130 interrupted.
    """
    environment = load_env(env)
    mutation: MutationReport | None = None
    done: list[Augmentation] | None = None
    with common.make_client(sandbox) as dg:
        report = check_environment(environment, dg, max_parallel=max_parallel)
        if mutants or augment:
            with progress("mutants") as advance:
                mutation = mutation_test(
                    environment, dg, max_parallel=max_parallel, progress=advance
                )
        if augment and mutation is not None:
            done = _augment_all([environment], [mutation], dg, augment_file, max_parallel)
    mutations = None if mutation is None else [mutation]
    text = _check_json([report], [environment], mutations, done)
    if as_json:
        click.echo(text)
    else:
        rows: list[list[Cell]] = [
            [c.name, _mark(c.ok), line(c.message) if c.message else ""] for c in report.checks
        ]
        columns = [Column("check"), Column("result"), Column("detail", wrap=True)]
        print_table(out(), f"{environment.name} ({environment.kind})", columns, rows)
        failed = [c.name for c in report.failures]
        click.echo(
            f"{len(failed)} of {len(report.checks)} checks failed: {', '.join(failed)}"
            if failed
            else f"all {len(report.checks)} checks passed"
        )
        if mutation is not None:
            _print_mutations([mutation], f"mutation score of {environment.name}")
            click.echo(mutation_summary([mutation]))
        if done is not None:
            _print_augmented(done)
    if not no_store:
        meta = {
            "command": "check",
            "env": env,
            "sandbox": sandbox,
            "mutants": mutants or augment or None,
            **({"augment": True} if augment else {}),
        }
        _keep(text, meta, store_path, as_json)
    if not report.ok or (mutation is not None and mutation.gated and not mutation.ok):
        raise click.exceptions.Exit(EXIT_FAILED)


@click.command()
@sandbox_option
@parallel_option
@json_option
@click.option(
    "--mutants",
    is_flag=True,
    help="Also run each reference's mutants and report the mutation scores "
    f"(exit 1 when a shipped environment is below {MUTATION_THRESHOLD}).",
)
@click.option(
    "--suite",
    default=None,
    metavar="NAME",
    help="Check this suite (builtin, humaneval, ..., or a folder of environment folders) instead "
    "of every shipped environment; a registered suite's mutation scores (humaneval: published "
    "tests) are reported as they are.",
)
@augment_option
@augment_file_option
@store_option
@no_store_option
def qa(
    sandbox: str | None,
    max_parallel: int,
    as_json: bool,
    mutants: bool,
    suite: str | None,
    augment: bool,
    augment_file: Path | None,
    store_path: Path | None,
    no_store: bool,
) -> None:
    """Run 'deepgym check' on every built-in environment, session environments included (or on
    a --suite); with --mutants, measure each verifier's mutation score too; with --augment, add
    the inputs that kill each one's survivors to its tests.

    \b
    Exit codes: 0 every check of every environment passed; 1 a check failed, or
    (--mutants) a mutation score is below the threshold, except in a registered
    suite such as humaneval; 2 bad input; 130 interrupted.
    """
    envs = shipped() if suite is None else load_targets(suite)
    mutations: list[MutationReport] | None = None
    done: list[Augmentation] | None = None
    with common.make_client(sandbox) as dg:
        with progress("qa") as advance:
            reports = check_environments(envs, dg, max_parallel=max_parallel, progress=advance)
        if mutants or augment:
            with progress("mutants") as advance:
                mutations = mutation_tests(envs, dg, max_parallel=max_parallel, progress=advance)
        if augment and mutations is not None:
            done = _augment_all(envs, mutations, dg, augment_file, max_parallel)
    text = _check_json(reports, envs, mutations, done)
    if as_json:
        click.echo(text)
    else:
        rows: list[list[Cell]] = [
            [r.env_name, _mark(r.ok), "; ".join(f"{c.name}: {line(c.message)}" for c in r.failures)]
            for r in reports
        ]
        columns = [Column("environment"), Column("result"), Column("failed checks", wrap=True)]
        title = "built-in environments" if suite is None else f"suite {suite}"
        print_table(out(), title, columns, rows)
        good = sum(r.ok for r in reports)
        click.echo(f"{good}/{len(reports)} environments pass every check")
        if mutations is not None:
            _print_mutations(mutations, f"mutation scores ({title})")
            click.echo(mutation_summary(mutations))
        if done is not None:
            _print_augmented(done)
    if not no_store:
        meta = {
            "command": "qa",
            "sandbox": sandbox,
            "suite": suite,
            "mutants": mutants or augment or None,
            **({"augment": True} if augment else {}),
        }
        _keep(text, meta, store_path, as_json)
    weak = (
        not _reported_as_is(suite)
        and mutations is not None
        and any(m.gated and not m.ok for m in mutations)
    )
    if not all(r.ok for r in reports) or weak:
        raise click.exceptions.Exit(EXIT_FAILED)


def _reported_as_is(suite: str | None) -> bool:
    """A registered suite (humaneval, programs: tests published as they are) is reported, not
    gated; the shipped environments, ``builtin`` and a folder of one's own are gated."""
    return suite is not None and suite != "builtin" and suite in list_suites()


@click.command("limits")
@click.argument("suite_or_envs")
@sandbox_option
@json_option
def limits_cmd(suite_or_envs: str, sandbox: str | None, as_json: bool) -> None:
    """Derive the time limit of every environment of a suite (builtin, humaneval) or a list
    (a,b,c) ahead of training, and print them.

    Each limit comes from the reference's runtime, measured once per environment and machine
    and kept in $DEEPGYM_HOME/limits.sqlite, where every client on the machine reads it.
    """
    envs = load_targets(suite_or_envs)
    limits: list[tuple[str, float, bool]] = []
    with common.make_client(sandbox) as dg, progress("limits") as advance:
        for i, env in enumerate(envs):
            derived = env.time_limit is None and env.reference_solution is not None
            limits.append((env.name, dg.time_limit(env), derived))
            advance(i + 1, len(envs))
    if as_json:
        click.echo(
            json.dumps([{"env": n, "time_limit": t, "derived": d} for n, t, d in limits], indent=2)
        )
        return
    rows: list[list[Cell]] = [
        [n, f"{t:.2f}", "derived" if d else "fixed (no reference, or a time_limit)"]
        for n, t, d in limits
    ]
    columns = [Column("environment"), Column("limit s", justify="right"), Column("from")]
    print_table(out(), f"time limits ({len(limits)} environments)", columns, rows)
