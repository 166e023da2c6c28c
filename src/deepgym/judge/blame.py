"""Who used the time: a pure rule shared by the judge and the host."""

from __future__ import annotations

BUSY_SHARE = 0.5
"""A solution that burned at least this share of its time budget on CPU used its own time."""


def tree_used_its_time(cpu_ms: float, states: list[str], limit_ms: float) -> bool:
    """``solution_used_its_time`` for a process tree read from ``/proc``: its CPU time and the
    states of its processes (any runnable one means the host, not the answer, held it back)."""
    runnable = any(s in ("R", "D") for s in states)
    return solution_used_its_time(cpu_ms, limit_ms, None if runnable else "S")


def solution_used_its_time(cpu_ms: float | None, limit_ms: float, state: str | None) -> bool:
    """True when a timed-out solution is to blame: it computed, or it chose to wait.

    A solution that is runnable but got little CPU was starved by the host (not its fault); one
    that sleeps or waits on a pipe of its own chose to. With no evidence at all, blame nobody.
    """
    if cpu_ms is not None and cpu_ms >= BUSY_SHARE * limit_ms:
        return True
    return state in ("S", "T", "t", "Z", "X")
