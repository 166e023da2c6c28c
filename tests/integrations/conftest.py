"""Shared pieces of the adapter tests: a scripted backend, environments, offline Hugging Face.

``ScriptedBackend`` answers from the answer's text (``pass``, ``fail``, ``half``, ``nov`` for a
verifier that failed before the answer came into play, ``raise`` for a host failure,
``unavailable`` for a sandbox this host cannot run, ``sleep:<s>``); every other answer passes.
Tests that need the real sandbox say so and use the default client.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deepgym import Environment
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import SandboxUnavailableError
from deepgym.sandbox.base import Job, RawRun
from deepgym.verdict import Outcome
from tests.procs import descendants

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BROKEN = Environment(
    name="broken",
    verifier_code="def verify(solution, test_cases):\n    raise RuntimeError('broke')\n",
    timeout=10.0,
)
"""A verifier that crashes before it touches the answer: every run has no verdict."""

TWO_SUM_OK = (
    "def two_sum(nums, target):\n"
    "    seen = {}\n"
    "    for i, x in enumerate(nums):\n"
    "        if target - x in seen:\n"
    "            return [seen[target - x], i]\n"
    "        seen[x] = i\n"
)


def _report(score: float, cases: int = 2) -> dict[str, Any]:
    passed = [i < round(score * cases) for i in range(cases)]
    return {
        "status": "ok",
        "score": score,
        "reward_components": {"correct": score, "style": 0.5},
        "cases": [{"name": f"test_{i}", "passed": p} for i, p in enumerate(passed)],
    }


class ScriptedBackend:
    """An in-memory backend: the answer's text picks what the sandbox "saw" (in an environment
    named ``broken``, every run has no verdict)."""

    name = "scripted"

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.envs: list[str] = []

    async def run(self, job: Job) -> RawRun:
        answer = job.answer.strip()
        if job.answer != job.env.reference_solution:  # measuring a time limit is not a sample
            self.answers.append(answer)
            self.envs.append(job.env.name)
        if job.env.name == "broken":
            answer = "nov"
        if answer.startswith("sleep:"):
            await asyncio.sleep(float(answer.split(":")[1]))
            answer = "pass"
        if answer == "nov":
            outcome = Outcome(report=None, in_play=False, verifier_exit_code=2, detail="broke")
            return RawRun(outcome=outcome, report=None, isolation="scripted", exit_code=2)
        if answer == "raise":
            raise OSError("the host ran out of pipes")
        if answer == "unavailable":
            raise SandboxUnavailableError("bwrap cannot run here: user namespaces are off")
        score = {"fail": 0.0, "half": 0.5}.get(answer, 1.0)
        report = _report(score)
        outcome = Outcome(report=report, in_play=True, verifier_exit_code=0)
        return RawRun(outcome=outcome, report=report, isolation="scripted", total_ms=1.0)

    async def close(self) -> None:
        pass


def scripted_client() -> tuple[AsyncDeepGym, ScriptedBackend]:
    backend = ScriptedBackend()
    return AsyncDeepGym(backend=backend), backend


@pytest.fixture
def scripted() -> Iterator[tuple[AsyncDeepGym, ScriptedBackend]]:
    client, backend = scripted_client()
    yield client, backend
    asyncio.run(client.close())


@pytest.fixture(autouse=True, scope="module")
def no_leftover_processes() -> Iterator[None]:
    """Each test module closes every client it starts: no sandbox worker outlives it."""
    before = descendants(os.getpid())
    yield
    deadline = time.monotonic() + 5.0
    while (left := descendants(os.getpid()) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left behind: {sorted(left)}"
