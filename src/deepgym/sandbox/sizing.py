"""How big the pool is: its base size, the most it grows to, and when it grows (pure
decisions, and the reading of how busy the cores are they take).

A pool keeps two workers per core it may run on, and adds one for each run that waits behind a
worker held by a long run (``grow_by``), up to ``max_workers`` (``default_max_workers``), while
the cores have room. Time limits are judged on the answer's CPU time (``deepgym.judge.blame``),
so runs above the core count are judged as they would be alone, as long as each gets its limit's
CPU time within its backstop: the bounds here keep that true.
"""

from __future__ import annotations

import os

from deepgym.judge.blame import BACKSTOP, host_cpus

BASE_PER_CORE = 2
"""The base size, per core: a worker waits on the host and on its solution between bursts of
work, and a second one keeps the core busy meanwhile (measured: +15% runs/s)."""
GROW_PER_CORE = int(BACKSTOP)
"""The default ``max_workers``, per core (and ``WORKER_MEMORY_MB`` bounds it). N runs that each
compute without pause share C cores, C / N of a core each; each still uses its whole limit in
CPU time within the backstop (``BACKSTOP`` times the limit on the clock) while N <= BACKSTOP * C.
More, and an endless loop would be held back past its backstop: no verdict instead of its 0."""
WORKER_MEMORY_MB = 256
"""The service's memory allowed per worker when the default ``max_workers`` is derived: an
idle worker holds about 30 MiB, and its run what the answer uses."""
GROW_BELOW_BUSY = 0.75
"""The pool grows only while the cores it runs on were busy less than this share of the time
since the last check: a run added to cores its held runs already keep busy would share them
with runs that compute without pause, and hold each of them back past its backstop (an endless
loop's 0 would become a run without a verdict)."""


def grow_by(waiting: int, held: int, growing: int, room: int, busy: float | None) -> int:
    """How many workers to add now: one per run waiting for a worker, beyond those being added,
    as long as as many workers are held by long runs (``GROW_AFTER_S``; short runs free theirs
    at once), within the ``room`` left under ``max_workers``, and only while the cores were
    busy less than ``GROW_BELOW_BUSY`` of the time (``busy``; None: not known, so no)."""
    if busy is None or busy >= GROW_BELOW_BUSY:
        return 0
    return max(min(waiting - growing, held - growing, room - growing), 0)


def cores_busy(stat: str | None = None) -> tuple[int, int]:
    """(busy, total) ticks of the cores this process may run on, from ``/proc/stat``."""
    if stat is None:
        with open("/proc/stat") as f:
            stat = f.read()
    mine = {f"cpu{n}" for n in os.sched_getaffinity(0)}
    busy = total = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if name in mine:
            ticks = [int(x) for x in fields]
            total += sum(ticks[:8])
            busy += sum(ticks[:8]) - ticks[3] - ticks[4]  # less idle and iowait
    return busy, total


def busy_share(before: tuple[int, int] | None, after: tuple[int, int]) -> float | None:
    """The share of the time the cores were busy between two ``cores_busy`` readings."""
    if before is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def default_max_workers(size: int, cores: int | None = None, memory: int | None = None) -> int:
    """The most workers a pool of base ``size`` grows to by default: ``GROW_PER_CORE`` per core,
    at most one per ``WORKER_MEMORY_MB`` of ``memory`` (the service's, where known), never
    below ``size``."""
    cap = GROW_PER_CORE * (cores or host_cpus())
    if memory is not None:
        cap = min(cap, memory // (WORKER_MEMORY_MB * 2**20))
    return max(size, cap)


def base_size() -> int:
    """The base size of a pool on this host: ``BASE_PER_CORE`` per core it may run on."""
    return BASE_PER_CORE * host_cpus()
