"""A pool worker's reused cgroups: each run's limits, and evidence read as the run's own."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym.judge.blame import counter_ms
from deepgym.sandbox import cgroups

pytestmark = pytest.mark.skipif(
    not {"memory", "pids"} <= set(cgroups.v1_controllers()), reason="needs writable cgroup v1"
)


def _in_slot(slot: cgroups.Slot, code: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``code`` in a fresh interpreter that first joins the slot's groups."""
    join = "".join(f"open({p!r}, 'w').write('0')\n" for p in slot.procs_files.values())
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", join + code], capture_output=True, timeout=60
    )


@pytest.fixture
def slot() -> Iterator[cgroups.Slot]:
    s = cgroups.Slot(f"test-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    yield s
    s.close()
    cgroups.retry_pending(final=True)
    assert not any(os.path.exists(d) for d in s.dirs.values())


def _read(slot: cgroups.Slot, ctrl: str, name: str) -> str:
    with open(os.path.join(slot.dirs[ctrl], name)) as f:
        return f.read().strip()


def test_limits_follow_each_run_up_and_down(slot: cgroups.Slot) -> None:
    for mb, procs in ((256, 8), (64, 4), (512, 16)):
        slot.begin(mb, procs)
        assert _read(slot, "memory", "memory.limit_in_bytes") == str(mb * 2**20)
        assert _read(slot, "pids", "pids.max") == str(procs)
        assert slot.end() == (None, pytest.approx(0.0, abs=1.0))


def test_a_memory_bomb_is_this_runs_evidence_and_not_the_next_ones(slot: cgroups.Slot) -> None:
    slot.begin(32, 8)
    bomb = _in_slot(slot, "x = bytearray(128 * 2**20)\n")
    assert bomb.returncode == -9  # the OOM killer, inside the group
    limit, peak = slot.end()
    assert limit == "memory"
    assert peak is not None and 16 <= peak <= 33
    slot.begin(64, 8)  # the next run on this worker starts clean
    calm = _in_slot(slot, "x = bytearray(8 * 2**20)\n")
    assert calm.returncode == 0
    limit, peak = slot.end()
    assert limit is None
    assert peak is not None and 4 <= peak <= 40


def test_a_refused_fork_is_this_runs_evidence_only(slot: cgroups.Slot) -> None:
    slot.begin(256, 1)  # the interpreter itself is the one process allowed
    forked = _in_slot(slot, "import os\ntry:\n    os.fork()\nexcept OSError:\n    print('no')\n")
    assert forked.stdout.strip() == b"no"
    assert slot.end()[0] == "processes"
    slot.begin(256, 4)
    _in_slot(slot, "pass\n")
    assert slot.end()[0] is None


def _uncached_file(path: Path, mb: int) -> Path:
    """A file of ``mb`` MiB on disk, out of the page cache: reading it charges the reader."""
    with open(path, "wb") as f:
        f.write(os.urandom(2**20) * mb)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return path


READ_ALL = "f = open({path!r}, 'rb')\nwhile f.read(2**20):\n    pass\n"


def test_a_run_held_at_its_memory_limit_is_memory_evidence_without_an_oom_kill(
    slot: cgroups.Slot, tmp_path: Path
) -> None:
    """At the limit the kernel reclaims instead of killing (here: page cache); the run still
    reached its memory limit, and a clock that runs out meanwhile is not what it hit first."""
    big = _uncached_file(tmp_path / "big.bin", 96)
    slot.begin(32, 8)
    reader = _in_slot(slot, READ_ALL.format(path=str(big)))
    assert reader.returncode == 0, reader.stderr  # reclaimed, never killed
    limit, peak = slot.end()
    assert limit == "memory"
    assert peak is not None and peak <= 33
    slot.begin(64, 8)  # below the limit: no memory evidence
    assert _in_slot(slot, "x = bytearray(8 * 2**20)\n").returncode == 0
    assert slot.end()[0] is None


def test_a_per_run_group_held_at_its_memory_limit_is_memory_evidence(tmp_path: Path) -> None:
    big = _uncached_file(tmp_path / "big.bin", 96)
    group = cgroups.create(32, 8)
    try:
        join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files.values())
        code = join + READ_ALL.format(path=str(big))
        reader = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True)
        assert reader.returncode == 0, reader.stderr
        assert group.evidence()[0] == "memory"
    finally:
        group.remove()
        cgroups.retry_pending(final=True)


