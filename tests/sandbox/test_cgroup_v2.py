"""cgroup v2: limits and evidence through a delegated subtree (``DEEPGYM_CGROUP``, or a group
systemd delegated).

This host mounts cgroup v2 without the memory and pids controllers (they sit in its v1
hierarchies), so two kinds of test:

- a fake cgroup v2 folder, whose ``mkdir`` makes the control files as the kernel does: what each
  run writes (``memory.max``, ``memory.swap.max``, ``pids.max``) and how the evidence is read
  from ``memory.events``, ``memory.peak`` and ``pids.events``;
- the host's real cgroup v2 hierarchy, controller-less: every backend's solution process joins
  its run's v2 group through the host's descriptor (across the sandbox's cgroup namespace), the
  groups are gone after the run, and a group with processes moves them into a leaf before it
  enables a controller (the kernel refuses otherwise).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import deepgym
from deepgym import DeepGym, Environment
from deepgym.envs.registry import load_folder
from deepgym.sandbox import cgroups, doctor, make_backend

CONTROL_FILES = {
    "cgroup.procs": "",
    "cgroup.controllers": "memory pids\n",
    "cgroup.subtree_control": "",
    "memory.max": "",  # written ones start empty: a plain file, unlike cgroupfs, is not
    "memory.swap.max": "",  # truncated by a write at offset 0
    "memory.current": "0\n",
    "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
    "pids.max": "",
    "pids.events": "max 0\n",
    "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",  # in every group, no controller
}


def _clear() -> None:
    cgroups.v1_controllers.cache_clear()
    cgroups.v2_base.cache_clear()


@pytest.fixture
def fake_v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake cgroup v2 folder with memory and pids enabled, given as ``DEEPGYM_CGROUP``; its
    ``mkdir`` and ``rmdir`` make and drop the control files, as cgroupfs does."""
    base = tmp_path / "cg"
    base.mkdir()
    for name, text in CONTROL_FILES.items():
        (base / name).write_text(text)
    (base / "cgroup.subtree_control").write_text("memory pids\n")
    real_mkdir, real_rmdir = os.mkdir, os.rmdir

    def mkdir(path: str, *args: int, **kwargs: int) -> None:
        real_mkdir(path, *args, **kwargs)
        if Path(path).parent == base:
            for name, text in CONTROL_FILES.items():
                Path(path, name).write_text(text)

    def rmdir(path: str, *args: int, **kwargs: int) -> None:
        if Path(path).parent == base and Path(path).is_dir():
            for f in Path(path).iterdir():
                f.unlink()
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "rmdir", rmdir)
    monkeypatch.setenv(cgroups.V2_ENV, str(base))
    _clear()
    yield base
    cgroups.retry_pending(final=True)
    _clear()


def test_the_given_folder_is_used_before_cgroup_v1(fake_v2: Path) -> None:
    assert cgroups.v1_controllers() == ()
    base = cgroups.v2_base()
    assert base == cgroups.V2Base(
        str(fake_v2), "DEEPGYM_CGROUP", ("memory", "pids"), available=("memory", "pids")
    )
    assert cgroups.group_parents() == [str(fake_v2)]


def test_a_run_group_holds_the_limits_and_reads_its_evidence(fake_v2: Path) -> None:
    group = cgroups.create(64, 8, owner="tok")
    d = Path(group.dirs["v2"])
    assert d.parent == fake_v2 and d.name.startswith("run-tok-")
    assert (d / "memory.max").read_text() == str(64 * 2**20)
    assert (d / "memory.swap.max").read_text() == "0"  # no swap: memory.max is all it gets
    assert (d / "pids.max").read_text() == "8"
    assert group.holds("memory") and group.holds("pids")
    assert group.mechanisms() == {
        "memory": "cgroup-v2",
        "processes": "cgroup-v2",
        "time": "cgroup-v2",
    }
    assert os.path.samefile(f"/proc/self/fd/{group.cpu_fd()}", d / "cpu.stat")
    assert group.evidence() == (None, None)  # no memory.peak (before Linux 5.19)
    (d / "memory.peak").write_text(str(20 * 2**20))
    assert group.evidence() == (None, 20.0)
    (d / "pids.events").write_text("max 1\n")
    assert group.evidence() == ("processes", 20.0)
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n")
    assert group.evidence() == ("memory", 20.0)  # memory outranks processes
    (d / "memory.events").write_text("max 0\noom_kill 0\n")
    (d / "pids.events").write_text("max 0\n")
    (d / "memory.peak").write_text(str(64 * 2**20))
    assert group.evidence() == ("memory", 64.0)  # held at the limit by reclaim
    joins, binds, fds = group.join("/cg/{}.procs")
    assert binds == {} and joins == f"&{fds[0]}"
    assert os.path.samefile(f"/proc/self/fd/{fds[0]}", d / "cgroup.procs")
    group.remove()
    assert not d.exists()
    with pytest.raises(OSError):
        os.fstat(fds[0])  # the host's descriptor is closed with the group


