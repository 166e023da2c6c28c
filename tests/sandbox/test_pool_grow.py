"""The pool above its base size: it grows while runs wait behind runs that hold their workers,
never past its cap, and idles back down; a run that gets no worker by its start-by time never
starts (no verdict), and a default cap follows the cores and the memory."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from deepgym import Environment
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import ConfigError
from deepgym.sandbox import pool as pool_module
from deepgym.sandbox.base import Job
from deepgym.sandbox.pool import PoolBackend, default_max_workers
from deepgym.scheduling import TimeLimitPolicy
from deepgym.verdict import classify

ENV = Environment(
    name="pool-grow-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=20.0,
    case_timeout=10.0,
)
QUICK = "def add(a, b):\n    return a + b\n"
SLOW_S = 5.0
SLOW = f"import time\ndef add(a, b):\n    time.sleep({SLOW_S})\n    return a + b\n"
"""Holds its worker for its sleep, whatever the host's load (it needs no CPU)."""


def test_the_default_cap_follows_the_cores_and_the_memory() -> None:
    per_core = pool_module.GROW_PER_CORE
    assert default_max_workers(4, cores=2) == 2 * per_core
    assert default_max_workers(4, cores=2, memory=2**40) == 2 * per_core
    worker = pool_module.WORKER_MEMORY_MB * 2**20
    assert default_max_workers(4, cores=2, memory=5 * worker) == 5  # one per 256 MiB
    assert default_max_workers(4, cores=2, memory=worker) == 4  # never below the base size


def test_a_cap_below_the_base_size_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_workers"):
        PoolBackend(workers=4, max_workers=2)


@pytest.mark.sandbox
def test_runs_waiting_behind_held_workers_grow_the_pool_up_to_its_cap_then_it_idles_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool_module, "IDLE_S", 1.0)

    async def go() -> tuple[list[bool], int, list[int]]:
        backend = PoolBackend(workers=1, max_workers=3)
        sizes: list[int] = []
        async with AsyncDeepGym(backend=backend, time_limits=TimeLimitPolicy(factor=None)) as dg:
            assert (await dg.run_one(ENV, QUICK)).passed  # started: the base size
            runs = asyncio.gather(*(dg.run_one(ENV, a) for a in [SLOW, SLOW, SLOW, QUICK]))
            while not runs.done():
                sizes.append(backend.stats()["workers"])
                await asyncio.sleep(0.05)
            passed = [r.passed for r in runs.result()]
            peak = max(sizes)
            deadline = time.monotonic() + 30.0
            while backend.stats()["workers"] > 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            return passed, peak, [backend.stats()["workers"]]

    passed, peak, after = asyncio.run(go())
    assert passed == [True] * 4
    assert peak == 3  # grown to the cap, never past it
    assert after == [1]  # the added workers, idle, stopped: back to the base size


@pytest.mark.sandbox
def test_a_run_that_gets_no_worker_by_its_start_by_never_starts() -> None:
    async def go() -> tuple[float, object, object]:
        backend = PoolBackend(workers=1, max_workers=1)
        async with AsyncDeepGym(backend=backend, time_limits=TimeLimitPolicy(factor=None)) as dg:
            assert (await dg.run_one(ENV, QUICK)).passed
            holder = asyncio.ensure_future(dg.run_one(ENV, SLOW))
            while not backend.stats()["workers"] or backend._idle.has_free():  # type: ignore[union-attr]
                await asyncio.sleep(0.01)
            job = Job(ENV, QUICK, ENV.timeout, ENV.case_timeout)
            t0 = time.monotonic()
            late = await backend.run(dataclasses.replace(job, start_by=t0 + 0.5))
            took = time.monotonic() - t0
            past = await backend.run(dataclasses.replace(job, start_by=t0 - 1.0))
            assert (await holder).passed
            return took, late, past

    took, late, past = asyncio.run(go())
    assert took < SLOW_S - 1.0, took  # answered at its start-by time, not when a worker came
    for raw in (late, past):
        c = classify(raw.outcome)  # type: ignore[attr-defined]
        assert not c.has_verdict and c.error_type == "timeout", c
        assert "start by" in c.message and not raw.outcome.in_play  # type: ignore[attr-defined]
