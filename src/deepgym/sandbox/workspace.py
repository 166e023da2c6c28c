"""A backend's private folder: each environment's files staged once, and a folder per run.

The folder is made with mode 0700 (no other user of the host reads a run's answer or test data)
and removed at ``close``. Staged environments are keyed by their content, so runs of one
environment share one copy, which sandboxes mount read-only.

Where: ``DEEPGYM_TMPDIR`` if set; else ``/dev/shm`` where it is a writable folder with at least
``SHM_MIN_FREE`` free (a memory file system: staging an environment, the first touch of every
new problem, costs the same there whatever else writes to the disk; measured in
benchmarks/RESULTS.md); else the temporary folder (``TMPDIR``, ``/tmp``).

A process killed with SIGKILL never reaches ``close``: its folder stays behind. Each folder holds
``.lock``, a file its process holds an exclusive ``flock`` on for as long as it lives (the kernel
drops the lock when the last descriptor closes, however the process ends). A new ``Workspace``
first removes the stale folders (``sweep_stale``): those of this user whose lock it can take.
A live process's folder is never removed (its lock is held), nor a folder that has no ``.lock``
yet (one being made: the lock is taken under another name and renamed to ``.lock`` only once
held), nor anything that is not a plain folder of this user.

The folder's name carries the workspace's ``owner`` token, ``deepgym-<owner>-<random>``, and so
does every cgroup its backend makes (``cgroups.owned_name``). The sweep removes a stale owner's
cgroups first, while it holds the lock, and the folder only once none is left (a group that
still holds a process stays, and so do the folder and its lock, for the next sweep).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterator
from pathlib import Path

from deepgym.identity import env_key
from deepgym.models import Environment
from deepgym.sandbox import cgroups

log = logging.getLogger("deepgym.sandbox")

PREFIX = "deepgym-"
LOCK = ".lock"
SHM = Path("/dev/shm")
SHM_MIN_FREE = 256 * 2**20
"""``/dev/shm`` is used only with this much free (a container's default is 64 MiB)."""
TMPDIR_VAR = "DEEPGYM_TMPDIR"


def _roomy(folder: Path, need: int) -> bool:
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return os.access(folder, os.W_OK | os.X_OK) and st.f_bavail * st.f_frsize >= need


def base_dir() -> Path:
    """The folder workspaces are made in (see the module docstring)."""
    chosen = os.environ.get(TMPDIR_VAR)
    if chosen:
        return Path(chosen)
    if _roomy(SHM, SHM_MIN_FREE):
        return SHM
    return Path(tempfile.gettempdir())


def base_dirs() -> list[Path]:
    """Every folder a workspace of this user may be in (what ``sweep_stale`` looks through)."""
    out: list[Path] = []
    for d in (base_dir(), SHM, Path(tempfile.gettempdir())):
        if d not in out:
            out.append(d)
    return out


MAX_STAGED = 1024
"""The staged environments a workspace keeps that no run holds (``Workspace.hold``)."""


class Workspace:
    """A backend's private temporary folder: ``envs/<key>`` per environment, ``run-*`` per run."""

    def __init__(self) -> None:
        base = base_dir()
        sweep_stale()
        self.owner = uuid.uuid4().hex
        """This workspace's token: in its folder's name and its backend's cgroups' names."""
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{self.owner}-", dir=base))
        os.chmod(self.root, 0o700)
        self._lock_fd: int | None = _hold_lock(self.root)
        self.envs = self.root / "envs"
        """Every staged environment, one folder each (a pool worker mounts it whole)."""
        self.envs.mkdir()
        self._staged: OrderedDict[str, Path] = OrderedDict()
        self._pins: Counter[str] = Counter()
        self._kept: set[str] = set()

    def env_dir(self, env: Environment, *, keep: bool = False) -> Path:
        """The folder holding ``env``'s test data, verifier and repository (staged at first
        use, then reused): what the verifier reads, never the answer. ``keep``: never remove
        it (an agent session's, which its sandbox uses for its whole life); a run holds its
        environment's folder with ``hold`` instead."""
        key = env_key(env)
        cached = self._staged.get(key)
        if cached is not None:
            self._staged.move_to_end(key)
        else:
            cached = self.envs / key
            try:
                self._stage(env, cached)
            except BaseException:  # a full disk, say: a half-staged folder would hold its space
                shutil.rmtree(cached, ignore_errors=True)
                raise
            self._staged[key] = cached
        if keep:
            self._kept.add(key)
        return cached

    @contextlib.contextmanager
    def hold(self, env: Environment) -> Iterator[Path]:
        """``env``'s folder, kept for the block (a run); past ``MAX_STAGED`` folders, the least
        recently used that no run holds are removed once it ends. A service scores a new
        environment with every ``/run_code`` request (its stdin is a test case): staged
        folders must not grow with them."""
        d = self.env_dir(env)
        self._pins[d.name] += 1
        try:
            yield d
        finally:
            self._pins[d.name] -= 1
            if not self._pins[d.name]:
                del self._pins[d.name]
            self._evict()

    def _evict(self) -> None:
        excess = len(self._staged) - MAX_STAGED
        if excess <= 0:  # (most runs: no copy of the keys, which costs a run tens of us)
            return
        for key in list(self._staged):
            if excess <= 0:
                return
            if key in self._pins or key in self._kept:
                continue
            shutil.rmtree(self._staged.pop(key), ignore_errors=True)
            excess -= 1

    @staticmethod
    def _stage(env: Environment, d: Path) -> None:
        """Write ``env``'s files into ``d``."""
        d.mkdir(parents=True, exist_ok=True)
        if env.test_cases is not None:
            (d / "test_cases.json").write_text(json.dumps(env.test_cases))
        if env.verifier_code is not None:
            (d / "verifier.py").write_text(env.verifier_code)
        elif env.verifier_path is not None:
            shutil.copyfile(env.verifier_path, d / "verifier.py")
        if env.repo_path is not None:  # a patch task's repository, read by the verifier only
            shutil.copytree(
                env.repo_path,
                d / "repo",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        if env.checker_path is not None:  # a script task's checker program
            shutil.copyfile(env.checker_path, d / "checker.py")
        if env.step_verifier_code is not None:  # a session's per-step verifier
            (d / "step_verifier.py").write_text(env.step_verifier_code)
        if env.tests_path is not None:  # a session's hidden tests, beside its verifier
            shutil.copytree(env.tests_path, d / "tests", dirs_exist_ok=True)

    def run_dir(self) -> Path:
        """A new, empty folder for one run (the caller removes it when the run ends)."""
        return Path(tempfile.mkdtemp(dir=self.root, prefix="run-"))

    def close(self) -> None:
        """Remove the folder and everything staged in it."""
        shutil.rmtree(self.root, ignore_errors=True)
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)


def _hold_lock(root: Path) -> int:
    """Take ``root``'s lock for as long as this process lives (or until ``close``): made and
    locked under a temporary name, then renamed, so ``.lock`` is never seen unlocked."""
    tmp = root / f"{LOCK}.{os.getpid()}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, root / LOCK)
    except OSError:
        os.close(fd)
        raise
    return fd


def sweep_stale(parent: str | Path | None = None) -> list[Path]:
    """Remove the folders that workspaces of processes now gone left in ``parent`` (by default,
    every folder of ``base_dirs``); the folders removed. Never raises: a folder that cannot be
    checked or removed is left."""
    if parent is None:
        return [p for base in base_dirs() for p in sweep_stale(base)]
    removed: list[Path] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        if _stale(Path(entry.path)):
            removed.append(Path(entry.path))
    if removed:
        log.info("removed %d workspace folder(s) of processes now gone", len(removed))
    return removed


def owner_of(root: Path) -> str | None:
    """The owner token a workspace folder's name carries (None: an older folder, without)."""
    token = root.name[len(PREFIX) :].partition("-")[0]
    return token if _TOKEN.fullmatch(token) else None


_TOKEN = re.compile(r"[0-9a-f]{32}")


def _stale(root: Path) -> bool:
    """Remove ``root`` if its lock can be taken (its process is gone) and its owner's cgroups
    could all be removed first; whether it was."""
    try:
        fd = os.open(root / LOCK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:  # no lock yet (being made), or not ours to open
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its process is alive
            return False
        owner = owner_of(root)
        if owner is not None and not cgroups.remove_owned(owner):
            return False  # a group still holds a process: the lock stays, for the next sweep
        shutil.rmtree(root, ignore_errors=True)
        return not root.exists()
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