def test_a_pool_slot_reads_each_runs_own_evidence(fake_v2: Path) -> None:
    slot = cgroups.Slot(cgroups.owned_name("pool", "tok"))
    d = Path(slot.dirs["v2"])
    try:
        slot.begin(64, 8)
        assert (d / "memory.max").read_text() == str(64 * 2**20)
        assert (d / "pids.max").read_text() == "8"
        assert slot.end() == (None, None)  # the fake has no memory.peak: no peak, never a wrong one
        (d / "memory.events").write_text("max 0\noom_kill 1\n")
        assert slot.end()[0] == "memory"
        slot.begin(128, 4)  # the next run starts from the counters as they are
        assert (d / "memory.max").read_text() == str(128 * 2**20)
        assert slot.end() == (None, None)
        (d / "pids.events").write_text("max 2\n")
        assert slot.end()[0] == "processes"
    finally:
        slot.close()
    assert not d.exists()


def test_a_slot_resets_its_peak_per_run_where_the_kernel_can(
    fake_v2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CONTROL_FILES, "memory.peak", "0")
    slot = cgroups.Slot(cgroups.owned_name("pool", "tok"))
    d = Path(slot.dirs["v2"])
    try:
        (d / "memory.current").write_text(str(4 * 2**20))
        slot.begin(64, 8)
        assert (d / "memory.peak").read_text() == "reset"  # written through the slot's fd
        (d / "memory.peak").write_text(str(36 * 2**20))
        assert slot.end() == (None, 32.0)  # above the run's starting usage
    finally:
        slot.close()


def test_the_groups_of_a_dead_owner_are_swept(fake_v2: Path) -> None:
    dead = [cgroups.create(64, 8, owner="dead").dirs["v2"] for _ in range(2)]
    live = cgroups.create(64, 8, owner="live")
    assert cgroups.remove_owned("dead")
    assert not any(os.path.exists(d) for d in dead)
    assert os.path.isdir(live.dirs["v2"])
    live.remove()


def test_a_folder_that_is_not_cgroup_v2_gives_rlimits_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cgroups.V2_ENV, str(tmp_path))
    _clear()
    try:
        base = cgroups.v2_base()
        assert base is not None and not base.usable
        group = cgroups.create(64, 8)
        assert group.dirs == {} and not group.holds("memory")
        assert group.mechanisms() == {"memory": "rlimit", "processes": "rlimit", "time": "proc"}
        assert list(tmp_path.iterdir()) == []  # nothing made in an ordinary folder
        rows = doctor.check_limits((), "", base)
        assert [r.status for r in rows] == [doctor.WEAK, doctor.WEAK]
        assert "is not a cgroup v2 folder" in rows[0].found and "Delegate=yes" in rows[0].fix
    finally:
        _clear()


def test_a_folder_that_holds_other_processes_cannot_enable_controllers(tmp_path: Path) -> None:
    folder = tmp_path / "cg"
    folder.mkdir()
    for name, text in CONTROL_FILES.items():
        (folder / name).write_text(text)
    base = cgroups.read_v2(str(folder), "given")  # available, not yet enabled, no process
    assert base.available == ("memory", "pids") and "not yet enabled" in base.problem
    (folder / "cgroup.procs").write_text("1\n")  # a process that is not this one
    base = cgroups.read_v2(str(folder), "given")
    assert base.available == () and "holds processes other than this one" in base.problem
    rows = doctor.check_limits((), "", base)
    assert [r.status for r in rows] == [doctor.WEAK, doctor.WEAK]
    (folder / "cgroup.procs").write_text(f"1\n{os.getpid()}\n")  # deepgym would move both
    assert cgroups.read_v2(str(folder), "given").available == ("memory", "pids")


