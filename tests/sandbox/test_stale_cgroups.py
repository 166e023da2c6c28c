"""The cgroups of a process killed by SIGKILL are removed by the next sweep; a live one's never.

A process here makes a ``Workspace`` and, named for its owner token, a pool slot and a run group
(what a backend makes), then is SIGKILLed: ``sweep_stale`` removes its groups, then its folder.
A group that still holds a process stays, and the folder with its lock stays until it is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepgym.sandbox import cgroups
from deepgym.sandbox.workspace import LOCK, PREFIX, owner_of, sweep_stale

pytestmark = pytest.mark.skipif(
    not {"memory", "pids"} <= set(cgroups.v1_controllers()), reason="needs writable cgroup v1"
)

REPO = Path(__file__).resolve().parents[2]

_HOLDER = """
import json, subprocess, sys, time
from deepgym.sandbox import cgroups
from deepgym.sandbox.workspace import Workspace

w = Workspace()
slot = cgroups.Slot(cgroups.owned_name("pool", w.owner))
run = cgroups.create(64, 8, owner=w.owner)
child = None
if sys.argv[1] == "busy":  # a process in the run's groups, which outlives this one
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    for procs in run.procs_files.values():
        with open(procs, "w") as f:
            f.write(str(child.pid))
groups = [*slot.dirs.values(), *run.dirs.values()]
print(json.dumps({"root": str(w.root), "groups": groups, "child": child and child.pid}))
sys.stdout.flush()
time.sleep(60)
"""


@dataclass
class Holder:
    proc: subprocess.Popen[str]
    root: Path
    groups: list[str]
    child: int | None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def _holder(tmp_path: Path, mode: str) -> Holder:
    env = {**os.environ, "DEEPGYM_TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, mode], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    made = json.loads(proc.stdout.readline())
    return Holder(proc, Path(made["root"]), made["groups"], made["child"])


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[list[Holder]]:
    """Start holders with ``holders.append(_holder(...))``; every one (and its child) is
    killed, and every group it made removed, at the end."""
    made: list[Holder] = []
    yield made
    for h in made:
        h.proc.kill()
        h.proc.wait(timeout=30)
        if h.proc.stdout is not None:
            h.proc.stdout.close()
        if h.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(h.child, signal.SIGKILL)
    for h in made:
        for d in h.groups:
            cgroups._rmdir(d)
    cgroups.retry_pending(final=True)


def test_a_killed_processs_groups_go_before_its_folder(
    tmp_path: Path, holders: list[Holder]
) -> None:
    h = _holder(tmp_path, "idle")
    holders.append(h)
    # a slot and a run, a group per v1 controller each
    assert owner_of(h.root) is not None and len(h.groups) == 2 * len(cgroups.v1_controllers())
    assert all(owner_of(h.root) in Path(d).name for d in h.groups)
    h.kill()
    assert all(os.path.isdir(d) for d in h.groups)  # SIGKILL: its close never ran
    assert sweep_stale(tmp_path) == [h.root]
    assert not any(os.path.exists(d) for d in h.groups)
    assert not h.root.exists()


def test_a_live_processs_groups_and_folder_are_kept(tmp_path: Path, holders: list[Holder]) -> None:
    h = _holder(tmp_path, "idle")  # its groups are empty: only its lock says it lives
    holders.append(h)
    assert sweep_stale(tmp_path) == []
    assert all(os.path.isdir(d) for d in h.groups) and (h.root / LOCK).is_file()


def test_a_group_that_holds_a_process_keeps_its_owners_folder_until_it_is_empty(
    tmp_path: Path, holders: list[Holder]
) -> None:
    h = _holder(tmp_path, "busy")
    holders.append(h)
    assert h.child is not None
    h.kill()
    assert sweep_stale(tmp_path) == []  # the run's groups hold the child: never removed
    busy = [d for d in h.groups if Path(d).name.startswith("run-")]
    assert all(os.path.isdir(d) for d in busy)
    assert not any(os.path.exists(d) for d in h.groups if d not in busy)  # the idle slot went
    assert (h.root / LOCK).is_file()  # the lock stays: the next sweep finds the owner again
    os.kill(h.child, signal.SIGKILL)
    deadline = time.monotonic() + 10  # its exit leaves the groups (its reaper is not us)
    while h.root.exists() and time.monotonic() < deadline:
        swept = sweep_stale(tmp_path)
        assert swept in ([], [h.root])
        time.sleep(0.05)
    assert not any(os.path.exists(d) for d in h.groups) and not h.root.exists()


def test_only_the_stale_owners_groups_are_removed(tmp_path: Path, holders: list[Holder]) -> None:
    dead, live = _holder(tmp_path, "idle"), _holder(tmp_path, "idle")
    holders += [dead, live]
    unowned = cgroups.create(64, 8)  # named for this process: no sweep removes it
    other = cgroups.create(64, 8, owner=uuid.uuid4().hex)  # an owner with no folder here
    try:
        dead.kill()
        assert sweep_stale(tmp_path) == [dead.root]
        assert not any(os.path.exists(d) for d in dead.groups)
        kept = [*live.groups, *unowned.dirs.values(), *other.dirs.values()]
        assert all(os.path.isdir(d) for d in kept)
        assert live.root.is_dir() and live.root.name.startswith(PREFIX)
    finally:
        unowned.remove()
        other.remove()