SPIN_S = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}:\n    pass\n"
needs_cpuacct = pytest.mark.skipif(
    "cpuacct" not in cgroups.v1_controllers(), reason="needs a writable cgroup v1 cpuacct"
)


@needs_cpuacct
def test_a_slot_counts_its_solutions_cpu_time_for_the_judge(slot: cgroups.Slot) -> None:
    """Each pool worker's judge reads its slot's CPU accounting: one pread per reading, every
    process of the run counted, those that already ended too."""
    fd = slot.cpu_fd()
    assert fd is not None and slot.cpu_fd() == fd  # opened once
    assert slot.mechanisms()["time"] == "cgroup-v1"
    before = counter_ms(fd)
    child = "import os\nif os.fork() == 0:\n" + textwrap.indent(SPIN_S.format(s=0.2), "    ")
    child += "    os._exit(0)\nos.wait()\n" + SPIN_S.format(s=0.1)
    assert _in_slot(slot, child).returncode == 0
    assert counter_ms(fd) - before >= 290.0  # the child's 0.2 s and the parent's 0.1 s


@needs_cpuacct
def test_a_run_group_counts_its_cpu_time_and_closes_the_counter_with_it() -> None:
    group = cgroups.create(64, 8)
    try:
        fd = group.cpu_fd()
        assert fd is not None and group.mechanisms()["time"] == "cgroup-v1"
        join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files.values())
        code = join + SPIN_S.format(s=0.2)
        assert subprocess.run([sys.executable, "-I", "-S", "-c", code]).returncode == 0
        assert counter_ms(fd) >= 190.0
    finally:
        group.remove()
        cgroups.retry_pending(final=True)
    with pytest.raises(OSError):
        os.fstat(fd)


def test_without_a_group_the_time_is_measured_from_proc() -> None:
    assert cgroups.RunCgroup().mechanisms()["time"] == "proc"


def _groups_made_in(outer: str) -> dict[str, str]:
    """The groups ``cgroups.create`` makes in a forked child that first moved itself into the
    cpuacct group ``outer`` (as a service, a container or a benchmark's meter puts it), after a
    process of the run spun for 0.2 s in them; the child removes them before it exits."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(r)
            with open(os.path.join(outer, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            cgroups.v1_parent.cache_clear()  # read again, here
            group = cgroups.create(64, 8)
            join = "".join(f"open({p!r}, 'w').write('0')\n" for p in group.procs_files.values())
            subprocess.run([sys.executable, "-I", "-S", "-c", join + SPIN_S.format(s=0.2)])
            os.write(w, json.dumps(group.dirs).encode())
            group.remove()
            cgroups.retry_pending(final=True)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    assert os.waitpid(pid, 0)[1] == 0
    dirs: dict[str, str] = json.loads(out)
    return dirs


@needs_cpuacct
def test_the_cpu_groups_are_made_below_the_processs_own() -> None:
    """What accounts for the host process's CPU time (its service's group, a container's, a
    benchmark's meter; with cpu and cpuacct in one hierarchy, its CPU quota too) still counts
    its answers': their cpuacct groups are made below its own, never beside it."""
    outer = os.path.join(cgroups.V1_ROOT, "cpuacct", f"deepgym-test-{uuid.uuid4().hex[:8]}")
    os.mkdir(outer)
    try:
        dirs = _groups_made_in(outer)
        assert dirs["cpuacct"].startswith(outer + "/deepgym/"), dirs
        assert dirs["memory"].startswith(os.path.join(cgroups.V1_ROOT, "memory", "deepgym"))
        with open(os.path.join(outer, "cpuacct.usage")) as f:
            assert int(f.read()) / 1e6 >= 190.0  # the answer's 0.2 s, counted above
    finally:
        for folder in (os.path.join(outer, "deepgym"), outer):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    assert not os.path.exists(outer)
