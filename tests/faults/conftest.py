"""What "nothing left behind" means after a fault, measured: ``Leftovers``.

Taken before the fault and checked after it (allowing ``SETTLE_S`` for the kernel to reap and
for a pool to remove what its dead workers held): no new process in this pid namespace (zombies
aside: a dead process waiting for its reaper holds nothing), no open descriptor more in this
process, none of the cgroups made meanwhile (every pool slot and run group this process creates
is recorded as it is made), and no ``deepgym-*`` folder in the test's own temporary folder
(``TMPDIR`` and ``DEEPGYM_TMPDIR`` point there, so no other program's folders count). Run these
tests in a pid namespace of their own (``tests/sandbox/conftest.py`` says how).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from deepgym.sandbox import cgroups
from tests.sandbox.conftest import describe, pids, suspects

SETTLE_S = 5.0
"""How long a check waits for the last exits and removals."""


def zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return True  # gone
    return raw[raw.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


def open_fds() -> dict[int, str]:
    """This process's open descriptors and what each one is."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, closed since
            continue
    return out


def held_cgroups(pid: int) -> set[str]:
    """The cgroups whose control files ``pid`` holds open: a pool's worker slots (found by
    descriptor, not by name: names carry a pid, and pids repeat across pid namespaces)."""
    out: set[str] = set()
    root = cgroups.V1_ROOT + "/"
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith(root) and "/deepgym/" in target:
            out.add(os.path.dirname(target))
    return out


def workspaces(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("deepgym-*") if p.is_dir())


@dataclass
class Leftovers:
    """The host before a fault; ``check`` asserts nothing new is left after it."""

    tmp: Path
    pids: set[int]
    fds: dict[int, str]
    cgroups: list[str] = field(default_factory=list)
    """Every cgroup this process made since the snapshot (slots and run groups)."""

    def state(self) -> tuple[list[int], dict[int, str], list[str], list[Path]]:
        cgroups.retry_pending(final=False)
        procs = sorted(p for p in suspects(pids() - self.pids - {os.getpid()}) if not zombie(p))
        fds = {fd: what for fd, what in open_fds().items() if self.fds.get(fd) != what}
        groups = [d for d in self.cgroups if os.path.exists(d)]
        return procs, fds, groups, workspaces(self.tmp)

    def check(self, also_cgroups: tuple[str, ...] = ()) -> None:
        """Nothing new after ``SETTLE_S``: processes, descriptors, cgroups (``also_cgroups``:
        ones another process made), workspace folders."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            procs, fds, groups, folders = self.state()
            groups += [d for d in also_cgroups if os.path.exists(d)]
            if not (procs or fds or groups or folders) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert not procs, f"processes left behind: {[describe(p) for p in procs]}"
        assert not fds, f"descriptors left open: {fds}"
        assert not groups, f"cgroups left behind: {groups}"
        assert not folders, f"workspace folders left behind: {folders}"


@pytest.fixture
def leftovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Leftovers]:
    """A private temporary folder for the test's workspaces, and the host's snapshot (checked
    at teardown too, for a test that ends early)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("DEEPGYM_TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    guard = Leftovers(tmp=tmp, pids=pids(), fds=open_fds())
    slot_init = cgroups.Slot.__init__
    create = cgroups.create

    def spy_slot(self: cgroups.Slot, name: str) -> None:
        slot_init(self, name)
        guard.cgroups.extend(self.dirs.values())

    def spy_create(*args: Any, **kwargs: Any) -> cgroups.RunCgroup:
        group = create(*args, **kwargs)
        guard.cgroups.extend(group.dirs.values())
        return group

    monkeypatch.setattr(cgroups.Slot, "__init__", spy_slot)
    monkeypatch.setattr(cgroups, "create", spy_create)
    yield guard
    guard.check()
