"""cgroups for the solution's memory and process limits and its CPU time, where the host lets us.

Where the groups are made, in this order:

- a cgroup v2 folder given in ``DEEPGYM_CGROUP`` (a subtree delegated to this user);
- cgroup v1 with writable ``memory`` and ``pids`` controllers (as root on these machines), and
  ``cpuacct`` where it is writable too;
- this process's own cgroup v2 group when systemd delegated it (``Delegate=yes``: the group
  carries the ``trusted.delegate`` or ``user.delegate`` mark).

Otherwise the limits fall back to rlimits inside the solution process. Every result records which
mechanism enforced each limit (``cgroup-v1``, ``cgroup-v2`` or ``rlimit``).

The answer's CPU time, on which its time limits are judged (``deepgym.judge.blame``), is the
group's accounting: v1's ``cpuacct.usage``, v2's ``cpu.stat`` (present in every v2 group, no
controller needed). The judge reads it through a read-only descriptor the host opens
(``cpu_fd``), one ``pread`` per reading; where there is no group, the judge reads the solution
process's own CPU clock and its tree in ``/proc`` instead (``time`` in the mechanisms: ``proc``).

On cgroup v2 a group with processes cannot hand controllers to groups below it, so before it
enables ``memory`` and ``pids`` for its groups deepgym moves the processes of a group it uses
into a leaf of their own (``HOST_LEAF``), as a delegated service is expected to. A solution joins
its v2 group through a ``cgroup.procs`` descriptor the host opened (``join``): the kernel checks
a move against the opener's cgroup namespace, which holds both groups, while the sandbox's own
cgroup namespace does not.

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
import dataclasses
import errno
import functools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

V1_ROOT = "/sys/fs/cgroup"
V2_ENV = "DEEPGYM_CGROUP"
"""A cgroup v2 folder deepgym makes its groups in (it takes precedence over cgroup v1)."""
HOST_LEAF = "deepgym-host"
"""The leaf the processes of a v2 group deepgym uses move to, so it can enable controllers."""
V2_CONTROLLERS = ("memory", "pids")
V1_CONTROLLERS = ("memory", "pids", "cpuacct")
"""The v1 controllers a group is made in where writable: the two limits, and CPU accounting."""
_PENDING: list[str] = []

AT_LIMIT_BYTES = 2**20
"""A run whose peak usage came this close to its memory limit reached it. Usage never passes the
limit: at the limit the kernel reclaims, or its OOM killer acts. ``memory.failcnt`` does not
always count it (measured: 0 after a run held at its limit by page cache), the peak does."""


@functools.cache
def v1_controllers() -> tuple[str, ...]:
    """Writable v1 controllers among memory, pids and cpuacct (probed by creating a test
    group); none when ``DEEPGYM_CGROUP`` names a v2 folder to use instead, and none without
    memory or pids (cpuacct alone holds no limit)."""
    if os.environ.get(V2_ENV):
        return ()
    found = []
    for ctrl in V1_CONTROLLERS:
        if not os.path.isfile(os.path.join(V1_ROOT, ctrl, "cgroup.procs")):
            continue
        probe = os.path.join(v1_parent(ctrl), f"probe-{os.getpid()}")
        try:
            os.makedirs(probe, exist_ok=True)
            os.rmdir(probe)
        except OSError:
            continue
        found.append(ctrl)
    if not {"memory", "pids"} & set(found):
        return ()
    return tuple(found)


@functools.cache
def v1_parent(ctrl: str) -> str:
    """The folder deepgym's v1 groups of ``ctrl`` are made in: ``deepgym`` at the hierarchy's
    root for the limits (memory, pids); for cpuacct, ``deepgym`` below this process's own group,
    so that whatever accounts for this process's CPU time (a service's cgroup, a container's,
    where cpu and cpuacct share a hierarchy its CPU quota too) still counts its answers'."""
    if ctrl != "cpuacct":
        return os.path.join(V1_ROOT, ctrl, "deepgym")
    own = "/"
    for line in _read_text("/proc/self/cgroup").splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        if ctrl in controllers.split(","):
            own = path
    return os.path.normpath(os.path.join(V1_ROOT, ctrl, own.lstrip("/"), "deepgym"))


