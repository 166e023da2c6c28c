"""Per-run cgroups for the solution's memory and process limits, where the host lets us.

cgroup v1 with writable ``memory`` and ``pids`` controllers is used when present (as root on
these machines); otherwise the limits fall back to rlimits inside the solution process, and every
result records which mechanism enforced each limit. Directories are removed after the run; one
still busy (a process exiting) is retried later, never left behind at close.
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


@dataclass
class RunCgroup:
    """The solution's cgroups for one run: the ``cgroup.procs`` files its launcher writes to."""

    dirs: dict[str, str] = field(default_factory=dict)

    @property
    def procs_files(self) -> dict[str, str]:
        return {c: os.path.join(d, "cgroup.procs") for c, d in self.dirs.items()}

    def mechanisms(self) -> dict[str, str]:
        return {
            "memory": "cgroup-v1" if "memory" in self.dirs else "rlimit",
            "processes": "cgroup-v1" if "pids" in self.dirs else "rlimit",
        }

    def evidence(self) -> tuple[str | None, float | None]:
        """(limit that fired, peak memory in MiB) read from the groups after the run."""
        limit = None
        peak = None
        mem = self.dirs.get("memory")
        if mem:
            peak = _read_int(os.path.join(mem, "memory.max_usage_in_bytes")) / 2**20
            oom = _read_text(os.path.join(mem, "memory.oom_control"))
            kills = [ln for ln in oom.splitlines() if ln.startswith("oom_kill ")]
            if (kills and kills[0].split()[1] != "0") or _read_int(
                os.path.join(mem, "memory.failcnt")
            ):
                limit = "memory"
        pids = self.dirs.get("pids")
        if pids and limit is None:
            events = _read_text(os.path.join(pids, "pids.events"))
            if any(ln.startswith("max ") and ln.split()[1] != "0" for ln in events.splitlines()):
                limit = "processes"
        return limit, peak

    def remove(self) -> None:
        for d in self.dirs.values():
            _rmdir(d)
        self.dirs = {}


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _read_int(path: str) -> int:
    text = _read_text(path).strip()
    return int(text) if text.isdigit() else 0


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        _PENDING.append(path)


def create(memory_mb: int, max_processes: int) -> RunCgroup:
    """Make the solution's cgroups for one run (empty when the host has none writable).

    Only the solution process and what it starts join them, so ``max_processes`` counts the
    answer's processes, its first one included.
    """
    retry_pending(final=False)
    group = RunCgroup()
    name = f"run-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    for ctrl in v1_controllers():
        d = os.path.join(V1_ROOT, ctrl, "deepgym", name)
        try:
            os.makedirs(d)
            if ctrl == "memory":
                _write(os.path.join(d, "memory.limit_in_bytes"), str(memory_mb * 2**20))
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
