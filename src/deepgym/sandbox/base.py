"""The backend protocol and the job / raw-outcome records that cross it.

A backend runs one job (an environment and one answer) and returns a ``RawRun``: the evidence,
unclassified. The client classifies it with the pure rules in ``deepgym.verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from deepgym.models import Environment
from deepgym.verdict import Outcome


@dataclass(frozen=True)
class RunInput:
    """What one run of a script environment brings besides the environment (a SandboxFusion
    request's): its test cases, in place of the environment's, sent with the job (nothing is
    staged per run, so one prepared environment serves every request); the files written into
    each program's work dir before it runs (name: base64, names and sizes checked by whoever
    made it, ``judge.files``); and the names of the files read back from the work dir after
    each program ends (``CaseOutput.files``)."""

    cases: tuple[dict[str, Any], ...] | None = None
    files: tuple[tuple[str, str], ...] = ()
    fetch: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    """One answer to one environment, with the limits that apply to this run."""

    env: Environment
    answer: str
    timeout: float
    case_timeout: float
    start_by: float | None = None
    """The latest instant (``time.monotonic()``) the run may start at: one still waiting for a
    sandbox then never starts and has no verdict (``not_started``), because its client will
    have given up before it could end. None: it waits as long as it takes."""
    input: RunInput | None = None
    """The run's own cases and files (None: the environment's cases, no files)."""


@dataclass
class RawRun:
    """What a backend saw: the outcome to classify, and the evidence to report."""

    outcome: Outcome
    report: dict[str, Any] | None
    isolation: str
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    in_play_ms: float | None = None
    in_play_by: str | None = None
    limit_fired: str | None = None
    limit_mechanism: dict[str, str] = field(default_factory=dict)
    solution_cpu_ms: float | None = None
    peak_memory_mb: float | None = None
    signal: int | None = None
    start_ms: float = 0.0
    total_ms: float = 0.0
    queue_ms: float = 0.0
    """Time the backend held the job before a sandbox was free (pool: waiting for a worker)."""
    compile_ms: float | None = None
    """A compiled language: the compile phase (0.0 from the cache); None for Python."""
    in_compile: bool = False
    """The run ended in its compile phase (no program): its evidence is the compiler's."""


def not_started(isolation: str, why: str) -> RawRun:
    """A run that waited for a sandbox past its ``Job.start_by`` and never started: no verdict
    (``timeout``, before the answer came into play), with ``why`` as its message."""
    outcome = Outcome(report=None, in_play=False, wall_timeout=True, detail=why)
    return RawRun(outcome=outcome, report=None, isolation=isolation)


class Backend(Protocol):
    """Runs jobs. ``run`` is the one required method; ``close`` releases what it holds."""

    name: str

    async def run(self, job: Job) -> RawRun:
        """Run one job and return what the sandbox saw (never classified here)."""
        ...

    async def close(self) -> None:
        """Release what the backend holds: processes, folders, cgroups."""
        ...
