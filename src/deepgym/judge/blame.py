"""Who used the time: the evidence (a process tree read from ``/proc``) and the pure rule over
it, shared by the judge (a pool worker's verifier) and the host (``strict``'s solution server)."""

from __future__ import annotations

import os

BUSY_SHARE = 0.5
"""A solution that burned at least this share of its time budget on CPU used its own time."""


def tree_pids(pid: int) -> set[int]:
    """``pid`` and every live process below it, from ``/proc``."""
    return _tree(pid)[0]


def read_tree(*roots: int) -> tuple[float, list[str]]:
    """CPU milliseconds of the processes ``roots`` and their descendants, and the states of the
    descendants, read from ``/proc`` (wait4 counts only reaped children: this is what a tree
    used before a kill). Several roots: a pool's solution process and the init beside it, to
    which what the answer orphans goes."""
    tree, info = _tree(*roots)
    cpu = sum(info[p][0] for p in tree if p in info)
    return cpu, [info[p][1] for p in tree if p in info and p not in roots]


def _tree(*roots: int) -> tuple[set[int], dict[int, tuple[float, str]]]:
    ppid: dict[int, int] = {}
    info: dict[int, tuple[float, str]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read().decode()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        p = int(name)
        ppid[p] = int(fields[1])
        info[p] = ((int(fields[11]) + int(fields[12])) * 1000.0 / tick, fields[0])
    tree = set(roots)
    changed = True
    while changed:
        changed = False
        for p, parent in ppid.items():
            if parent in tree and p not in tree:
                tree.add(p)
                changed = True
    return tree, info


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