@dataclass(frozen=True)
class V2Base:
    """The cgroup v2 folder deepgym makes its groups in, and what it found there."""

    path: str
    source: str
    """``DEEPGYM_CGROUP``, or ``delegated`` (this process's own group, delegated by systemd)."""
    controllers: tuple[str, ...] = ()
    """Among memory and pids: those enabled for the groups made here (limits held by them)."""
    problem: str = ""
    """Why memory or pids is not among ``controllers``, or why the folder is unusable."""
    available: tuple[str, ...] = ()
    """Among memory and pids: those the folder has (``cgroup.controllers``), enabled or not."""
    usable: bool = True
    """Whether groups can be made here at all (False: not a cgroup v2 folder)."""


def own_v2_group(mountinfo: str | None = None, cgroup: str | None = None) -> str | None:
    """This process's cgroup v2 folder, from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``
    (None without a cgroup2 mount of the hierarchy's root, or a ``0::`` line)."""
    if mountinfo is None:
        mountinfo = _read_text("/proc/self/mountinfo")
    if cgroup is None:
        cgroup = _read_text("/proc/self/cgroup")
    mount = None
    for row in mountinfo.splitlines():
        left, _, right = row.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and len(fields) > 4 and fields[3] == "/":
            mount = fields[4]
            if mount == V1_ROOT:  # the unified hierarchy itself: preferred
                break
    path = next((ln[3:] for ln in cgroup.splitlines() if ln.startswith("0::")), None)
    if mount is None or path is None:
        return None
    return os.path.normpath(mount + path)


def delegated(folder: str) -> bool:
    """Whether systemd delegated ``folder`` (``Delegate=yes`` marks it with an xattr)."""
    for name in ("trusted.delegate", "user.delegate"):
        try:
            if os.getxattr(folder, name) == b"1":
                return True
        except OSError:
            continue
    return False


def v2_candidate() -> tuple[str, str] | None:
    """(folder, source) deepgym would make its v2 groups in, or None (v1 or rlimits); reads
    only, changes nothing."""
    given = os.environ.get(V2_ENV, "")
    if given:
        return os.path.abspath(given), V2_ENV
    if v1_controllers():
        return None
    own = own_v2_group()
    if own is not None and delegated(own):
        return own, "delegated"
    return None


def is_v2_folder(path: str) -> bool:
    """Whether ``path`` is a folder of a cgroup v2 hierarchy (v1 folders lack subtree_control)."""
    return os.path.isfile(os.path.join(path, "cgroup.subtree_control"))


def read_v2(path: str, source: str) -> V2Base:
    """What ``path`` offers as it is now: the controllers already enabled for groups below it,
    and why another is missing (changes nothing; ``prepare_v2`` enables what it can)."""
    if not is_v2_folder(path):
        return V2Base(path, source, (), f"{path} is not a cgroup v2 folder", usable=False)
    available = set(_read_text(os.path.join(path, "cgroup.controllers")).split())
    enabled = set(_read_text(os.path.join(path, "cgroup.subtree_control")).split())
    have = tuple(c for c in V2_CONTROLLERS if c in enabled)
    offered = tuple(c for c in V2_CONTROLLERS if c in available)
    missing = [c for c in V2_CONTROLLERS if c not in enabled]
    if not missing:
        return V2Base(path, source, have, available=offered)
    absent = [c for c in missing if c not in available]
    if absent:
        why = (
            f"{' and '.join(absent)} not in {path}/cgroup.controllers: the group above it must "
            "enable them (its cgroup.subtree_control)"
        )
    else:
        why = f"{' and '.join(missing)} not yet enabled in {path}/cgroup.subtree_control"
    procs = _read_text(os.path.join(path, "cgroup.procs")).split()
    if procs and str(os.getpid()) not in procs:  # deepgym moves only a group it is in
        why = (
            f"{path} holds processes other than this one, so the kernel refuses to enable "
            f"{' and '.join(missing)} below it: give a folder with no process in it, or run "
            "deepgym inside this one"
        )
        offered = tuple(c for c in offered if c in have)
    return V2Base(path, source, have, why, available=offered)


