"""Who used the time: the evidence (a process tree read from ``/proc``) and the pure rules over
it, shared by the judge (a pool worker's verifier) and the host (``strict``'s solution server,
the compile phase).

A time limit is judged on the answer's CPU time, not on the clock: a loaded host slows an answer
down but never makes it use more CPU, so it never turns a right answer into a timeout. The clock
is only a backstop (``BACKSTOP`` times the limit). ``cpu_time_check`` is the whole rule, applied
each time a wait on the clock ends:

- the answer used its limit in CPU time: its timeout (``OVER``);
- past the limit on the clock with none of its processes runnable: it chose to wait (a sleep, a
  read that never comes), its timeout too (``WAITING``);
- past the backstop on the clock without having used its limit, while runnable: the host held it
  back, no verdict (``STARVED``);
- otherwise wait again (``WAIT``), as long as it would take the answer to use the rest of its
  limit on every core of the host, and never past the backstop.
"""

from __future__ import annotations

import os

BUSY_SHARE = 0.5
"""A solution that burned at least this share of its time budget on CPU used its own time."""
BACKSTOP = 3.0
"""A CPU-time limit's wall-clock backstop, in multiples of the limit."""
MIN_WAIT_MS = 10.0
"""The shortest wait between two checks of a CPU-time limit (the kernel counts in ticks)."""

OVER = "over"
WAITING = "waiting"
STARVED = "starved"
WAIT = "wait"


def tree_pids(pid: int) -> set[int]:
    """``pid`` and every live process below it, from ``/proc``."""
    return _tree(pid)[0]


def read_tree(*roots: int) -> tuple[float, list[str]]:
    """CPU milliseconds of the processes ``roots`` and their descendants (the live ones', and
    what each has reaped of its children), and the states of all their threads, read from
    ``/proc`` (wait4 counts only reaped children: this is what a tree used before a kill).
    Several roots: a pool's solution process and the init beside it, to which what the answer
    orphans goes."""
    tree, info = _tree(*roots)
    cpu = sum(info[p][0] for p in tree if p in info)
    return cpu, [s for p in tree if p in info for s in _thread_states(p, info[p][1])]


def _thread_states(pid: int, state: str) -> list[str]:
    """The states of ``pid``'s threads; ``state`` (its first thread's) where they cannot be read.
    A process's own state is only its first thread's: a JVM's, rustc's or Go's first thread
    waits while the others compute."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [state]
    states = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read().decode()
        except OSError:
            continue
        states.append(raw[raw.rfind(")") + 2 :].split(maxsplit=1)[0])
    return states or [state]


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
        ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        info[p] = (ticks * 1000.0 / tick, fields[0])
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
    return solution_used_its_time(cpu_ms, limit_ms, None if runnable(states) else "S")


def cpu_time_check(
    used_ms: float, limit_ms: float, elapsed_ms: float, runnable: bool, cpus: int = 1
) -> tuple[str, float]:
    """The rule of a CPU-time limit (see the module), when a wait on the clock ends: ``used_ms``
    of CPU time used of ``limit_ms``, ``elapsed_ms`` on the clock since the limit began to count,
    whether any of the answer's processes is runnable, and how many cores the host has. Returns
    ``(OVER | WAITING | STARVED, 0.0)``, or ``(WAIT, ms)``: check again in ``ms``."""
    if used_ms >= limit_ms:
        return OVER, 0.0
    if elapsed_ms >= limit_ms and not runnable:
        return WAITING, 0.0
    backstop_ms = BACKSTOP * limit_ms
    if elapsed_ms >= backstop_ms:
        return STARVED, 0.0
    soonest = (limit_ms - used_ms) / max(cpus, 1)
    if elapsed_ms < limit_ms:  # a sleeper is judged once the limit has passed on the clock
        soonest = min(soonest, limit_ms - elapsed_ms)
    return WAIT, min(max(soonest, MIN_WAIT_MS), backstop_ms - elapsed_ms)


def runnable(states: list[str]) -> bool:
    """Whether any process of a tree (its states, as ``read_tree`` gives them) is runnable: on
    a CPU (``R``) or in an uninterruptible wait the host imposes (``D``)."""
    return any(s in ("R", "D") for s in states)


def solution_used_its_time(cpu_ms: float | None, limit_ms: float, state: str | None) -> bool:
    """True when a timed-out solution is to blame: it computed, or it chose to wait.

    A solution that is runnable but got little CPU was starved by the host (not its fault); one
    that sleeps or waits on a pipe of its own chose to. With no evidence at all, blame nobody.
    """
    if cpu_ms is not None and cpu_ms >= BUSY_SHARE * limit_ms:
        return True
    return state in ("S", "T", "t", "Z", "X")
