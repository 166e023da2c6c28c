"""Each environment's time limit for one engine, and the machine's store of reference runtimes.

``TimeLimits`` keeps the reference runtimes an engine knows and fetches a missing one once. The
limits themselves are pure decisions (``deepgym.scheduling``): ``fixed_limit`` where no
reference runtime decides (a call's limit, the environment's own, its cap), else
``TimeLimitPolicy.limit``, ``clamp(factor * reference, floor, cap)``. This module holds the facts
those decisions need and does the I/O to get them: the machine's store of runtimes
(``LimitStore``) and the engine's measurement of the reference.

Measuring the reference costs a run or two before an environment's first answer may start.
``LimitStore`` keeps the reference runtime in ``$DEEPGYM_HOME/limits.sqlite`` (SQLite, WAL: safe
for concurrent processes), so a new process, a ``deepgym`` command or another worker on the
machine reads it instead of measuring again.

Invariants of ``TimeLimits``:

- Keyed by ``env_key``, the one identity of an environment (a digest of its content, the same in
  every process): runtimes learned from another process (a Ray driver and its actors) land on the
  same entries, and a run's lookup costs no hashing of the environment.
- What is kept is the reference's runtime (ms), or None where the reference did not pass (no
  trustworthy runtime: the limit is the cap); the limit is computed from it at each lookup, so
  every holder of the same runtime and policy chooses the same limit.
- Single flight: concurrent first runs of one environment wait on one fetch (store, else a
  measurement); a caller's cancellation does not stop it; a fetch that raised is not kept, so
  the next caller tries again.
- The store is read at most once per environment before a fetch (a miss is remembered), and
  written only with a trustworthy measurement; a policy with ``persist=False`` never opens it.

Invariants of ``LimitStore``:

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

import asyncio
import functools
import hashlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from deepgym.exceptions import ConfigError
from deepgym.home import deepgym_home
from deepgym.identity import env_key, feed_content
from deepgym.models import Environment
from deepgym.scheduling import TimeLimitPolicy, fixed_limit

__all__ = [
    "LimitStore",
    "Measure",
    "TimeLimits",
    "content_key",
    "default_limits_path",
    "machine_id",
]

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


Measure = Callable[[Environment], Awaitable[float | None]]
"""The reference's runtime on this engine, in ms (None: it did not pass: no trustworthy runtime)."""


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


class TimeLimits:
    """The time limits of one engine's runs, under ``policy``.

    ``measure``: how the engine runs the reference (a Ray driver asks a node). ``sandbox``: the
    backend's name, part of the store's key. ``persist``: whether to use the machine's store
    (None: as ``policy.persist`` says; a Ray driver's runtimes live on its nodes' stores).
    """

    def __init__(
        self,
        policy: TimeLimitPolicy,
        measure: Measure,
        *,
        sandbox: str,
        persist: bool | None = None,
    ) -> None:
        self.policy = policy
        self.sandbox = sandbox
        self._measure = measure
        self._persist = policy.persist if persist is None else persist
        self._runtimes: dict[str, float | None] = {}
        self._unstored: set[str] = set()
        self._measuring: dict[str, asyncio.Task[float | None]] = {}
        self._store: LimitStore | None = None

    def now(self, env: Environment, time_limit: float | None = None) -> float | None:
        """The run's limit where it is known without running anything (``fixed_limit``, or a
        runtime known here or in the machine's store); None while it is still to be measured."""
        fixed = fixed_limit(self.policy, env, time_limit)
        if fixed is not None:
            return fixed
        key = env_key(env)
        if key not in self._runtimes:
            if key in self._unstored:
                return None
            stored = self._read(env)
            if stored is None:
                self._unstored.add(key)  # looked up once: measured here when needed
                return None
            self._runtimes[key] = stored
        return self.policy.limit(_seconds(self._runtimes[key]), env.timeout)

    async def limit(self, env: Environment, time_limit: float | None = None) -> float:
        """The run's limit: known now, or derived from the reference (measured once)."""
        known = self.now(env, time_limit)
        return known if known is not None else await self.derive(env)

    async def derive(self, env: Environment) -> float:
        """``env``'s derived limit (its reference fetched once, ``runtime``)."""
        return self.policy.limit(_seconds(await self.runtime(env)), env.timeout)

    async def runtime(self, env: Environment) -> float | None:
        """The reference's runtime (ms; None: no trustworthy one), fetched once however many
        callers ask meanwhile (one that is cancelled does not stop it)."""
        key = env_key(env)
        if key in self._runtimes:
            return self._runtimes[key]
        task = self._measuring.get(key)
        if task is None:
            task = asyncio.ensure_future(self._fetch(env))
            self._measuring[key] = task

            def keep(t: asyncio.Task[float | None]) -> None:
                self._measuring.pop(key, None)
                if not t.cancelled() and t.exception() is None:  # a failure: the next one retries
                    self._runtimes[key] = t.result()

            task.add_done_callback(keep)
        return await asyncio.shield(task)

    def known(self, envs: Mapping[str, Environment]) -> dict[str, float | None]:
        """The runtimes known here of ``envs``, under the caller's names for them (a Ray
        driver's keys, which differ from a node's where the node moved the files)."""
        out = {}
        for name, env in envs.items():
            key = env_key(env)
            if key in self._runtimes:
                out[name] = self._runtimes[key]
        return out

    def learn(self, envs: Mapping[str, Environment], runtimes: Mapping[str, float | None]) -> None:
        """Take the runtimes of ``envs`` measured elsewhere (``known`` of another holder)."""
        for name, env in envs.items():
            if name in runtimes:
                self._runtimes[env_key(env)] = runtimes[name]

    def _opened(self) -> LimitStore | None:
        if not self._persist:
            return None
        if self._store is None:
            self._store = LimitStore()
        return self._store

    def _read(self, env: Environment) -> float | None:
        store = self._opened()
        return store.get(content_key(env, self.sandbox)) if store is not None else None

    async def _fetch(self, env: Environment) -> float | None:
        """The stored runtime of this content on this kind of machine, else one measured here
        (then stored, if the reference passed)."""
        store = self._opened()
        key = content_key(env, self.sandbox) if store is not None else ""
        stored = store.get(key) if store is not None else None
        if stored is not None:
            return stored
        ms = await self._measure(env)
        if ms is not None and store is not None:
            store.put(key, env.name, ms)
        return ms

    async def close(self) -> None:
        """Stop the measurements under way and close the store."""
        measuring = list(self._measuring.values())
        for task in measuring:
            task.cancel()
        await asyncio.gather(*measuring, return_exceptions=True)
        if self._store is not None:
            store, self._store = self._store, None
            store.close()