def prepare_v2(base: V2Base) -> V2Base:
    """Enable memory and pids for the groups below ``base.path`` where they are available,
    first moving the processes of that group into ``HOST_LEAF`` (a group with processes cannot
    enable controllers below it) when this process is among them."""
    if not base.usable:
        return base
    path = base.path
    need = [c for c in base.available if c not in base.controllers]
    if not need:
        return base
    procs = _read_text(os.path.join(path, "cgroup.procs")).split()
    if str(os.getpid()) in procs:
        leaf = os.path.join(path, HOST_LEAF)
        with contextlib.suppress(OSError):
            os.makedirs(leaf, exist_ok=True)
            for pid in procs:
                with contextlib.suppress(OSError):  # one that exited meanwhile
                    _write(os.path.join(leaf, "cgroup.procs"), pid)
    failed = ""
    for ctrl in need:
        try:
            _write(os.path.join(path, "cgroup.subtree_control"), f"+{ctrl}")
        except OSError as exc:
            failed = f"enabling {ctrl} in {path}/cgroup.subtree_control failed: {exc.strerror}"
            if exc.errno == errno.EBUSY:
                failed += " (the group holds processes that are not this one's)"
    now = read_v2(path, base.source)
    return dataclasses.replace(now, problem=failed or now.problem) if now.problem else now


def join_refused(path: str) -> str:
    """Why a process could not join a group made in ``path`` ("" when it can): a throwaway
    child moves itself into an empty group through a descriptor opened here, as a solution does,
    then the group is removed. The kernel asks for write access to the ``cgroup.procs`` of the
    common parent of the two groups, which a subtree given by hand may lack."""
    probe = os.path.join(path, f"probe-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(probe)
    except OSError as exc:
        return f"making a group in {path} failed: {exc.strerror}"
    try:
        fd = os.open(os.path.join(probe, "cgroup.procs"), os.O_WRONLY)
        try:
            code = (
                f"import os, sys\ntry: os.write({fd}, b'0')\n"
                "except OSError as e: sys.exit(e.strerror)"
            )
            child = subprocess.run(
                [sys.executable, "-I", "-S", "-c", code],
                pass_fds=(fd,),
                capture_output=True,
                text=True,
                timeout=30,
            )
        finally:
            os.close(fd)
        if child.returncode != 0:
            why = child.stderr.strip().splitlines()[-1:] or [f"exit {child.returncode}"]
            return (
                f"moving a process into a group in {path} is refused ({why[0]}): the process "
                "that runs deepgym must be in that folder, or in a group whose common parent "
                "with it is writable"
            )
        return ""
    except (OSError, subprocess.SubprocessError) as exc:
        return f"probing a group in {path} failed: {exc}"
    finally:
        for _ in range(50):  # the child has exited: its group empties a moment later
            try:
                os.rmdir(probe)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)


def probed(base: V2Base) -> V2Base:
    """``base``, unusable (with the cause) when no process can join a group made in it."""
    if base.usable and (refused := join_refused(base.path)):
        return dataclasses.replace(
            base, controllers=(), available=(), problem=refused, usable=False
        )
    return base


@functools.cache
def v2_base() -> V2Base | None:
    """The v2 folder the backends make their groups in (prepared and probed once), or None.
    One whose groups a process cannot join is unusable: the runs use rlimits and say so."""
    found = v2_candidate()
    return None if found is None else probed(prepare_v2(read_v2(*found)))


def group_parents() -> list[str]:
    """The folders the groups of this host are made in (one per v1 controller, or the v2 one)."""
    base = v2_base()
    if base is not None:
        return [base.path] if base.usable else []
    return [v1_parent(c) for c in v1_controllers()]


