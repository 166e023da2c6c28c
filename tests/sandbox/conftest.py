"""Fixtures for tests that start real sandboxes: the backend list, a client, a host guard.

Every attack runs once per backend in ``SANDBOXES``; a new backend joins by name and must pass the
same list. The ``host`` guard snapshots what an escaped answer would leave behind of the sandbox's
own (the processes below this test, the run's cgroups, and the memory charged to the pool's
per-worker cgroups: an answer's anonymous or shared memory that outlived its run) and checks it
afterwards. It never measures the machine as a whole: other work on a shared machine (its free
memory, its tmpfs) is not the test's. Run these tests inside a pid namespace of their own, and
not as its pid 1::

    unshare --pid --fork --mount-proc --kill-child sh -c 'python -m pytest tests/sandbox; exit $?'

so that every new process counts, and one that escaped a sandbox still dies with the test run.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.exceptions import SandboxUnavailableError
from deepgym.sandbox import cgroups, headers, make_backend
from deepgym.sandbox.base import Backend
from deepgym.sandbox.host import SANDBOX_PYTHON, find_bwrap
from tests.procs import children, comm, parent

SANDBOXES = ["strict", "pool"]
"""Every backend that must pass the attack suite (a new one joins by name)."""

MODULE_SECRET_VAR = "DEEPGYM_ATTACK_MODULE_SECRET"
"""Set for the whole module, before any client starts, so that a long-lived worker inherits it."""

SLOT_SLACK_KB = 1024
"""Anonymous and shared memory a pool worker's cgroup may hold between runs (none is expected:
every process of a run has ended, and its tmpfs with its mount namespace)."""

SETTLE_S = 3.0
"""How long a check waits for the kernel to finish reaping a sandbox's processes."""


ADD = Environment(
    name="attack-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}, {"args": [5, 7], "expected": 12}],
    timeout=3.0,
    case_timeout=1.0,
    memory_mb=256,
    max_processes=16,
    max_file_mb=16,
)
ADD_OK = "def add(a, b):\n    return a + b\n"


def pids() -> set[int]:
    """Every process in this pid namespace, as /proc lists them."""
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def _ancestors(pid: int) -> set[int]:
    out: set[int] = set()
    while pid > 1 and (up := parent(pid)) is not None:
        pid = up
        out.add(pid)
    return out


PRIVATE_PID_NS = pids() <= {os.getpid()} | _ancestors(os.getpid())
"""True under ``unshare --pid --fork --mount-proc``: every new process is then a suspect. In a
shared namespace (a CI container) only processes that look like a sandbox's are."""


def _sandbox_exes() -> set[str]:
    try:
        return {os.path.realpath(SANDBOX_PYTHON), os.path.realpath(find_bwrap().path)}
    except SandboxUnavailableError:
        return {os.path.realpath(SANDBOX_PYTHON)}


_SANDBOX_EXES = _sandbox_exes()


def suspects(new: set[int]) -> set[int]:
    """The processes among ``new`` that a sandbox could have left behind."""
    if PRIVATE_PID_NS:
        return new
    own_ns = os.readlink("/proc/self/ns/pid")
    out = set()
    for p in new:
        try:
            other_ns = os.readlink(f"/proc/{p}/ns/pid") != own_ns
            exe = os.path.realpath(f"/proc/{p}/exe")
        except OSError:  # gone, or not ours to inspect
            continue
        if other_ns or exe in _SANDBOX_EXES or os.getpid() in _ancestors(p):
            out.add(p)
    return out


def slot_memory_kb(backend: Backend | None) -> dict[str, int]:
    """The anonymous and shared memory (kB) charged to each of the live pool's per-worker
    memory cgroups: what an answer's processes or files could hold after its run."""
    out = {}
    for worker in getattr(backend, "_workers", None) or []:
        d = worker.slot.dirs.get("memory") or worker.slot.dirs.get("v2")
        try:
            with open(os.path.join(d or "", "memory.stat")) as f:
                stat = dict(line.split() for line in f)
        except OSError:  # no memory cgroup here: the processes and groups are checked alone
            continue
        keys = ("total_rss", "total_shmem") if "total_rss" in stat else ("anon", "shmem")
        out[d or ""] = sum(int(stat.get(k, 0)) for k in keys) // 1024
    return out


def busy_pool_slots(backend: Backend | None) -> set[str]:
    """The live pool's per-worker cgroups that still hold a process between runs (a solution
    process that outlived its run)."""
    out = set()
    for worker in getattr(backend, "_workers", None) or []:
        for d in worker.slot.dirs.values():
            with open(os.path.join(d, "cgroup.procs")) as f:
                if f.read().strip():
                    out.add(d)
    return out


def _pid_ns(pid: int) -> str:
    """The pid namespace ``pid`` is in ("" once it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def live_pool_pids(backend: Backend | None) -> set[int]:
    """The live pool's own processes (a replaced worker is the pool working as meant): each
    worker's bwrap, the worker, its zygote, the zygote's standby (a process forked ahead of the
    next run, named ``dg-standby`` until it has one) and the standby's init (``dg-init``, the
    zygote's child whose pid namespace the standby is in), never a solution process or the init
    of a run's namespace."""
    workers = getattr(backend, "_workers", None) or []
    roots = {w.proc.pid for w in workers if w.proc.returncode is None}
    tree = children()
    out: set[int] = set()
    todo = list(roots)
    while todo:
        p = todo.pop()
        if comm(p) in ("", "dg-solution", "dg-init"):
            continue
        out.add(p)
        todo.extend(tree.get(p, []))
    standbys = {_pid_ns(p) for p in out if comm(p) == "dg-standby"} - {""}
    zygotes = [p for p in out if comm(p) == "dg-zygote"]
    return out | {k for z in zygotes for k in tree.get(z, []) if _pid_ns(k) in standbys}


