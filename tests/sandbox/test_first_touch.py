"""No serial wait on a real pool: a new environment's answers start before its reference is
measured, and an answer that runs past the derived limit gets the verdict it gets when the limit
is known first (``solution_timeout``), held to that limit, not to the environment's cap."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepgym import Environment, TimeLimitPolicy
from deepgym.client import AsyncDeepGym
from deepgym.judge.blame import BACKSTOP
from deepgym.models import RunResult

pytestmark = pytest.mark.sandbox

ENV = Environment(
    name="add-first-touch",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=8.0,
    reference_solution="def add(a, b):\n    return a + b\n",
)
GOOD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
LOOP = "def add(a, b):\n    while True:\n        pass\n"
POLICY = TimeLimitPolicy(factor=10.0, floor=1.0, persist=False)


async def _batch(known: bool) -> tuple[list[RunResult], float]:
    async with AsyncDeepGym(sandbox="pool", workers=2, time_limits=POLICY) as dg:
        await dg.run(ENV.model_copy(update={"name": "warm-up"}), GOOD, time_limit=5.0)
        if known:
            assert await dg.time_limit(ENV) == 1.0  # a fast reference: the floor
        t0 = time.monotonic()
        batch = await dg.run_batch(ENV, [GOOD, WRONG, LOOP], max_parallel=3)
        return batch.results, time.monotonic() - t0


def _verdict(r: RunResult) -> tuple[bool, float, bool, str | None]:
    """A run's verdict; a loop the host held back past its backstop (a loaded machine: no
    verdict, whichever way the limit came) reads as the loop's judged 0, checked to be that."""
    if not r.has_verdict and "held back by the host" in (r.error or ""):
        assert r.error_type == "timeout", r
        return (True, 0.0, False, "solution_timeout")
    return (r.has_verdict, r.score, r.passed, r.error_type)


def test_the_verdict_on_a_pool_does_not_depend_on_whether_the_limit_was_known() -> None:
    known, _ = asyncio.run(_batch(known=True))
    fresh, took = asyncio.run(_batch(known=False))
    verdicts = [_verdict(r) for r in fresh]
    assert verdicts == [_verdict(r) for r in known]
    assert verdicts == [
        (True, 1.0, True, None),
        (True, 0.0, False, None),
        (True, 0.0, False, "solution_timeout"),
    ]
    assert fresh[2].time_limit_s == 1.0  # held to the derived limit...
    # ...and stopped there, not at the cap: the loop ran on its 1 s of CPU time, not on the cap's
    # call limit (the default case_timeout, 2 s), and within that limit's backstop on the clock
    assert (fresh[2].evidence.solution_cpu_ms or 0.0) < 2000.0, fresh[2].evidence
    assert took < ENV.timeout - 2.0 + BACKSTOP, took
    assert fresh[0].time_limit_s == ENV.timeout  # ended within the floor: no limit could fire
