"""Who used the time: the evidence (the answer's CPU time, and whether its processes could run)
and the pure rule over it, shared by the judge (a verifier's launcher) and the host (``strict``'s
solution server, the compile phase).

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

``Limit`` is one limit as it counts (a call's, a program's, or the run's), from the answer's CPU
counter when it began. The counter is the run's cgroup accounting where the host has a group per
run (``counter_ms``: one ``pread`` of cgroup v1's ``cpuacct.usage`` or v2's ``cpu.stat``, so a
call's baseline costs microseconds), else the process's own CPU clock (``process_cpu_ms``, a
system call). When a wait ends the process tree is read from ``/proc`` (``read_tree``): its CPU
time (what a tree used, reaped children included) and its threads' states. A thread that lowered
its own priority below the judge's (a higher nice value, ``SCHED_IDLE``) and is runnable counts
as waiting by its own choice (state ``N``): on a busy host it would get next to no CPU, and an
answer must not turn its timeout into "held back by the host" by asking to be held back.
"""

from __future__ import annotations

import os
import time

BACKSTOP = 3.0
"""A CPU-time limit's wall-clock backstop, in multiples of the limit."""
MIN_WAIT_MS = 10.0
"""The shortest wait between two checks of a CPU-time limit (the kernel counts in ticks)."""

OVER = "over"
WAITING = "waiting"
STARVED = "starved"
WAIT = "wait"

LOWERED = "N"
"""The state ``read_tree`` gives a runnable thread that lowered its own priority (not a kernel
state letter): waiting by its own choice, never held back by the host."""
SCHED_IDLE = 5
CPUCLOCK_SCHED = 2


def host_cpus() -> int:
    """The cores this process (and so the answer, which cannot add any) may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except OSError:
        return max(os.cpu_count() or 1, 1)


def counter_ms(fd: int) -> float:
    """CPU milliseconds from a cgroup's counter, an open descriptor of cgroup v1's
    ``cpuacct.usage`` (nanoseconds) or v2's ``cpu.stat`` (its ``usage_usec`` line, first)."""
    data = os.pread(fd, 128, 0)
    if data.startswith(b"usage_usec "):
        return int(data[11 : data.index(b"\n")]) / 1000.0
    return int(data) / 1e6


def process_cpu_ms(pid: int) -> float:
    """CPU milliseconds of process ``pid`` (all its threads, not its children), from its CPU-time
    clock: one system call, for a host without a cgroup per run. ``OSError`` once it is gone."""
    return time.clock_gettime(((~pid) << 3) | CPUCLOCK_SCHED) * 1000.0


class Limit:
    """One CPU-time limit as it counts: ``limit_ms`` of the answer's CPU time counted from
    ``cpu0`` (its counter when the limit began), on the clock from ``t0`` (monotonic seconds).
    Either can be moved back to carry what an earlier span used (the run's limit spans calls).
    ``due`` is when the rule is to be applied next (``check``)."""

    __slots__ = ("cpu0", "cpus", "due", "limit_ms", "t0")

    def __init__(self, limit_ms: float, cpu0: float, t0: float, cpus: int) -> None:
        self.limit_ms = limit_ms
        self.cpu0 = cpu0
        self.t0 = t0
        self.cpus = cpus
        self.due = t0

    def check(self, cpu_ms: float, now: float, runnable: bool = True) -> str:
        """The rule (``cpu_time_check``) at ``now``, with the counter at ``cpu_ms``; on ``WAIT``,
        ``due`` moves to the next check."""
        what, wait = cpu_time_check(
            cpu_ms - self.cpu0, self.limit_ms, self.elapsed_ms(now), runnable, self.cpus
        )
        self.due = now + wait / 1000.0
        return what

    def elapsed_ms(self, now: float) -> float:
        """Milliseconds on the clock since the limit began to count."""
        return (now - self.t0) * 1000.0

    def needs_states(self, now: float) -> bool:
        """Whether the rule reads the processes' states at ``now``: only once the limit has
        passed on the clock (before that, a wait is never judged)."""
        return self.elapsed_ms(now) >= self.limit_ms


def tree_pids(pid: int) -> set[int]:
    """``pid`` and every live process below it, from ``/proc``."""
    return _tree(pid)[0]


def read_tree(*roots: int, below: bool = False) -> tuple[float, list[str]]:
    """CPU milliseconds of the processes ``roots`` and their descendants (the live ones', and
    what each has reaped of its children), and the states of all their threads, read from
    ``/proc`` (wait4 counts only reaped children: this is what a tree used before a kill).
    Several roots: a pool's solution process and the init beside it, to which what the answer
    orphans goes. A runnable thread that lowered its own priority below this process's is
    ``LOWERED``. ``below``: the first root's descendants, not itself (a program host's: what a
    case's program left to it)."""
    tree, info = _tree(*roots)
    if below:
        tree.discard(roots[0])
    cpu = sum(info[p][0] for p in tree if p in info)
    floor = _own_priority()
    states = [s for p in tree if p in info for s in _thread_states(p, info[p][1], floor)]
    return cpu, states


def _tree(*roots: int) -> tuple[set[int], dict[int, tuple[float, str]]]:
    ppid: dict[int, int] = {}
    info: dict[int, tuple[float, str]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat(f"/proc/{name}/stat")
        if fields is None:
            continue
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


def _stat(path: str) -> list[str] | None:
    """The fields of a ``stat`` file after the command name (state first), or None."""
    try:
        with open(path, "rb") as f:
            raw = f.read().decode()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def _own_priority() -> tuple[int, int]:
    """(nice value, scheduling policy) of this process: what a solution starts with."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0)
    except OSError:
        return 0, 0


def _thread_states(pid: int, leader: str, floor: tuple[int, int]) -> list[str]:
    """The state of each thread of ``pid`` (a process's ``stat`` shows its first thread's
    only: a main thread joining busy workers is asleep), ``LOWERED`` for a runnable one that
    lowered its priority below ``floor``; the leader's state where the threads cannot be read."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [leader]
    states = []
    for tid in tids:
        fields = _stat(f"/proc/{pid}/task/{tid}/stat")
        if fields is None:
            continue
        state = fields[0]
        if state == "R" and _lowered(fields, floor):
            state = LOWERED
        states.append(state)
    return states or [leader]


def _lowered(fields: list[str], floor: tuple[int, int]) -> bool:
    """Whether a thread (its ``stat`` fields) runs at a lower priority than ``floor``: a higher
    nice value, or ``SCHED_IDLE`` where the judge is not."""
    try:
        nice, policy = int(fields[16]), int(fields[38])
    except (IndexError, ValueError):
        return False
    return nice > floor[0] or (policy == SCHED_IDLE and floor[1] != SCHED_IDLE)


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
    """Whether any thread of a tree (its states, as ``read_tree`` gives them) is runnable: on a
    CPU or waiting for one (``R``), which is how a host holds an answer back. An uninterruptible
    wait (``D``) is the answer's own: a ``vfork`` parent waiting on its child, its own I/O, its
    memory cgroup's reclaim at its limit (counting it would let a wrong answer park a process
    in ``vfork`` until the backstop and escape its 0 as "held back")."""
    return "R" in states
