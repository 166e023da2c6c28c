"""Derived time limits that persist: measured once per machine, shared by every client on it.

A derived limit is ``clamp(factor * reference runtime, floor, cap)``; measuring the reference
costs a run or two before an environment's first answer may start. ``LimitStore`` keeps the
reference runtime in ``$DEEPGYM_HOME/limits.sqlite`` (SQLite, WAL: safe for concurrent
processes), so a new process, a ``deepgym`` command or another worker on the machine reads it
instead of measuring again.

Invariants:

- The key (``content_key``) is the environment's content (``deepgym.identity``: everything that
  decides how the reference runs, the verifier file's and repository's bytes included, never its
  name) under the sandbox backend: a changed reference or environment gets a new entry.
- The machine is part of the key (``machine_id``: its CPU model and core count): a runtime
  measured on a fast machine is never applied on a slow one that shares the same home folder
  (a network home, a container image); that machine measures its own.
- Only a trustworthy measurement is stored (the reference passed); the limit itself is never
  stored, so a different ``TimeLimitPolicy`` reads the same runtime.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import threading
import time
import weakref
from pathlib import Path

from deepgym.exceptions import ConfigError
from deepgym.home import deepgym_home
from deepgym.identity import feed_content
from deepgym.models import Environment

__all__ = ["LimitStore", "content_key", "default_limits_path", "machine_id"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runtimes (
    key TEXT PRIMARY KEY,
    env_name TEXT NOT NULL,
    reference_ms REAL NOT NULL,
    machine TEXT NOT NULL,
    measured REAL NOT NULL
);
"""


def default_limits_path() -> Path:
    """``$DEEPGYM_HOME/limits.sqlite`` (``~/.deepgym`` when unset)."""
    return deepgym_home() / "limits.sqlite"


@functools.cache
def machine_id() -> str:
    """This machine's speed class: its CPU model and core count (``/proc/cpuinfo``)."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    return f"{model} x{os.cpu_count() or 0}"


def content_key(env: Environment, backend: str, machine: str | None = None) -> str:
    """The store's key: ``env``'s content (``feed_content``, as ``env_key``) on ``backend`` on
    ``machine`` (this one by default). Read afresh on every call: a verifier file changed since
    the last call gets a new key."""
    h = hashlib.sha256(f"{backend}\0{machine if machine is not None else machine_id()}\0".encode())
    feed_content(h, env)
    return h.hexdigest()


class LimitStore:
    """Reference runtimes by content key, in one SQLite file shared by the machine's clients."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_limits_path()
        db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                self.path, timeout=10.0, check_same_thread=False, isolation_level=None
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            if db is not None:  # not left open for the collector to find
                db.close()
            raise ConfigError(f"limit store {self.path}: cannot open ({exc})") from exc
        self._db = db
        self._lock = threading.Lock()
        # A client dropped without close() closes the file here, not in the collector (which
        # Python 3.13 reports as an unclosed database).
        self._finalizer = weakref.finalize(self, db.close)

    def get(self, key: str) -> float | None:
        """The stored reference runtime (ms) for ``key``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT reference_ms FROM runtimes WHERE key = ?", (key,)
            ).fetchone()
        return float(row[0]) if row else None

    def put(self, key: str, env_name: str, reference_ms: float) -> None:
        """Store a measured runtime (the last writer wins: every writer measured the same
        content on the same kind of machine)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO runtimes (key, env_name, reference_ms, machine, measured) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, env_name, reference_ms, machine_id(), time.time()),
            )

    def count(self) -> int:
        """How many runtimes are stored."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM runtimes").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
