"""An in-memory backend for fast unit tests: answers are scripts of what the sandbox "saw"."""

from __future__ import annotations

import asyncio
from collections import Counter

from deepgym.exceptions import SandboxUnavailableError
from deepgym.sandbox.base import Job, RawRun
from deepgym.verdict import Outcome


def ok(score: float = 1.0) -> Outcome:
    return Outcome(report={"status": "ok", "score": score}, in_play=True, verifier_exit_code=0)


class FakeBackend:
    """``answer`` -> outcome: "pass", "fail", "flaky" (start fails once, then passes),
    "down" (start always fails), "unavailable" (this host cannot run the sandbox), "sleep:<s>"
    (passes after s seconds)."""

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
        if answer.startswith("sleep:"):
            await asyncio.sleep(float(answer.split(":")[1]))
            outcome = ok()
        elif answer == "fail":
            outcome = ok(0.0)
        elif answer == "down" or (answer == "flaky" and self.calls[answer] == 1):
            outcome = Outcome(report=None, in_play=False, start_failed=True, detail="no sandbox")
        else:
            outcome = ok()
        return RawRun(outcome=outcome, report=outcome.report, isolation="fake", total_ms=5.0)

    async def close(self) -> None:
        self.closed = True