def test_the_doctor_reads_the_v2_folder_as_it_is() -> None:
    both = cgroups.V2Base("/cg", "delegated", ("memory", "pids"), available=("memory", "pids"))
    rows = doctor.check_limits((), "", both)
    assert [r.status for r in rows] == [doctor.OK, doctor.OK]
    assert "cgroup v2 /cg (delegated): memory enabled" in rows[0].found
    assert doctor.Report(tuple(rows)).exit_code == 0
    later = cgroups.V2Base("/cg", "DEEPGYM_CGROUP", (), "not yet", available=("memory", "pids"))
    assert [r.status for r in doctor.check_limits((), "", later)] == [doctor.OK, doctor.OK]
    half = cgroups.V2Base(
        "/cg", "DEEPGYM_CGROUP", ("memory",), "pids not in", available=("memory",)
    )
    rows = doctor.check_limits((), "", half)
    assert [r.status for r in rows] == [doctor.OK, doctor.WEAK]
    assert "pids not in" in rows[1].found and "RLIMIT_NPROC" in rows[1].means


# -- the host's real cgroup v2 hierarchy ---------------------------------------------------------
def _real_v2() -> str | None:
    """A writable folder of this host's cgroup v2 hierarchy (None: none here)."""
    own = cgroups.own_v2_group()
    if own is None or not cgroups.is_v2_folder(own):
        return None
    probe = os.path.join(own, f"deepgym-probe-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError:
        return None
    return own


REAL_V2 = _real_v2()
needs_real_v2 = pytest.mark.skipif(REAL_V2 is None, reason="no writable cgroup v2 hierarchy")


@pytest.fixture
def real_v2() -> Iterator[str]:
    """A fresh folder of the host's cgroup v2 hierarchy, removed (with what is left) after."""
    assert REAL_V2 is not None
    folder = os.path.join(REAL_V2, f"deepgym-test-{uuid.uuid4().hex[:8]}")
    os.mkdir(folder)
    yield folder
    deadline = time.monotonic() + 10
    while os.path.isdir(folder) and time.monotonic() < deadline:
        _remove_children(folder)
        try:
            os.rmdir(folder)
        except OSError:
            time.sleep(0.05)
    assert not os.path.isdir(folder), f"{folder} was left behind"


SLEEPY_ADD = Environment(
    name="cgroup-v2-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=10.0,
    case_timeout=5.0,
    memory_mb=256,
    max_processes=16,
    max_file_mb=16,
)


@needs_real_v2
@pytest.mark.sandbox
@pytest.mark.parametrize("sandbox", ["strict", "pool", "unsafe"])
def test_each_backends_solution_joins_its_v2_group(
    sandbox: str, real_v2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watching(real_v2, monkeypatch) as seen:
        dg = DeepGym(backend=make_backend(sandbox))
        try:
            answer = "import time\ndef add(a, b):\n    time.sleep(0.5)\n    return a + b\n"
            result = dg.run(SLEEPY_ADD, answer)
        finally:
            dg.close()
    assert result.has_verdict and result.score == 1.0, result
    kind = "pool-" if sandbox == "pool" else "run-"
    assert any(name.startswith(kind) for name in seen), seen  # the solution was in its group
    # no controller here: the limits were rlimits, and the result says so; the time limits read
    # the group's CPU accounting (cpu.stat, in every group)
    assert result.evidence.limit_mechanism["memory"] == "rlimit"
    assert result.evidence.limit_mechanism["time"] == "cgroup-v2"
    _nothing_left(real_v2)


@needs_real_v2
@pytest.mark.sandbox
def test_a_sessions_shell_and_its_verifier_join_their_v2_groups(
    real_v2: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = load_folder(Path(deepgym.__file__).parent / "envs" / "agent" / "fix_add")
    with watching(real_v2, monkeypatch) as seen, DeepGym() as dg, dg.session(example) as s:
        s.exec("sleep 0.3")
        during = {n for n in seen if n.startswith("run-")}
        s.exec("sed -i 's/a - b/a + b/' calc.py")
        result = s.score()
    assert during, seen  # the session's shell, in its group while the agent acted
    assert len({n for n in seen if n.startswith("run-")}) >= 2, seen  # and the final verifier
    assert (result.score, result.has_verdict) == (1.0, True), result
    _nothing_left(real_v2)


@contextlib.contextmanager
def watching(folder: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, set[str]]]:
    """Use ``folder`` as ``DEEPGYM_CGROUP`` and record which of its groups held a process, and
    which, while the block runs; then check nothing else was made there but the folder's join
    probe (``cgroups.join_refused``)."""
    monkeypatch.setenv(cgroups.V2_ENV, folder)
    _clear()
    seen: dict[str, set[str]] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for name in os.listdir(folder):
                try:
                    with open(os.path.join(folder, name, "cgroup.procs")) as f:
                        pids = set(f.read().split())
                except OSError:
                    continue
                if pids:
                    seen.setdefault(name, set()).update(pids)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()
        _clear()
    assert not [n for n in seen if not n.startswith(("run-", "pool-", "probe-"))], seen


def _nothing_left(folder: str) -> None:
    left = [n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n))]
    assert left == [], left


