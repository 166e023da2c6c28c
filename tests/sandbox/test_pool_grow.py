"""The pool above its base size: it grows while runs wait behind runs that hold their workers and
the cores have room, never past its cap, and idles back down; a run that gets no worker by its
start-by time never starts (no verdict); a default cap follows the cores and the memory.

How busy the cores are is the test's to say (``cores_busy`` replaced): never the machine's load."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym import Environment
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import ConfigError
from deepgym.sandbox import pool as pool_module
from deepgym.sandbox import sizing
from deepgym.sandbox.base import Job
from deepgym.sandbox.pool import PoolBackend
from deepgym.sandbox.sizing import (
    GROW_BELOW_BUSY,
    busy_share,
    cores_busy,
    default_max_workers,
    grow_by,
)
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
    per_core = sizing.GROW_PER_CORE
    assert default_max_workers(4, cores=2) == 2 * per_core
    assert default_max_workers(4, cores=2, memory=2**40) == 2 * per_core
    worker = sizing.WORKER_MEMORY_MB * 2**20
    assert default_max_workers(4, cores=2, memory=5 * worker) == 5  # one per 256 MiB
    assert default_max_workers(4, cores=2, memory=worker) == 4  # never below the base size


@given(
    waiting=st.integers(0, 50),
    held=st.integers(0, 50),
    growing=st.integers(0, 50),
    room=st.integers(-5, 50),
    busy=st.none() | st.floats(0.0, 1.0),
)
def test_growth_is_bounded_by_the_waiting_the_held_the_room_and_the_cores(
    waiting: int, held: int, growing: int, room: int, busy: float | None
) -> None:
    n = grow_by(waiting, held, growing, room, busy)
    assert n >= 0
    assert n + growing <= max(waiting, growing) and n + growing <= max(held, growing)
    assert n + growing <= max(room, growing)  # never past the cap
    if busy is None or busy >= GROW_BELOW_BUSY:
        assert n == 0  # cores kept busy (or not known): more runs would hold them back


def test_the_cores_busy_share_is_read_for_this_processs_cores() -> None:
    cores = sorted(os.sched_getaffinity(0))
    line = "cpu{n} {busy} 0 0 {idle} 0 0 0 0 0 0"
    stat = lambda busy, idle: "\n".join(  # noqa: E731
        ["cpu 1 2 3 4 5 6 7 8 0 0", *(line.format(n=n, busy=busy, idle=idle) for n in cores)]
    )
    before, after = cores_busy(stat(100, 100)), cores_busy(stat(175, 125))
    assert before == (100 * len(cores), 200 * len(cores))
    assert busy_share(before, after) == 0.75
    assert busy_share(None, after) is None and busy_share(after, after) is None


def _cores(busy: float) -> Callable[[], tuple[int, int]]:
    """A ``cores_busy`` whose cores are busy ``busy`` of the time, whatever the machine does."""
    ticks = [0, 0]

    def read() -> tuple[int, int]:
        ticks[0] += round(100 * busy)
        ticks[1] += 100
        return ticks[0], ticks[1]

    return read


def test_a_cap_below_the_base_size_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_workers"):
        PoolBackend(workers=4, max_workers=2)


async def _grown(backend: PoolBackend) -> tuple[list[bool], int, int]:
    """Three runs that hold their worker (a sleep) and a quick one on a pool of one worker:
    whether each passed, the most workers at once, and the workers 30 s later at most."""
    sizes: list[int] = []
    async with AsyncDeepGym(backend=backend, time_limits=TimeLimitPolicy(factor=None)) as dg:
        assert (await dg.run_one(ENV, QUICK)).passed  # started: the base size
        runs = asyncio.gather(*(dg.run_one(ENV, a) for a in [SLOW, SLOW, SLOW, QUICK]))
        while not runs.done():
            sizes.append(backend.stats()["workers"])
            await asyncio.sleep(0.05)
        passed = [r.passed for r in runs.result()]
        deadline = time.monotonic() + 30.0
        while backend.stats()["workers"] > 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return passed, max(sizes), backend.stats()["workers"]


@pytest.mark.sandbox
def test_runs_waiting_behind_held_workers_grow_the_pool_up_to_its_cap_then_it_idles_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool_module, "IDLE_S", 1.0)
    monkeypatch.setattr(sizing, "cores_busy", _cores(0.1))  # the held runs sleep
    passed, peak, after = asyncio.run(_grown(PoolBackend(workers=1, max_workers=3)))
    assert passed == [True] * 4
    assert peak == 3  # grown to the cap, never past it
    assert after == 1  # the added workers, idle, stopped: back to the base size


@pytest.mark.sandbox
def test_the_pool_does_not_grow_on_cores_its_runs_keep_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sizing, "cores_busy", _cores(1.0))
    passed, peak, _ = asyncio.run(_grown(PoolBackend(workers=1, max_workers=3)))
    assert passed == [True] * 4  # each in turn, on the one worker
    assert peak == 1


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
