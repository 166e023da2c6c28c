"""Fixtures for tests that start real sandboxes: the backend list, a client, a host guard.

Every attack runs once per backend in ``SANDBOXES``; a new backend joins by name and must pass the
same list. The ``host`` guard snapshots what an escaped answer would change on this machine (the
processes a sandbox could leave behind, the run's cgroups, tmpfs and available memory) and checks
it afterwards. Run these tests inside a pid namespace of their own, and not as its pid 1::

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

from deepgym import DeepGym, Environment
from deepgym.exceptions import SandboxUnavailableError
from deepgym.sandbox import cgroups, make_backend
from deepgym.sandbox.base import Backend
from deepgym.sandbox.host import SANDBOX_PYTHON, find_bwrap
from tests.procs import children, parent

SANDBOXES = ["strict", "pool"]
"""Every backend that must pass the attack suite (a new one joins by name)."""

MODULE_SECRET_VAR = "DEEPGYM_ATTACK_MODULE_SECRET"
"""Set for the whole module, before any client starts, so that a long-lived worker inherits it."""

SHMEM_SLACK_KB = 64 * 1024
"""tmpfs and shared memory (what a sandbox could leave without a process) may grow this much."""

MEMORY_SLACK_KB = 512 * 1024
"""Available memory may drop by this much between snapshots (other work on the machine)."""

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


def meminfo() -> dict[str, int]:
    """``MemAvailable`` and ``Shmem`` (tmpfs, shared memory) in kB."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("MemAvailable", "Shmem"):
                out[key] = int(rest.split()[0])
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


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _started(pid: int) -> int:
    """When ``pid`` started (clock ticks since boot; 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return 0
    return int(raw[raw.rfind(b")") + 2 :].split()[19])


def live_pool_pids(backend: Backend | None) -> set[int]:
    """The live pool's own processes (a replaced worker is the pool working as meant): each
    worker's bwrap, the worker, its zygote, the zygote's standby (a process forked ahead of
    the next run, named ``dg-standby`` until it has one) and the standby's init (``dg-init``,
    forked just before it), never a solution process or the init of a run's namespace."""
    workers = getattr(backend, "_workers", None) or []
    roots = {w.proc.pid for w in workers if w.proc.returncode is None}
    tree = children()
    out: set[int] = set()
    todo = list(roots)
    while todo:
        p = todo.pop()
        comm = _comm(p)
        if comm in ("", "dg-solution", "dg-init"):
            continue
        out.add(p)
        kids = tree.get(p, [])
        todo.extend(kids)
        # as many inits as standbys are the pool's own: the newest (a run's is older, and
        # would be left behind)
        inits = sorted((k for k in kids if _comm(k) == "dg-init"), key=lambda k: (_started(k), k))
        standbys = sum(1 for k in kids if _comm(k) == "dg-standby")
        out.update(inits[len(inits) - standbys :] if standbys else [])
    return out


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
    cgroups: list[str] = field(default_factory=list)
    backend: Backend | None = None
    """The backend under test: its own live processes and cgroups are not leftovers."""

    @classmethod
    def take(cls, backend: Backend | None = None) -> HostGuard:
        return cls(pids=pids(), mem=meminfo(), backend=backend)

    def leftovers(self) -> tuple[set[int], set[str]]:
        # A group still busy at the run's end is removed at the backend's next attempt.
        cgroups.retry_pending(final=False)
        new = suspects(pids() - self.pids - {os.getpid()} - live_pool_pids(self.backend))
        return new, {d for d in self.cgroups if os.path.exists(d)} | busy_pool_slots(self.backend)

    def memory_back(self) -> bool:
        now = meminfo()
        return (
            now["Shmem"] <= self.mem["Shmem"] + SHMEM_SLACK_KB
            and now["MemAvailable"] >= self.mem["MemAvailable"] - MEMORY_SLACK_KB
        )

    def check(self, files: Sequence[Path | str] = (), *, memory: bool = True) -> None:
        """No new process, no run cgroup left, memory back (unless ``memory`` is False), none of
        ``files`` on the host."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            procs, groups = self.leftovers()
            mem_ok = self.memory_back() or not memory
            if (not procs and not groups and mem_ok) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert not procs, f"processes left behind: {[describe(p) for p in sorted(procs)]}"
        assert not groups, f"run cgroups left behind: {[cgroup_state(d) for d in sorted(groups)]}"
        assert mem_ok, f"memory not back: {self.mem} kB before, {meminfo()} kB after"
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
    create = cgroups.create

    def spy(*args: Any, **kwargs: Any) -> cgroups.RunCgroup:
        group = create(*args, **kwargs)
        guard.cgroups.extend(group.dirs.values())
        return group

    monkeypatch.setattr(cgroups, "create", spy)
    yield guard
    guard.check()