MOVE_AND_ENABLE = """
import json, os, sys
from deepgym.sandbox import cgroups
folder = sys.argv[1]
with open(os.path.join(folder, "cgroup.procs"), "w") as f:
    f.write(str(os.getpid()))
try:
    with open(os.path.join(folder, "cgroup.subtree_control"), "w") as f:
        f.write("+" + sys.argv[2])
    before = "enabled"
except OSError as exc:
    before = exc.errno
cgroups.V2_CONTROLLERS = (sys.argv[2],)
base = cgroups.prepare_v2(cgroups.read_v2(folder, "test"))
own = [ln for ln in open("/proc/self/cgroup") if ln.startswith("0::")][0].strip()
print(json.dumps({"before": before, "controllers": base.controllers, "own": own}))
"""


@needs_real_v2
def test_a_group_with_processes_moves_them_to_a_leaf_before_it_enables_a_controller(
    real_v2: str,
) -> None:
    parent = Path(real_v2).parent
    offered = Path(parent, "cgroup.controllers").read_text().split()
    available = Path(real_v2, "cgroup.controllers").read_text().split()
    lent = None
    if not available and offered and not Path(parent, "cgroup.type").exists():
        # the hierarchy's root (no cgroup.type), which may hold processes: lend the test folder
        # one of its controllers for this test
        lent = offered[0]
        Path(parent, "cgroup.subtree_control").write_text(f"+{lent}")
        available = [lent]
    if not available:
        pytest.skip("no controller this test could enable in this cgroup v2 hierarchy")
    ctrl = available[0]
    try:
        _move_and_enable(real_v2, ctrl)
    finally:
        if lent is not None:  # give it back: first below, then at the root
            _remove_children(real_v2)
            with contextlib.suppress(OSError):
                Path(real_v2, "cgroup.subtree_control").write_text(f"-{lent}")
            Path(parent, "cgroup.subtree_control").write_text(f"-{lent}")
            assert lent not in Path(parent, "cgroup.subtree_control").read_text().split()


def _remove_children(folder: str) -> None:
    for child in os.listdir(folder):
        if os.path.isdir(os.path.join(folder, child)):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(folder, child))


def _move_and_enable(real_v2: str, ctrl: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", MOVE_AND_ENABLE, real_v2, ctrl],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["before"] == errno.EBUSY  #: the kernel refuses while the group holds a process
    assert got["controllers"] == [ctrl]
    assert got["own"].endswith(f"/{os.path.basename(real_v2)}/{cgroups.HOST_LEAF}")
    assert ctrl in Path(real_v2, "cgroup.subtree_control").read_text().split()


PROBE_AS_NOBODY = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cgroups_alone", sys.argv[1])
cg = sys.modules["cgroups_alone"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cg)
print(cg.join_refused(sys.argv[2]))
"""


@needs_real_v2
def test_a_folder_whose_groups_cannot_be_joined_is_refused_with_its_cause(real_v2: str) -> None:
    """A folder handed to another user, who may make groups in it but not move a process from
    the hierarchy's root into them (the kernel asks for write access to the common parent's
    ``cgroup.procs``): the probe says so, and a root process's probe passes."""
    assert cgroups.join_refused(real_v2) == ""
    python = next(
        (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if Path(p).exists()), ""
    )
    if os.getuid() != 0 or not python:
        pytest.skip("needs root and a system python3 another user can run")
    nobody = 65534
    os.chown(real_v2, nobody, nobody)
    for name in ("cgroup.procs", "cgroup.subtree_control"):
        os.chown(os.path.join(real_v2, name), nobody, nobody)
    out = subprocess.run(
        [python, "-I", "-S", "-c", PROBE_AS_NOBODY, cgroups.__file__, real_v2],
        user=nobody,
        group=nobody,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr
    assert "is refused (Permission denied)" in out.stdout, out.stdout
    assert [n for n in os.listdir(real_v2) if n.startswith("probe-")] == []  # removed
