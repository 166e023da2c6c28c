"""No serial wait on a real pool: a new environment's answers start before its reference is
measured, and an answer that runs past the derived limit gets the verdict it gets when the limit
is known first (``solution_timeout``), held to that limit, not to the environment's cap."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepgym import Environment, TimeLimitPolicy
from deepgym.client import AsyncDeepGym
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


def test_the_verdict_on_a_pool_does_not_depend_on_whether_the_limit_was_known() -> None:
    known, _ = asyncio.run(_batch(known=True))
    fresh, took = asyncio.run(_batch(known=False))
    verdicts = [(r.has_verdict, r.score, r.passed, r.error_type) for r in fresh]
    assert verdicts == [(r.has_verdict, r.score, r.passed, r.error_type) for r in known]
    assert verdicts == [
        (True, 1.0, True, None),
        (True, 0.0, False, None),
        (True, 0.0, False, "solution_timeout"),
    ]
    assert fresh[2].time_limit_s == 1.0  # held to the derived limit...
    assert took < ENV.timeout - 2.0  # ...and stopped there, not at the cap
    assert fresh[0].time_limit_s == ENV.timeout  # ended within the floor: no limit could fire
