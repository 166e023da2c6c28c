"""Amplified tests: the killing inputs of mutation testing, made test cases of the environment.

``augment(env, report, dg)`` takes the input that killed each survivor of ``report`` (with the
reference's value there), adds those cases to the environment (``deepgym.envs.augmented``:
a HumanEval problem's as asserts, any other's as declarative cases), and keeps them only after
two runs in the real sandbox:

1. the reference against the amplified tests: it must pass them all. A case it fails is
   dropped (the cases map to the verifier's last results, one each, in order) and the rest
   tried once more; if it still fails, nothing is kept;
2. the survivors against the amplified tests: how many now fail (``killed``), the figure that
   says what the new tests buy.

Where the cases are kept (``write``): an environment folder of one's own takes them in its
``test_cases.json``; a suite's environment (HumanEval, a built-in) in the suite's side file
(``$DEEPGYM_HOME/augmented/<suite>.json``, or a path given), which ``load_suite(name,
augmented=True)`` reads. A built-in's folder is never written: its tests come from its
``generate.py``.

An amplified case states what the reference does on an input it accepts. Where the task's
statement excludes inputs the reference nonetheless accepts, such a case can fail a correct
answer: make the reference raise on what the task excludes (the inputs it refuses are never
generated into tests), and read the added cases before training on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from deepgym.envs.augmented import (
    AmplifiedCase,
    fitting,
    side_file,
    unsupported,
    with_cases,
    write_folder,
    write_side_file,
)
from deepgym.envs.qa.mutants import MutationReport, candidates
from deepgym.envs.registry import AGENT_DIR, BUILTIN_DIR, PROGRAMS_DIR
from deepgym.models import Environment, RunResult

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = ["Augmentation", "amplified_cases", "augment", "suite_of"]


@dataclass(frozen=True)
class Augmentation:
    """What ``augment`` did for one environment: the cases it kept (``cases``; ``added``: those
    new to where they were written), how many killing inputs it dropped (no form in the
    environment's tests, or the reference failed them), how many of the ``survivors`` with a
    killing input the amplified tests kill, where it wrote them (``written``: None when nothing
    was written) and, where it kept nothing, ``why``."""

    env: str
    cases: tuple[AmplifiedCase, ...] = ()
    added: int = 0
    dropped: int = 0
    survivors: int = 0
    killed: int = 0
    written: Path | None = None
    why: str = ""

    def to_json(self) -> dict[str, object]:
        """The outcome as plain data (``--json``)."""
        return {
            "env": self.env,
            "cases": len(self.cases),
            "added": self.added,
            "dropped": self.dropped,
            "survivors": self.survivors,
            "killed": self.killed,
            "written": None if self.written is None else str(self.written),
            "why": self.why,
        }


def amplified_cases(report: MutationReport) -> list[AmplifiedCase]:
    """Each survivor's killing input with the reference's value, each input once."""
    out: dict[str, AmplifiedCase] = {}
    for _mid, call, expected in report.kills:
        case = AmplifiedCase(call.name, call.args, call.kwargs, expected)
        out.setdefault(case.key, case)
    return list(out.values())


def suite_of(env: Environment) -> str | None:
    """The suite whose side file keeps ``env``'s cases (``humaneval``, ``builtin``, ...); None
    for an environment folder of one's own (its ``test_cases.json`` takes them)."""
    prefix, slash, _ = env.name.partition("/")
    if env.source_dir is None:
        return prefix if slash else "builtin"
    shipped = (BUILTIN_DIR, AGENT_DIR, PROGRAMS_DIR)
    if any(env.source_dir.resolve().is_relative_to(d) for d in shipped):
        return prefix if slash else "builtin"
    return None


def _new_results(result: RunResult, added: int) -> list[bool] | None:
    """Whether each added case passed: the last ``added`` results of the run, where it has
    at least that many; None where they cannot be told apart."""
    if not result.has_verdict or len(result.cases) < added:
        return None
    return [c.passed for c in result.cases[len(result.cases) - added :]]


def _reference_passes(
    env: Environment, cases: list[AmplifiedCase], dg: DeepGym
) -> tuple[list[AmplifiedCase], int, str]:
    """The cases the reference passes (at most two runs), how many it failed, and why none
    was kept where that is so."""
    reference = env.reference_solution or ""
    for attempt in range(2):
        if not cases:
            return [], 0, "the reference failed every amplified case"
        r = dg.run_one(with_cases(env, cases), reference)
        if r.has_verdict and r.passed and r.score == 1.0:
            return cases, 0, ""
        passed = _new_results(r, len(cases))
        if attempt == 1 or passed is None or all(passed):
            why = "the reference does not pass the amplified tests"
            return [], len(cases), f"{why} ({r.error_type or f'score {r.score:.2f}'})"
        kept = [c for c, ok in zip(cases, passed, strict=True) if ok]
        dropped = len(cases) - len(kept)
        cases = kept
    return [], dropped, "the reference does not pass the amplified tests"


def augment(
    env: Environment,
    report: MutationReport,
    dg: DeepGym,
    *,
    path: str | Path | None = None,
    write: bool = True,
    max_parallel: int = 8,
) -> Augmentation:
    """Add ``report``'s killing inputs to ``env``'s tests, checked as the module's docstring
    says, and (``write``) keep them where ``destination`` says."""
    found = amplified_cases(report)
    survivors = sum(1 for s in report.survivors if s.killing_input is not None)
    if not found:
        return Augmentation(env.name, why="no survivor with a killing input")
    why = unsupported(env)
    if why is not None:
        return Augmentation(env.name, survivors=survivors, why=why)
    cases = fitting(env, found)
    if not cases:
        return Augmentation(env.name, survivors=survivors, why="no case has a form in its tests")
    kept, failed, why = _reference_passes(env, cases, dg)
    dropped = len(found) - len(cases) + failed
    if not kept:
        return Augmentation(env.name, dropped=dropped, survivors=survivors, why=why)
    amplified = with_cases(env, kept)
    killed = _survivors_killed(env, amplified, report, dg, max_parallel)
    written: Path | None = None
    added = len(kept)
    suite = suite_of(env)
    if write and suite is None and path is None and env.source_dir is not None:
        written = env.source_dir / "test_cases.json"
        added = write_folder(env.source_dir, kept)
    elif write:
        written = side_file(suite or "folder", path)
        added = write_side_file(written, suite or "folder", {env.name: kept})[env.name]
    return Augmentation(env.name, tuple(kept), added, dropped, survivors, killed, written)


def _survivors_killed(
    env: Environment,
    amplified: Environment,
    report: MutationReport,
    dg: DeepGym,
    max_parallel: int,
) -> int:
    """How many of ``report``'s survivors with a killing input fail the amplified tests."""
    ids = {s.id for s in report.survivors if s.killing_input is not None}
    answers = [c.answer for c in candidates(env) if c.mutant.id in ids]
    if not answers:
        return 0
    results: Sequence[RunResult] = dg.run_batch(
        amplified, answers, max_parallel=max_parallel
    ).results
    return sum(1 for r in results if r.has_verdict and not r.passed)
