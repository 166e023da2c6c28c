"""An in-memory backend for fast unit tests: answers are scripts of what the sandbox "saw"."""

from __future__ import annotations

import asyncio
from collections import Counter

from deepgym.exceptions import SandboxUnavailableError
from deepgym.models import Environment, ExecResult
from deepgym.sandbox.base import Job, RawRun
from deepgym.verdict import Outcome

TOY = Environment(
    name="toy",
    entry_point="f",
    test_cases=[{"args": [], "expected": 1}],
    timeout=30.0,
    reference_solution="ref",
)
"""A function task whose reference a fake backend \"runs\": for the engine and limit tests."""

SILENT_EXEC = ExecResult(
    stdout="",
    stderr="",
    exit_code=0,
    timed_out=False,
    truncated=False,
    duration_s=0.0,
    stdout_bytes=0,
    stderr_bytes=0,
)
"""A session command that printed nothing and exited 0 at once: what a fake session returns."""


def ok(score: float = 1.0) -> Outcome:
    return Outcome(report={"status": "ok", "score": score}, in_play=True, verifier_exit_code=0)


class FakeBackend:
    """``answer`` -> outcome: "pass", "fail", "flaky" (start fails once, then passes),
    "down" (start always fails), "unavailable" (this host cannot run the sandbox), "sleep:<s>"
    (passes after s seconds, or runs into the job's time limit, busy, if that is sooner)."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.jobs: list[Job] = []
        self.closed = False

    async def run(self, job: Job) -> RawRun:
        self.calls[job.answer] += 1
        self.jobs.append(job)
        answer = job.answer
        if answer == "unavailable":
            raise SandboxUnavailableError("bwrap cannot run here: user namespaces are off")
        took = 0.005
        if answer.startswith("sleep:"):
            took = float(answer.split(":")[1])
            if took > job.timeout:  # the sandbox's clock fires, the solution busy
                await asyncio.sleep(job.timeout)
                outcome = Outcome(report=None, in_play=True, wall_timeout=True, solution_busy=True)
                return RawRun(outcome, None, isolation="fake", total_ms=job.timeout * 1000.0)
            await asyncio.sleep(took)
            outcome = ok()
        elif answer == "fail":
            outcome = ok(0.0)
        elif answer == "down" or (answer == "flaky" and self.calls[answer] == 1):
            outcome = Outcome(report=None, in_play=False, start_failed=True, detail="no sandbox")
        else:
            outcome = ok()
        return RawRun(
            outcome=outcome, report=outcome.report, isolation="fake", total_ms=took * 1000.0
        )

    async def close(self) -> None:
        self.closed = True
