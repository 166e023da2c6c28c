"""cgroups for the solution's memory and process limits, where the host lets us.

cgroup v1 with writable ``memory`` and ``pids`` controllers is used when present (as root on
these machines); otherwise the limits fall back to rlimits inside the solution process, and every
result records which mechanism enforced each limit.

Two shapes: ``create`` makes a group per run (``strict``), removed after the run (one still busy,
a process exiting, is retried later, never left behind at close); a ``Slot`` is one pool
worker's group, reused run after run with its control files held open, because making and
removing a memory cgroup costs more kernel time than a whole pooled run's set-up. Each run on a
slot reads its evidence as differences from the slot's counters at the run's start.

A process killed by SIGKILL removes none of its groups. Each group a backend makes is named for
its owner, ``<kind>-<owner>-<random>`` (``owned_name``), where ``owner`` is the token of the
backend's workspace, whose lock its process holds for as long as it lives (``workspace``). A
later process that takes a stale workspace's lock removes that owner's groups
(``remove_owned``) before the folder; the kernel refuses to remove a group that still holds a
process, and the folder (with its lock) stays until every group of its owner is gone. A live
process's groups are never removed: its lock is held. Names never rest on a pid (pids repeat
across pid namespaces).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from dataclasses import dataclass, field

V1_ROOT = "/sys/fs/cgroup"
_PENDING: list[str] = []

AT_LIMIT_BYTES = 2**20
"""A run whose peak usage came this close to its memory limit reached it. Usage never passes the
limit: at the limit the kernel reclaims, or its OOM killer acts. ``memory.failcnt`` does not
always count it (measured: 0 after a run held at its limit by page cache), the peak does."""


@functools.cache
def v1_controllers() -> tuple[str, ...]:
    """Writable v1 controllers among memory and pids (probed by creating a test group)."""
    found = []
    for ctrl in ("memory", "pids"):
        base = os.path.join(V1_ROOT, ctrl)
        if not os.path.isfile(os.path.join(base, "cgroup.procs")):
            continue
        probe = os.path.join(base, "deepgym", f"probe-{os.getpid()}")
        try:
            os.makedirs(probe, exist_ok=True)
            os.rmdir(probe)
        except OSError:
            continue
        found.append(ctrl)
    return tuple(found)


class _Groups:
    """A solution's groups, one folder per controller (``dirs``; empty: rlimits only)."""

    dirs: dict[str, str]

    @property
    def procs_files(self) -> dict[str, str]:
        return {c: os.path.join(d, "cgroup.procs") for c, d in self.dirs.items()}

    def mechanisms(self) -> dict[str, str]:
        return {
            "memory": "cgroup-v1" if "memory" in self.dirs else "rlimit",
            "processes": "cgroup-v1" if "pids" in self.dirs else "rlimit",
        }


@dataclass
class RunCgroup(_Groups):
    """The solution's cgroups for one run: the ``cgroup.procs`` files its launcher writes to."""

    dirs: dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 1 << 62
    """The memory limit set on the group."""

    def evidence(self) -> tuple[str | None, float | None]:
        """(limit that fired, peak memory in MiB) read from the groups after the run: the memory
        limit fired if the OOM killer acted, a charge failed, or the peak reached the limit."""
        limit = None
        peak = None
        mem = self.dirs.get("memory")
        if mem:
            top = _int(_read_text(os.path.join(mem, "memory.max_usage_in_bytes")))
            peak = top / 2**20
            oom = _read_text(os.path.join(mem, "memory.oom_control"))
            failed = _int(_read_text(os.path.join(mem, "memory.failcnt")))
            if _counter(oom, "oom_kill") or failed or top >= self.memory_bytes - AT_LIMIT_BYTES:
                limit = "memory"
        pids = self.dirs.get("pids")
        if pids and limit is None and _counter(_read_text(f"{pids}/pids.events"), "max"):
            limit = "processes"
        return limit, peak

    def remove(self) -> None:
        """Remove the run's groups (a busy one is retried later, never left behind)."""
        for d in self.dirs.values():
            _rmdir(d)
        self.dirs = {}


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        _PENDING.append(path)


OWNED_KINDS = ("pool", "run")
"""The kinds of group named for an owner: a pool worker's slot, a run's (or a session's)."""


def owned_name(kind: str, owner: str) -> str:
    """A new group's name, ``<kind>-<owner>-<random>``: ``owner`` is the token of the workspace
    whose lock guards the group (``remove_owned``)."""
    return f"{kind}-{owner}-{uuid.uuid4().hex[:12]}"


def remove_owned(owner: str) -> bool:
    """Remove every group named for ``owner``, whose process is gone (the caller holds its
    workspace's lock); whether none is left. A group that still holds a process stays (the
    kernel refuses: EBUSY), for the next sweep."""
    left = False
    for ctrl in v1_controllers():
        parent = os.path.join(V1_ROOT, ctrl, "deepgym")
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            kind, _, rest = name.partition("-")
            if kind not in OWNED_KINDS or rest.rpartition("-")[0] != owner:
                continue
            try:
                os.rmdir(os.path.join(parent, name))
            except FileNotFoundError:
                pass
            except OSError:
                left = True
    return not left


