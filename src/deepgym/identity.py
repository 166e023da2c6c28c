"""An environment's identity: one digest of its content, the same in every process.

``env_key`` is the key of whatever is kept per environment: its derived time limit (in an engine,
and between a Ray driver and its actors), its staged files in a sandbox's workspace, a session's
standby sandbox. ``deepgym.time_limits.content_key`` (the machine's store of reference runtimes) is
the same content under a sandbox backend and a machine.

Invariants:

- The content is every field that decides how the environment runs (never its name, task,
  description, tags, seed or the folder it was loaded from) and the bytes of its verifier file,
  repository and hidden tests (``feed_content``, the one definition): two environments with the
  same content share what is kept for them, a changed one gets new entries.
- A sha256 digest, never Python's ``hash()`` (salted per process): a key computed in one process
  names the same environment in every other one.
- Computed once per ``Environment`` object (they are frozen), so a run's hot path only looks it
  up; a small verifier file shared by thousands of environments is read once per process.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
import weakref
from pathlib import Path
from typing import Any

from deepgym.models import Environment

__all__ = ["env_key", "feed_content"]

_FILE_BYTES: dict[tuple[str, int, int], bytes] = {}
"""Small files' bytes by (path, size, mtime): a verifier file that thousands of environments
share (HumanEval's) is read once per process, not once per environment. A file changed in the
last ``_SETTLED_NS`` is read every time: a file system's clock is coarse (a few ms), so two
writes of the same size in one tick would leave the same (size, mtime)."""
_FILE_BYTES_MAX = 256
_SMALL_FILE = 2**20
_SETTLED_NS = 2_000_000_000


def _file_digest(h: Any, path: Path) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        key = (str(path), st.st_size, st.st_mtime_ns)
        data = _FILE_BYTES.get(key)
        if data is None:
            data = path.read_bytes()
            if len(data) <= _SMALL_FILE and time.time_ns() - st.st_mtime_ns > _SETTLED_NS:
                if len(_FILE_BYTES) >= _FILE_BYTES_MAX:
                    _FILE_BYTES.clear()
                _FILE_BYTES[key] = data
        h.update(data)
    elif stat.S_ISDIR(st.st_mode):
        for p in sorted(path.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(path)).encode() + b"\0" + p.read_bytes())


_NOT_CONTENT = {"name", "task", "description", "difficulty", "tags", "seed", "source_dir"}
"""The fields that describe an environment or say where it came from, not how it runs."""


def feed_content(h: Any, env: Environment) -> None:
    """Feed ``h`` what decides how ``env`` runs: its fields but ``_NOT_CONTENT``, and the bytes
    of its verifier file, repository and tests (the one definition of an environment's content)."""
    h.update(env.model_dump_json(exclude=_NOT_CONTENT).encode())
    for path in (env.verifier_path, env.repo_path, env.tests_path, env.checker_path):
        if path is not None:
            _file_digest(h, path if isinstance(path, Path) else Path(path))


_KEYS: dict[int, str] = {}
"""``env_key`` by ``id(env)``, dropped when the object is (``weakref.finalize``)."""


def env_key(env: Environment) -> str:
    """``env``'s identity: a digest of its content (``feed_content``), the same in every process.

    The key of whatever is kept per environment: its derived time limit (in an engine, and on the
    wire between a Ray driver and its actors), its staged files, a session's standby sandbox.
    Computed once per object: an ``Environment`` is frozen, and a run's hot path only looks it up.
    """
    key = _KEYS.get(id(env))
    if key is None:
        h = hashlib.sha256()
        feed_content(h, env)
        key = h.hexdigest()
        if id(env) not in _KEYS:
            weakref.finalize(env, _KEYS.pop, id(env), None)
        _KEYS[id(env)] = key
    return key
