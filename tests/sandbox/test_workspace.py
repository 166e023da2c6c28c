"""Workspaces left by killed processes are removed at the next start; a live one never is.

A process that makes a ``Workspace`` and is then SIGKILLed (a crashed ``deepgym serve``, an eval
the OOM killer ended) leaves its ``deepgym-*`` folder: ``sweep_stale`` removes it, once its lock
is free. Each process here makes its workspace in the test's own folder (``DEEPGYM_TMPDIR``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym.sandbox import workspace
from deepgym.sandbox.workspace import LOCK, PREFIX, Workspace, sweep_stale

REPO = Path(__file__).resolve().parents[2]

_HOLDER = """
import sys, time
from deepgym.sandbox.workspace import Workspace
w = Workspace()
(w.root / "answer.py").write_text("x = 1")
print(w.root, flush=True)
time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A live process holding a workspace under ``tmp_path``; SIGKILLed at the end."""
    env = {**os.environ, "DEEPGYM_TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        root = Path(proc.stdout.readline().strip())
        assert root.parent == tmp_path and root.name.startswith(PREFIX)
        yield proc, root
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_live_processs_workspace_is_kept(holder: tuple[subprocess.Popen[str], Path]) -> None:
    _, root = holder
    assert sweep_stale(root.parent) == []
    assert (root / "answer.py").is_file() and (root / LOCK).is_file()


def test_a_killed_processs_workspace_is_removed(
    holder: tuple[subprocess.Popen[str], Path],
) -> None:
    proc, root = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert root.is_dir()  # SIGKILL: its close never ran
    assert sweep_stale(root.parent) == [root]
    assert not root.exists()


def test_a_new_workspace_sweeps_at_start(
    holder: tuple[subprocess.Popen[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    proc, root = holder
    proc.kill()
    proc.wait(timeout=30)
    monkeypatch.setenv("DEEPGYM_TMPDIR", str(root.parent))
    fresh = Workspace()
    try:
        assert not root.exists()
        assert fresh.root.parent == root.parent and (fresh.root / LOCK).is_file()
        assert sweep_stale(root.parent) == []  # this process's own is live
    finally:
        fresh.close()
    assert not fresh.root.exists()


def test_workspaces_go_to_dev_shm_when_it_has_room_else_the_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deepgym.sandbox.workspace as ws

    monkeypatch.delenv("DEEPGYM_TMPDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    roomy = ws._roomy(ws.SHM, ws.SHM_MIN_FREE)
    assert ws.base_dir() == (ws.SHM if roomy else tmp_path)
    monkeypatch.setattr(ws, "SHM_MIN_FREE", 2**62)  # /dev/shm too small (a container's 64 MiB)
    assert ws.base_dir() == tmp_path
    monkeypatch.setattr(ws, "SHM", tmp_path / "missing")
    assert ws.base_dir() == tmp_path
    monkeypatch.setenv("DEEPGYM_TMPDIR", str(tmp_path / "chosen"))
    assert ws.base_dir() == tmp_path / "chosen"
    assert ws.base_dirs()[0] == tmp_path / "chosen" and tmp_path in ws.base_dirs()


def test_what_is_not_a_locked_workspace_is_left(tmp_path: Path) -> None:
    unlocked = tmp_path / f"{PREFIX}being-made"  # no .lock yet: one being made, or older
    unlocked.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / LOCK).touch()
    link = tmp_path / f"{PREFIX}link"
    link.symlink_to(target)
    a_file = tmp_path / f"{PREFIX}file"
    a_file.write_text("")
    other = tmp_path / "other-dir"
    other.mkdir()
    (other / LOCK).touch()
    assert sweep_stale(tmp_path) == []
    assert unlocked.is_dir() and link.is_symlink() and target.is_dir() and other.is_dir()
    assert a_file.is_file()


def test_the_lock_is_held_for_the_workspaces_life(tmp_path: Path) -> None:
    root = tmp_path / f"{PREFIX}mine"
    root.mkdir()
    fd = workspace._hold_lock(root)
    try:
        assert sorted(p.name for p in root.iterdir()) == [LOCK]  # renamed once held
        assert sweep_stale(tmp_path) == []  # this process holds it
    finally:
        os.close(fd)
    assert sweep_stale(tmp_path) == [root]


def test_deepgym_serve_sweeps_at_start(
    holder: tuple[subprocess.Popen[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from deepgym.server.runner import ThreadedServer
    from tests.server.conftest import fake_app

    proc, root = holder
    proc.kill()
    proc.wait(timeout=30)
    monkeypatch.setattr(tempfile, "tempdir", str(root.parent))
    app, _ = fake_app()
    with ThreadedServer(app, grace_s=0.5):
        assert not root.exists()  # swept before it served its first request


def test_an_environment_reloaded_after_its_verifier_changed_is_staged_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staging key is the environment's identity (``env_key``: its content, the verifier
    file's bytes included), not its verifier's path: a verifier edited and loaded again is the
    one the next run reads, and the same content under another name is staged once."""
    from deepgym.models import Environment

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("DEEPGYM_TMPDIR", str(tmp_path / "tmp"))
    verifier = tmp_path / "verifier.py"
    verifier.write_text("def verify(solution, test_cases):\n    return 1.0\n")

    def load(name: str = "mine") -> Environment:
        return Environment(name=name, entry_point="f", verifier_path=verifier)

    w = Workspace()
    try:
        first = w.env_dir(load())
        verifier.write_text("def verify(solution, test_cases):\n    return 0.5\n")
        edited = w.env_dir(load())
        assert "0.5" in (edited / "verifier.py").read_text()  # not the stale copy
        assert "1.0" in (first / "verifier.py").read_text()
        assert w.env_dir(load("renamed")) == edited  # the same content: staged once
    finally:
        w.close()


def test_staged_environments_are_bounded_but_never_one_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepgym import Environment

    def env(i: int) -> Environment:  # a new environment per stdin, as /run_code makes them
        return Environment(
            name="run_code", kind="script", test_cases=[{"stdin": str(i), "expected_stdout": ""}]
        )

    monkeypatch.setattr(workspace, "MAX_STAGED", 4)
    ws = Workspace()
    try:
        kept = ws.env_dir(env(-1), keep=True)  # an agent session's: never removed
        with ws.hold(env(0)) as held:
            for i in range(1, 12):
                with ws.hold(env(i)):
                    pass
            assert held.is_dir()  # in use by a run the whole time
        staged = [p for p in ws.envs.iterdir() if p.name != "_programs"]
        assert len(staged) <= 4 + 1 and kept.is_dir()
        assert ws.env_dir(env(11)).is_dir()  # the latest stay
    finally:
        ws.close()