def create(memory_mb: int, max_processes: int, *, owner: str | None = None) -> RunCgroup:
    """Make the solution's cgroups for one run (empty when the host has none writable).

    Only the solution process and what it starts join them, so ``max_processes`` counts the
    answer's processes, its first one included. ``owner``: the token of the backend's workspace
    (``Workspace.owner``), so that the groups of a process killed mid-run are removed later;
    None: named for this process, removed only by it.
    """
    retry_pending(final=False)
    group = RunCgroup()
    name = owned_name("run", owner) if owner else f"run-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    for ctrl in v1_controllers():
        d = os.path.join(V1_ROOT, ctrl, "deepgym", name)
        try:
            os.makedirs(d)
            if ctrl == "memory":
                _write(os.path.join(d, "memory.limit_in_bytes"), str(memory_mb * 2**20))
                group.memory_bytes = memory_mb * 2**20
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(os.path.join(d, "memory.memsw.limit_in_bytes"), str(memory_mb * 2**20))
            else:
                _write(os.path.join(d, "pids.max"), str(max_processes))
        except OSError:
            _rmdir(d)
            continue
        group.dirs[ctrl] = d
    return group


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def retry_pending(final: bool) -> None:
    """Remove groups that were still busy; at ``final``, wait briefly for the last exits."""
    rounds = 50 if final else 1
    for _ in range(rounds):
        still = []
        for d in _PENDING:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
            except OSError:
                still.append(d)
        _PENDING[:] = still
        if not still or not final:
            return
        time.sleep(0.02)


class Slot(_Groups):
    """A pool worker's cgroups, reused for each of its runs (one run at a time).

    ``begin`` sets the run's limits and notes the counters; ``end`` reads what the run did: the
    memory limit fired if the kernel's OOM killer acted in the group during the run or the run's
    usage reached the limit (``AT_LIMIT_BYTES``, from the peak ``end`` reads anyway), the process
    limit if a fork was refused, and the peak is the usage above the run's starting level (page
    cache a previous run left charged here is reclaimable and not counted).
    """

    def __init__(self, name: str) -> None:
        self.dirs: dict[str, str] = {}
        self._fds: dict[str, int] = {}
        self._set: dict[str, int] = {}
        self._base: tuple[int, int, int] = (0, 0, 0)
        for ctrl in v1_controllers():
            d = os.path.join(V1_ROOT, ctrl, "deepgym", name)
            fds: dict[str, int] = {}
            try:
                os.makedirs(d)
                for f, writable in _SLOT_FILES[ctrl]:
                    fds[f] = os.open(os.path.join(d, f), os.O_RDWR if writable else os.O_RDONLY)
            except OSError:
                for fd in fds.values():
                    os.close(fd)
                _rmdir(d)
                continue
            self.dirs[ctrl] = d
            self._fds.update(fds)
        with contextlib.suppress(OSError):  # absent without swap accounting
            if "memory" in self.dirs:
                path = os.path.join(self.dirs["memory"], "memory.memsw.limit_in_bytes")
                self._fds["memory.memsw.limit_in_bytes"] = os.open(path, os.O_RDWR)

    def _read(self, name: str) -> str:
        fd = self._fds.get(name)
        return os.pread(fd, 4096, 0).decode() if fd is not None else ""

    def _write(self, name: str, value: int) -> None:
        """Write a limit, only if it changed since the last run."""
        fd = self._fds.get(name)
        if fd is not None and self._set.get(name) != value:
            os.pwrite(fd, str(value).encode(), 0)
            self._set[name] = value

    def begin(self, memory_mb: int, max_processes: int) -> None:
        """Set this run's limits (only those that changed) and note the counters."""
        limit = memory_mb * 2**20
        if "memory" in self.dirs:
            # memsw may never be below the memory limit: raise in the order that keeps it so
            order = ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes")
            old = self._set.get("memory.limit_in_bytes", 1 << 62)  # at first: no limit
            for name in order if limit > old else reversed(order):
                self._write(name, limit)
            os.pwrite(self._fds["memory.max_usage_in_bytes"], b"0", 0)  # peak := usage now
        self._write("pids.max", max_processes)
        self._base = (
            _int(self._read("memory.usage_in_bytes")),
            _counter(self._read("memory.oom_control"), "oom_kill"),
            _counter(self._read("pids.events"), "max"),
        )

    def end(self) -> tuple[str | None, float | None]:
        """(limit that fired during the run, peak memory in MiB above the run's start)."""
        usage0, kills0, refused0 = self._base
        limit = None
        peak = None
        if "memory" in self.dirs:
            top = _int(self._read("memory.max_usage_in_bytes"))
            peak = max(top - usage0, 0) / 2**20
            at_limit = top >= self._set.get("memory.limit_in_bytes", 1 << 62) - AT_LIMIT_BYTES
            if at_limit or _counter(self._read("memory.oom_control"), "oom_kill") > kills0:
                limit = "memory"
        if limit is None and _counter(self._read("pids.events"), "max") > refused0:
            limit = "processes"
        return limit, peak

    def close(self) -> None:
        """Close the files and remove the groups (retried at exit if a process is still in)."""
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}
        for d in self.dirs.values():
            _rmdir(d)
        self.dirs = {}


_SLOT_FILES = {
    "memory": (
        ("memory.limit_in_bytes", True),
        ("memory.max_usage_in_bytes", True),
        ("memory.usage_in_bytes", False),
        ("memory.oom_control", False),
    ),
    "pids": (("pids.max", True), ("pids.events", False)),
}


def _int(text: str) -> int:
    text = text.strip()
    return int(text) if text.isdigit() else 0


def _counter(text: str, key: str) -> int:
    """The value of ``key`` in a ``key value`` per line file (0 when absent)."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _int(value)
    return 0
