"""A pool worker's reused cgroups: each run's limits, and evidence read as the run's own."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from deepgym.sandbox import cgroups

pytestmark = pytest.mark.skipif(
    set(cgroups.v1_controllers()) != {"memory", "pids"}, reason="needs writable cgroup v1"
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