HEADER_WAIT_S = 300.0
"""How long a guard waits for a precompiled header's build to end (a few seconds of CPU at the
lowest priority; longer on a loaded host)."""


def wait_for_header_builds() -> None:
    """Wait for the precompiled headers being built (``sandbox.headers``): the first C++ build of
    a compile line in the session starts one in the background, the backend's own work and not
    the answer's. Once it has ended, its sandbox, processes and cgroup must be gone like any
    other."""
    deadline = time.monotonic() + HEADER_WAIT_S
    while headers._BUILDING and time.monotonic() < deadline:
        time.sleep(0.1)


def describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        return f"{pid}: {cmd[:200]}"
    except OSError:
        return f"{pid}: (gone)"


def cgroup_state(path: str) -> str:
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            procs = f.read().split()
    except OSError as exc:
        return f"{path}: {exc}"
    return f"{path}: procs {procs}, pending removal {path in cgroups._PENDING}"


@dataclass
class HostGuard:
    """What the host looked like before an attack; ``check`` asserts it looks the same after.

    ``cgroups`` collects the per-run cgroups this process creates meanwhile (other processes on
    the machine may be running sandboxes of their own, so a glob would see theirs too); a pool's
    per-worker groups must be empty between runs.
    """

    pids: set[int]
    mem: dict[str, int]
    """The pool's per-worker memory (``slot_memory_kb``) before the attack."""
    cgroups: list[str] = field(default_factory=list)
    backend: Backend | None = None
    """The backend under test: its own live processes and cgroups are not leftovers."""

    @classmethod
    def take(cls, backend: Backend | None = None) -> HostGuard:
        return cls(pids=pids(), mem=slot_memory_kb(backend), backend=backend)

    def leftovers(self) -> tuple[set[int], set[str]]:
        # A group still busy at the run's end is removed at the backend's next attempt.
        cgroups.retry_pending(final=False)
        new = suspects(pids() - self.pids - {os.getpid()} - live_pool_pids(self.backend))
        return new, {d for d in self.cgroups if os.path.exists(d)} | busy_pool_slots(self.backend)

    def memory_back(self) -> bool:
        """Each pool worker's cgroup holds no more of an answer's memory than before."""
        now = slot_memory_kb(self.backend)
        return all(kb <= self.mem.get(d, 0) + SLOT_SLACK_KB for d, kb in now.items())

    def watch_cgroups(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Collect into ``cgroups`` every per-run cgroup this process creates from now on."""
        create = cgroups.create

        def spy(*args: Any, **kwargs: Any) -> cgroups.RunCgroup:
            group = create(*args, **kwargs)
            self.cgroups.extend(group.dirs.values())
            return group

        monkeypatch.setattr(cgroups, "create", spy)

    def check(self, files: Sequence[Path | str] = (), *, memory: bool = True) -> None:
        """No new process, no run cgroup left, memory back (unless ``memory`` is False), none of
        ``files`` on the host."""
        wait_for_header_builds()
        deadline = time.monotonic() + SETTLE_S
        while True:
            procs, groups = self.leftovers()
            mem_ok = self.memory_back() or not memory
            if (not procs and not groups and mem_ok) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not procs, f"processes left behind: {[describe(p) for p in sorted(procs)]}"
        assert not groups, f"run cgroups left behind: {[cgroup_state(d) for d in sorted(groups)]}"
        now = slot_memory_kb(self.backend)
        assert mem_ok, f"memory left in the pool's cgroups: {self.mem} kB before, {now} kB after"
        for path in files:
            assert not Path(path).exists(), f"the answer wrote {path} on the host"


@pytest.fixture(scope="module", params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def module_secret() -> Iterator[str]:
    """A secret in this process's environment before any client starts (workers inherit it)."""
    value = "modsecret-" + secrets.token_hex(16)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(MODULE_SECRET_VAR, value)
        yield value


@pytest.fixture(scope="module")
def backend(sandbox: str) -> Backend:
    """The backend under test (the ``dg`` client closes it)."""
    try:
        return make_backend(sandbox)
    except SandboxUnavailableError as exc:
        pytest.skip(f"the {sandbox} sandbox cannot run on this host: {exc}")


@pytest.fixture(scope="module")
def dg(backend: Backend, module_secret: str) -> Iterator[DeepGym]:
    """One warmed-up client per backend: a correct answer scores 1.0 before any attack."""
    sandbox = backend.name
    before = pids()
    client = DeepGym(backend=backend)
    try:
        try:
            warm = client.run(ADD, ADD_OK)
        except SandboxUnavailableError as exc:
            pytest.skip(f"the {sandbox} sandbox cannot run on this host: {exc}")
        assert warm.has_verdict and warm.score == 1.0, warm
        assert warm.isolation == sandbox
        yield client
    finally:
        client.close()
    deadline = time.monotonic() + SETTLE_S
    while (left := suspects(pids() - before)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"the client left processes behind: {[describe(p) for p in left]}"


@pytest.fixture
def host(dg: DeepGym, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostGuard]:
    """A snapshot of the host taken after the client is warm; checked again at teardown."""
    guard = HostGuard.take(backend)
    guard.watch_cgroups(monkeypatch)
    yield guard
    guard.check()


def held_back(r: RunResult) -> bool:
    """Whether the host held a computing answer back past its backstop (a loaded machine): no
    verdict, never the answer's 0 (``deepgym.judge.blame``). Checks the result says so."""
    if r.has_verdict:
        return False
    assert r.error_type == "timeout" and "held back by the host" in (r.error or ""), r
    return True