class _Groups:
    """A solution's groups: on v1 one folder per controller (``dirs``; empty: rlimits only), on
    v2 one folder (``dirs["v2"]``) whose enabled controllers are ``v2``."""

    dirs: dict[str, str]
    v2: tuple[str, ...] | None = None
    _join_fd: int | None = None
    _cpu_fd: int | None = None

    def holds(self, ctrl: str) -> bool:
        """Whether a group holds the ``memory`` or ``pids`` limit."""
        return ctrl in self.v2 if self.v2 is not None else ctrl in self.dirs

    @property
    def procs_files(self) -> dict[str, str]:
        return {c: os.path.join(d, "cgroup.procs") for c, d in self.dirs.items()}

    def join(self, mounted: str | None) -> tuple[str, dict[str, str], tuple[int, ...]]:
        """How a solution joins these groups: the ``DEEPGYM_CGROUP_PROCS`` value it is given,
        the ``cgroup.procs`` files to bind into its sandbox (controller -> host path, each at
        ``mounted`` formatted with the controller; None: no sandbox, the host paths), and the
        descriptors to pass it. On v2 a descriptor the host opened (``&N``), nothing bound."""
        if self.v2 is None:
            files = self.procs_files
            if mounted is None:
                return ":".join(files.values()), {}, ()
            return ":".join(mounted.format(c) for c in files), files, ()
        fds = self.join_fds()
        return ":".join(f"&{fd}" for fd in fds), {}, fds

    def join_fds(self) -> tuple[int, ...]:
        """The descriptors a solution joins these groups by: on v2 the group's ``cgroup.procs``,
        opened here once (closed with the group); none on v1 (joined by path)."""
        if self.v2 is None or not self.dirs:
            return ()
        if self._join_fd is None:
            self._join_fd = os.open(os.path.join(self.dirs["v2"], "cgroup.procs"), os.O_WRONLY)
        return (self._join_fd,)

    def _close_join(self) -> None:
        for fd in (self._join_fd, self._cpu_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._join_fd = self._cpu_fd = None

    def cpu_file(self) -> str | None:
        """The group's CPU counter (v1 ``cpuacct.usage``, v2 ``cpu.stat``), or None."""
        if self.v2 is not None:
            return os.path.join(self.dirs["v2"], "cpu.stat") if "v2" in self.dirs else None
        d = self.dirs.get("cpuacct")
        return os.path.join(d, "cpuacct.usage") if d is not None else None

    def cpu_fd(self) -> int | None:
        """A read-only descriptor of the CPU counter, opened here once (closed with the group),
        for the judge (``deepgym.judge.blame.counter_ms``); None without one."""
        if self._cpu_fd is None and (path := self.cpu_file()) is not None:
            with contextlib.suppress(OSError):
                self._cpu_fd = os.open(path, os.O_RDONLY)
        return self._cpu_fd

    def mechanisms(self) -> dict[str, str]:
        kind = "cgroup-v1" if self.v2 is None else "cgroup-v2"
        return {
            "memory": kind if self.holds("memory") else "rlimit",
            "processes": kind if self.holds("pids") else "rlimit",
            "time": kind if self.cpu_fd() is not None else "proc",
        }


@dataclass
class RunCgroup(_Groups):
    """The solution's cgroups for one run: the ``cgroup.procs`` files its launcher writes to."""

    dirs: dict[str, str] = field(default_factory=dict)
    memory_bytes: int = 1 << 62
    """The memory limit set on the group."""
    v2: tuple[str, ...] | None = None

    def evidence(self) -> tuple[str | None, float | None]:
        """(limit that fired, peak memory in MiB) read from the groups after the run: the memory
        limit fired if the OOM killer acted, a charge failed, or the peak reached the limit."""
        if self.v2 is not None:
            return self._v2_evidence()
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

    def _v2_evidence(self) -> tuple[str | None, float | None]:
        """v2: the memory limit fired if ``memory.events`` counts an OOM kill or a charge that
        met ``memory.max``, or the peak (``memory.peak``) reached it; processes if
        ``pids.events`` counts a refused fork."""
        d = self.dirs.get("v2")
        if d is None:
            return None, None
        limit = None
        peak = None
        if self.holds("memory"):
            text = _read_text(os.path.join(d, "memory.peak"))
            top = _int(text)
            peak = top / 2**20 if text.strip() else None
            events = _read_text(os.path.join(d, "memory.events"))
            at_limit = text.strip() and top >= self.memory_bytes - AT_LIMIT_BYTES
            if _counter(events, "oom_kill") or _counter(events, "max") or at_limit:
                limit = "memory"
        refused = _counter(_read_text(os.path.join(d, "pids.events")), "max")
        if limit is None and self.holds("pids") and refused:
            limit = "processes"
        return limit, peak

    def remove(self) -> None:
        """Remove the run's groups (a busy one is retried later, never left behind)."""
        self._close_join()
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
    for parent in group_parents():
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
    name = owned_name("run", owner) if owner else f"run-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    base = v2_base()
    if base is not None:
        return _create_v2(base, name, memory_mb, max_processes)
    group = RunCgroup()
    for ctrl in v1_controllers():
        d = os.path.join(v1_parent(ctrl), name)
        try:
            os.makedirs(d)
            if ctrl == "memory":
                _write(os.path.join(d, "memory.limit_in_bytes"), str(memory_mb * 2**20))
                group.memory_bytes = memory_mb * 2**20
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(os.path.join(d, "memory.memsw.limit_in_bytes"), str(memory_mb * 2**20))
            elif ctrl == "pids":
                _write(os.path.join(d, "pids.max"), str(max_processes))
        except OSError:
            _rmdir(d)
            continue
        group.dirs[ctrl] = d
    return group


def _create_v2(base: V2Base, name: str, memory_mb: int, max_processes: int) -> RunCgroup:
    """A run's v2 group in ``base``: ``memory.max`` (no swap) and ``pids.max`` where those
    controllers are enabled; a group without them still holds the run's processes together."""
    group = RunCgroup(v2=base.controllers)
    if not base.usable:
        return group
    d = os.path.join(base.path, name)
    try:
        os.mkdir(d)
        if "memory" in base.controllers:
            _write(os.path.join(d, "memory.max"), str(memory_mb * 2**20))
            group.memory_bytes = memory_mb * 2**20
            with contextlib.suppress(OSError):  # absent without swap accounting
                _write(os.path.join(d, "memory.swap.max"), "0")
        if "pids" in base.controllers:
            _write(os.path.join(d, "pids.max"), str(max_processes))
    except OSError:
        _rmdir(d)
        return RunCgroup()
    group.dirs["v2"] = d
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
    usage reached the limit (``AT_LIMIT_BYTES``, from the peak ``end`` reads anyway; on v2 also a
    charge that met ``memory.max``), the process limit if a fork was refused, and the peak is the
    usage above the run's starting level (page cache a previous run left charged here is
    reclaimable and not counted). On v2 the peak is reset per run through the slot's own
    ``memory.peak`` descriptor (Linux 6.12 and later); where the kernel cannot, a pooled run
    reports no peak rather than the slot's lifetime one.
    """

    def __init__(self, name: str) -> None:
        self.dirs: dict[str, str] = {}
        self._fds: dict[str, int] = {}
        self._set: dict[str, int] = {}
        self._base: tuple[int, int, int] = (0, 0, 0)
        self._peak_resets = False
        base = v2_base()
        if base is not None:
            if base.usable:
                self._open_v2(base, name)
            return
        for ctrl in v1_controllers():
            d = os.path.join(v1_parent(ctrl), name)
            fds = _make_and_open(d, _SLOT_FILES[ctrl])
            if fds is not None:
                self.dirs[ctrl] = d
                self._fds.update(fds)
        with contextlib.suppress(OSError):  # absent without swap accounting
            if "memory" in self.dirs:
                path = os.path.join(self.dirs["memory"], "memory.memsw.limit_in_bytes")
                self._fds["memory.memsw.limit_in_bytes"] = os.open(path, os.O_RDWR)

    def _open_v2(self, base: V2Base, name: str) -> None:
        d = os.path.join(base.path, name)
        fds = _make_and_open(d, [f for c in base.controllers for f in _SLOT_FILES_V2[c]])
        if fds is None:
            return
        self.dirs["v2"] = d
        self.v2 = base.controllers
        self._fds = fds
        if "memory" in base.controllers:
            with contextlib.suppress(OSError):  # absent without swap accounting
                _write(os.path.join(d, "memory.swap.max"), "0")
            try:
                self._fds["memory.peak"] = os.open(os.path.join(d, "memory.peak"), os.O_RDWR)
                os.pwrite(self._fds["memory.peak"], b"reset", 0)
                self._peak_resets = True
            except OSError:  # before Linux 6.12 (or 5.19: no memory.peak at all)
                pass

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
        if self.v2 is not None:
            self._write("memory.max", limit)
            if self._peak_resets:
                os.pwrite(self._fds["memory.peak"], b"reset", 0)  # peak := usage now
            self._write("pids.max", max_processes)
            events = self._read("memory.events")
            self._base = (
                _int(self._read("memory.current")),
                _counter(events, "oom_kill") + _counter(events, "max"),
                _counter(self._read("pids.events"), "max"),
            )
            return
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
        if self.v2 is not None:
            if self.holds("memory"):
                events = self._read("memory.events")
                hits = _counter(events, "oom_kill") + _counter(events, "max")
                at_limit = False
                if self._peak_resets:
                    top = _int(self._read("memory.peak"))
                    peak = max(top - usage0, 0) / 2**20
                    at_limit = top >= self._set.get("memory.max", 1 << 62) - AT_LIMIT_BYTES
                if at_limit or hits > kills0:
                    limit = "memory"
        elif "memory" in self.dirs:
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
        self._close_join()
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = {}
        for d in self.dirs.values():
            _rmdir(d)
        self.dirs = {}


def _make_and_open(d: str, files: Iterable[tuple[str, bool]]) -> dict[str, int] | None:
    """Make group ``d`` and open its control files (name, writable); None, with nothing left
    open or made, when either fails."""
    fds: dict[str, int] = {}
    try:
        os.makedirs(d)
        for f, writable in files:
            fds[f] = os.open(os.path.join(d, f), os.O_RDWR if writable else os.O_RDONLY)
    except OSError:
        for fd in fds.values():
            os.close(fd)
        _rmdir(d)
        return None
    return fds


_SLOT_FILES = {
    "memory": (
        ("memory.limit_in_bytes", True),
        ("memory.max_usage_in_bytes", True),
        ("memory.usage_in_bytes", False),
        ("memory.oom_control", False),
    ),
    "pids": (("pids.max", True), ("pids.events", False)),
    "cpuacct": (),
}
_SLOT_FILES_V2 = {
    "memory": (("memory.max", True), ("memory.current", False), ("memory.events", False)),
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


# -- the service's own memory -----------------------------------------------------------------
CGROUP_ROOT = V1_ROOT
PROC_CGROUP = "/proc/self/cgroup"
MEMINFO = "/proc/meminfo"
_UNLIMITED = 2**60
"""A cgroup v1 limit at or above this is no limit (v1 writes "unlimited" as about 2**63)."""


def _cgroup_limit(line: str) -> int | None:
    """The tightest memory limit on one ``/proc/self/cgroup`` line's group and its ancestors."""
    hierarchy, _, rest = line.partition(":")
    controllers, _, path = rest.partition(":")
    if hierarchy == "0" and not controllers:  # v2
        base, name = os.path.join(CGROUP_ROOT, "unified"), "memory.max"
        if not os.path.isdir(base):
            base = CGROUP_ROOT
    elif "memory" in controllers.split(","):
        base, name = os.path.join(CGROUP_ROOT, "memory"), "memory.limit_in_bytes"
    else:
        return None
    best: int | None = None
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        text = _read_text(os.path.join(base, *parts[:depth], name)).strip()
        if text.isdigit() and int(text) < _UNLIMITED:
            best = int(text) if best is None else min(best, int(text))
    return best


def service_memory_bytes() -> int | None:
    """This process's memory: the tightest memory limit of its cgroup and the cgroup's
    ancestors (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) where one is set, else the
    machine's (``MemTotal``); None where neither can be read. What bounds the service's
    admission (``deepgym.server.admission``) and the pool's size (``deepgym.sandbox.pool``)."""
    limits = [
        limit
        for line in _read_text(PROC_CGROUP).splitlines()
        if (limit := _cgroup_limit(line)) is not None
    ]
    if limits:
        return min(limits)
    for line in _read_text(MEMINFO).splitlines():
        key, _, value = line.partition(":")
        if key == "MemTotal" and value.split() and value.split()[0].isdigit():
            return int(value.split()[0]) * 1024
    return None
