"""The run store: every eval and batch, its inputs and its results, in one SQLite file (WAL).

Invariants:

- A result is committed the moment it arrives, in its own transaction, so a process killed
  mid-eval loses only the runs that were in flight. ``record_eval`` on a stored run scores the
  indices that have no result yet and scores again those stored without a verdict (a failure
  of ours by the contract, such as the runs a service took with it when it died); a stored
  verdict is kept. Its totals match an uninterrupted run's.
- An index has at most one result (the primary key): a resumed run never counts a run twice. A
  result without a verdict is replaced in place (``replace_no_verdict``); a verdict never is.
- Totals are never stored: they are recomputed from the stored results with ``Totals.of``, the
  contract's one definition (a run without a verdict is a failed 0 in the headline numbers).
- A result's ``run_ms`` is its service time, ``ServiceTime.run_ms``: the run itself, without the
  time it waited for a sandbox.
- An agent episode's trace (``episodes``, ``episode_steps``) is written step by step as the
  episode goes, then finished with the work dir's diff and the verifier's result.
- A QA report (``qa_reports``: what ``deepgym qa`` / ``check`` printed as JSON, one entry per
  environment) is checked (``deepgym.envs.qa.report``) before it is kept, and kept whole, as
  given; its summary columns are computed from it once, when it is saved, and never change.

The default file is ``$DEEPGYM_HOME/runs.sqlite`` (``~/.deepgym`` when unset). One connection per
``RunStore``, shared between threads under a lock; other processes may read and write the same file
(SQLite's WAL lets readers go on while one writes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from deepgym.envs.qa.report import (
    QaReport,
    QaSummary,
    summarize,
    validate_entries,
    validate_meta,
)
from deepgym.exceptions import ConfigError
from deepgym.home import deepgym_home
from deepgym.models import BatchResult, Environment, EvalResult, RunResult, Totals

if TYPE_CHECKING:
    from deepgym.client import DeepGym
    from deepgym.types import ProgressFn

__all__ = [
    "RunInfo",
    "RunStore",
    "default_store_path",
    "owner_alive",
    "process_owner",
    "record_batch",
    "record_eval",
    "resume_inputs",
    "save_qa",
]

RunKind = Literal["eval", "batch"]
RunStatus = Literal["running", "complete", "cancelled", "stopped"]
"""``running`` (its process is at it), ``complete``, ``cancelled`` (the service shut down before
it finished) or ``stopped`` (interrupted, or its process is gone: ``--resume`` finishes an
eval)."""

SCHEMA_VERSION = 6
"""2: ``runs.owner``, the process recording the run (a run whose owner is gone is stopped).
3: ``results.run_ms`` (``ServiceTime.run_ms``, no wait for a sandbox) replaces ``service_ms``
(which included the wait); an older store's rows are recomputed from their results.
4: ``episodes`` and ``episode_steps``: agent episodes' traces.
5: ``qa_reports``: the reports of ``deepgym qa`` and ``check``.
6: ``samples``: the text a model generated for an index of a model eval
(``deepgym.eval.evaluate``)."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    created REAL NOT NULL,
    finished REAL,
    status TEXT NOT NULL,
    total INTEGER NOT NULL,
    params TEXT NOT NULL,
    execution_time_ms REAL,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS items (
    run_id TEXT NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    env_name TEXT NOT NULL,
    answer TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    env_name TEXT NOT NULL,
    has_verdict INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    score REAL NOT NULL,
    error_type TEXT,
    run_ms REAL NOT NULL,
    recorded REAL NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE INDEX IF NOT EXISTS results_env ON results (env_name);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS episodes (
    id TEXT PRIMARY KEY,
    env_name TEXT NOT NULL,
    sandbox_id TEXT,
    created REAL NOT NULL,
    finished REAL,
    result TEXT,
    diff TEXT
);
CREATE TABLE IF NOT EXISTS episode_steps (
    episode TEXT NOT NULL REFERENCES episodes(id),
    idx INTEGER NOT NULL,
    step TEXT NOT NULL,
    PRIMARY KEY (episode, idx)
);
CREATE TABLE IF NOT EXISTS qa_reports (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    meta TEXT NOT NULL,
    environments INTEGER NOT NULL,
    passed INTEGER NOT NULL,
    scored INTEGER NOT NULL,
    mean_score REAL,
    min_score REAL,
    entries TEXT NOT NULL
);
"""
_RUN_MS_FROM_RESULT = """
UPDATE results SET run_ms = MAX(
    COALESCE(json_extract(result, '$.service.total_ms'), 0)
    - COALESCE(json_extract(result, '$.service.queue_ms'), 0),
    0
)
"""


def _start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(b")", 1)[1].split()[19].decode()


def process_owner(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (this one by default): a pid reused later differs."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or '?'}"


def owner_alive(owner: str | None) -> bool:
    """Whether the process ``process_owner`` named is still running; True where this host
    cannot tell (another host's, or no owner recorded)."""
    if not owner:
        return True
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return _start_ticks(int(pid)) == start


def default_store_path() -> Path:
    """``$DEEPGYM_HOME/runs.sqlite``, with ``~/.deepgym`` as the home when unset."""
    return deepgym_home() / "runs.sqlite"


@dataclass(frozen=True)
class RunInfo:
    """One stored run: what it was, how far it got, and its totals so far."""

    id: str
    kind: str
    source: str
    created: float
    finished: float | None
    status: str
    total: int
    recorded: int
    params: dict[str, Any] = field(default_factory=dict)
    execution_time_ms: float | None = None
    totals: Totals = field(default_factory=Totals)

    @property
    def complete(self) -> bool:
        """Every run recorded and the run marked complete."""
        return self.status == "complete" and self.recorded == self.total


class RunStore:
    """A SQLite run store; ``path`` is created with its folder if missing."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, timeout=10.0, check_same_thread=False, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"store {self.path}: cannot open ({exc})") from exc
        self._lock = threading.Lock()
        try:
            with self._lock:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
                version = self._db.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise ConfigError(
                        f"store {self.path}: schema {version} is newer than this deepgym's "
                        f"({SCHEMA_VERSION})"
                    )
                self._db.executescript(_SCHEMA)
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(runs)")}
                if "owner" not in columns:  # a version 1 store
                    self._db.execute("ALTER TABLE runs ADD COLUMN owner TEXT")
                self._migrate_run_ms()
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise ConfigError(f"store {self.path}: not a deepgym run store ({exc})") from exc
        except BaseException:  # a newer schema, say: the connection is not left open
            self._db.close()
            raise

    def _migrate_run_ms(self) -> None:
        """A version 1 or 2 store kept ``service_ms``, the wait for a sandbox included: rename it
        and recompute each row from its stored result, in one transaction."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
        if "service_ms" not in columns:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
            if "service_ms" in columns:  # again: another process may have migrated it
                self._db.execute("ALTER TABLE results RENAME COLUMN service_ms TO run_ms")
                self._db.execute(_RUN_MS_FROM_RESULT)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    # -- writing --------------------------------------------------------------------------
    def create_run(
        self,
        kind: RunKind,
        source: str,
        env_names: Sequence[str],
        answers: Sequence[str],
        params: dict[str, Any] | None = None,
    ) -> str:
        """Store a run's inputs (one environment name and answer per index); returns its id."""
        if len(env_names) != len(answers):
            raise ConfigError(f"{len(env_names)} environment names for {len(answers)} answers")
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO runs (id, kind, source, created, status, total, params, owner) "
                    "VALUES (?, ?, ?, ?, 'running', ?, ?, ?)",
                    (
                        run_id,
                        kind,
                        source,
                        time.time(),
                        len(answers),
                        json.dumps(params or {}),
                        process_owner(),
                    ),
                )
                self._db.executemany(
                    "INSERT INTO items (run_id, idx, env_name, answer) VALUES (?, ?, ?, ?)",
                    [
                        (run_id, i, n, a)
                        for i, (n, a) in enumerate(zip(env_names, answers, strict=True))
                    ],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return run_id

    def record(self, run_id: str, index: int, result: RunResult) -> None:
        """Commit one result. A second result for the same index is refused."""
        columns = ", ".join(_RESULT_COLUMNS)
        with self._lock:
            try:
                self._db.execute(
                    f"INSERT INTO results (run_id, idx, {columns}) "
                    f"VALUES (?, ?, {', '.join('?' * len(_RESULT_COLUMNS))})",
                    (run_id, index, *_result_row(result)),
                )
            except sqlite3.IntegrityError as exc:
                raise ConfigError(
                    f"run {run_id}: index {index} already has a result, or no such run"
                ) from exc

    def record_sample(self, run_id: str, index: int, text: str, answer: str) -> None:
        """Commit the text a model generated for ``index`` of a model eval, and the answer
        extracted from it as the index's input (``runs ID`` shows it). Kept once: a resumed
        eval never asks the model again for it."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR IGNORE INTO samples (run_id, idx, text) VALUES (?, ?, ?)",
                    (run_id, index, text),
                )
                self._db.execute(
                    "UPDATE items SET answer = ? WHERE run_id = ? AND idx = ?",
                    (answer, run_id, index),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def samples(self, run_id: str) -> dict[int, str]:
        """The generated text of each index of a model eval that has one."""
        rows = self._query("SELECT idx, text FROM samples WHERE run_id = ?", (run_id,))
        return {int(i): str(t) for i, t in rows}

    def replace_no_verdict(self, run_id: str, index: int, result: RunResult) -> None:
        """Replace the stored result of ``index``, one without a verdict, with a new one (a
        resumed eval's second try); a stored verdict is never replaced (``ConfigError``)."""
        columns = ", ".join(f"{c} = ?" for c in _RESULT_COLUMNS)
        with self._lock:
            cur = self._db.execute(
                f"UPDATE results SET {columns} WHERE run_id = ? AND idx = ? AND has_verdict = 0",
                (*_result_row(result), run_id, index),
            )
        if cur.rowcount != 1:
            raise ConfigError(f"run {run_id}: index {index} has a verdict, or no result to replace")

    def claim(self, run_id: str) -> None:
        """Mark a stored run as running again, in this process (a resumed eval)."""
        with self._lock:
            self._db.execute(
                "UPDATE runs SET status = 'running', finished = NULL, owner = ? WHERE id = ?",
                (process_owner(), run_id),
            )

    def finish(
        self, run_id: str, status: RunStatus = "complete", execution_time_ms: float | None = None
    ) -> None:
        """Mark a run ended (``complete``, or how it stopped), with the wall time of this call:
        a resumed run's is added to what its earlier calls took."""
        with self._lock:
            self._db.execute(
                "UPDATE runs SET status = ?, finished = ?, execution_time_ms = "
                "CASE WHEN ? IS NULL THEN execution_time_ms "
                "ELSE COALESCE(execution_time_ms, 0) + ? END WHERE id = ?",
                (status, time.time(), execution_time_ms, execution_time_ms, run_id),
            )

    # -- reading --------------------------------------------------------------------------
    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def _info(self, row: tuple[Any, ...]) -> RunInfo:
        run_id = row[0]
        verdicts = self._query(
            "SELECT has_verdict, passed, score FROM results WHERE run_id = ? ORDER BY idx",
            (run_id,),
        )
        status = row[5]
        if status == "running" and not owner_alive(row[9]):  # its process is gone
            status = "stopped"
        return RunInfo(
            id=run_id,
            kind=row[1],
            source=row[2],
            created=row[3],
            finished=row[4],
            status=status,
            total=row[6],
            params=json.loads(row[7]),
            execution_time_ms=row[8],
            recorded=len(verdicts),
            totals=_totals(verdicts),
        )

    _COLUMNS = (
        "id, kind, source, created, finished, status, total, params, execution_time_ms, owner"
    )

    def runs(self, limit: int = 100) -> list[RunInfo]:
        """The latest runs first."""
        rows = self._query(
            f"SELECT {self._COLUMNS} FROM runs ORDER BY created DESC, id DESC LIMIT ?", (limit,)
        )
        return [self._info(r) for r in rows]

    def run(self, run_id: str) -> RunInfo:
        """The stored run ``run_id``; ``ConfigError`` if there is none."""
        rows = self._query(f"SELECT {self._COLUMNS} FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise ConfigError(f"no run {run_id!r} in the store {self.path}")
        return self._info(rows[0])

    def inputs(self, run_id: str) -> list[tuple[str, str]]:
        """``(environment name, answer)`` per index."""
        rows = self._query(
            "SELECT env_name, answer FROM items WHERE run_id = ? ORDER BY idx", (run_id,)
        )
        return [(r[0], r[1]) for r in rows]

    def results(self, run_id: str) -> dict[int, RunResult]:
        """The stored results by index (the missing ones were never recorded)."""
        rows = self._query("SELECT idx, result FROM results WHERE run_id = ?", (run_id,))
        return {r[0]: RunResult.model_validate_json(r[1]) for r in rows}

    def run_times(self, run_id: str | None = None, limit: int = 100_000) -> dict[str, list[float]]:
        """Service times (``ServiceTime.run_ms``: no wait for a sandbox) in ms by environment:
        one run's, or the latest ``limit`` of all runs."""
        if run_id is None:
            rows = self._query(
                "SELECT env_name, run_ms FROM results ORDER BY recorded DESC LIMIT ?", (limit,)
            )
        else:
            rows = self._query("SELECT env_name, run_ms FROM results WHERE run_id = ?", (run_id,))
        out: dict[str, list[float]] = {}
        for name, ms in rows:
            out.setdefault(name, []).append(float(ms))
        return dict(sorted(out.items()))

    # -- agent episodes -------------------------------------------------------------------
    def start_episode(self, env_name: str, sandbox_id: str | None) -> str:
        """A new episode's trace; returns its id. Steps are recorded as they happen."""
        episode_id = "ep-" + time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        with self._lock:
            self._db.execute(
                "INSERT INTO episodes (id, env_name, sandbox_id, created) VALUES (?, ?, ?, ?)",
                (episode_id, env_name, sandbox_id, time.time()),
            )
        return episode_id

    def record_step(self, episode_id: str, index: int, step: dict[str, Any]) -> None:
        """One step of an episode (its action, output, exit code, duration, ``timed_out``)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO episode_steps (episode, idx, step) VALUES (?, ?, ?)",
                (episode_id, index, json.dumps(step)),
            )

    def finish_episode(self, episode_id: str, result: RunResult, diff: str) -> None:
        """An episode's end: the verifier's result and the work dir's diff."""
        with self._lock:
            self._db.execute(
                "UPDATE episodes SET finished = ?, result = ?, diff = ? WHERE id = ?",
                (time.time(), result.model_dump_json(), diff, episode_id),
            )

    def episodes(self, limit: int = 100) -> list[dict[str, Any]]:
        """The latest episodes, newest first: id, environment, sandbox, when, steps, score."""
        rows = self._query(
            "SELECT e.id, e.env_name, e.sandbox_id, e.created, e.finished, e.result, "
            "(SELECT COUNT(*) FROM episode_steps s WHERE s.episode = e.id) "
            "FROM episodes e ORDER BY e.created DESC, e.id DESC LIMIT ?",
            (limit,),
        )
        out = []
        for eid, env_name, sandbox_id, created, finished, result, steps in rows:
            r = RunResult.model_validate_json(result) if result else None
            out.append(
                {
                    "id": eid,
                    "env_name": env_name,
                    "sandbox_id": sandbox_id,
                    "created": created,
                    "finished": finished,
                    "steps": steps,
                    "has_verdict": r.has_verdict if r else None,
                    "score": r.score if r else None,
                    "error_type": r.error_type if r else None,
                }
            )
        return out

    def episode(self, episode_id: str) -> dict[str, Any]:
        """One episode as one JSON trajectory: its steps, the work dir's diff, the result."""
        rows = self._query(
            "SELECT env_name, sandbox_id, created, finished, result, diff FROM episodes "
            "WHERE id = ?",
            (episode_id,),
        )
        if not rows:
            raise ConfigError(f"store {self.path}: no episode {episode_id!r}")
        env_name, sandbox_id, created, finished, result, diff = rows[0]
        steps = self._query(
            "SELECT step FROM episode_steps WHERE episode = ? ORDER BY idx", (episode_id,)
        )
        return {
            "id": episode_id,
            "env_name": env_name,
            "sandbox_id": sandbox_id,
            "created": created,
            "finished": finished,
            "steps": [json.loads(s) for (s,) in steps],
            "diff": diff or "",
            "result": json.loads(result) if result else None,
        }

    # -- QA reports -----------------------------------------------------------------------
    def save_qa_report(self, entries: Any, meta: Any = None) -> str:
        """Keep a QA report (``deepgym qa --json``'s entries, checked first: ``ConfigError``
        names a bad field) with its ``meta`` (the command, its options); returns its id."""
        checked = validate_entries(entries)
        info = validate_meta({} if meta is None else meta)
        summary = summarize(checked)
        try:
            document = json.dumps(entries, allow_nan=False)
        except (TypeError, ValueError) as exc:  # a field of its own that JSON cannot hold
            raise ConfigError(f"QA report: entries: not plain JSON ({exc})") from exc
        report_id = "qa-" + time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        with self._lock:
            self._db.execute(
                "INSERT INTO qa_reports (id, created, meta, environments, passed, scored, "
                "mean_score, min_score, entries) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    report_id,
                    time.time(),
                    json.dumps(info),
                    summary.environments,
                    summary.passed,
                    summary.scored,
                    summary.mean_score,
                    summary.min_score,
                    document,
                ),
            )
        return report_id

    _QA_COLUMNS = "id, created, meta, environments, passed, scored, mean_score, min_score"

    @staticmethod
    def _qa_info(row: tuple[Any, ...]) -> QaReport:
        return QaReport(
            id=row[0],
            created=row[1],
            meta=json.loads(row[2]),
            summary=QaSummary(*row[3:8]),
        )

    def qa_reports(self, limit: int = 100) -> list[QaReport]:
        """The latest QA reports first, each with its summary and without its entries."""
        rows = self._query(
            f"SELECT {self._QA_COLUMNS} FROM qa_reports ORDER BY created DESC, id DESC LIMIT ?",
            (limit,),
        )
        return [self._qa_info(r) for r in rows]

    def qa_report(self, report_id: str) -> QaReport:
        """The kept QA report ``report_id`` with its entries; ``ConfigError`` if there is none."""
        rows = self._query(
            f"SELECT {self._QA_COLUMNS}, entries FROM qa_reports WHERE id = ?", (report_id,)
        )
        if not rows:
            raise ConfigError(f"store {self.path}: no QA report {report_id!r}")
        info = self._qa_info(rows[0])
        return dataclasses.replace(info, entries=validate_entries(json.loads(rows[0][8])))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def save_qa(entries: Any, meta: Any = None, *, path: str | Path | None = None) -> str:
    """Keep a QA report in the run store at ``path`` (the default one when ``None``) and
    return its id: what ``deepgym qa`` and ``check`` call, so the console shows the last QA."""
    with RunStore(path) as store:
        return store.save_qa_report(entries, meta)


def _totals(rows: Sequence[tuple[int, int, float]]) -> Totals:
    """``Totals`` over stored ``(has_verdict, passed, score)`` rows, in index order."""
    return Totals.from_rows([(bool(v), bool(p), float(sc)) for v, p, sc in rows])


# ---------------------------------------------------------------------------------------------
# Recording an eval as it runs, and resuming one
# ---------------------------------------------------------------------------------------------


def resume_inputs(
    store: RunStore, run_id: str, load: Callable[[str], list[Environment]]
) -> tuple[list[Environment], list[str]]:
    """A stored eval's environments (loaded again from its source) and answers, checked."""
    info = store.run(run_id)
    if info.kind != "eval":
        raise ConfigError(f"run {run_id} is a {info.kind}, not an eval")
    if info.complete and info.totals.no_verdict_count == 0:
        raise ConfigError(f"run {run_id} is complete, every run with a verdict: nothing to resume")
    items = store.inputs(run_id)
    envs = load(info.source)
    if [e.name for e in envs] != [name for name, _ in items]:
        raise ConfigError(
            f"run {run_id}: {info.source!r} no longer names the environments it ran "
            f"({len(items)} stored, {len(envs)} now)"
        )
    return envs, [answer for _, answer in items]


@contextlib.contextmanager
def _stopped_unless_done(store: RunStore, run_id: str, t0: float) -> Iterator[None]:
    """Mark the run ``stopped`` if the block ends early (Ctrl-C, a signal, an error)."""
    try:
        yield
    except BaseException:
        store.finish(run_id, "stopped", (time.monotonic() - t0) * 1000.0)
        raise


_RESULT_COLUMNS = (
    "env_name",
    "has_verdict",
    "passed",
    "score",
    "error_type",
    "run_ms",
    "recorded",
    "result",
)
"""The columns a stored result fills (``_result_row``), after its run id and index."""


def _result_row(result: RunResult) -> tuple[Any, ...]:
    """``result``'s values for ``_RESULT_COLUMNS``, recorded now: the one place a result
    becomes a row, for a first record and a replacement alike."""
    return (
        result.env_name or "",
        int(result.has_verdict),
        int(result.passed),
        result.score,
        result.error_type,
        result.service.run_ms,
        time.time(),
        result.model_dump_json(),
    )


def record_batch(
    dg: DeepGym,
    store: RunStore,
    run_id: str,
    env: Environment,
    answers: Sequence[str],
    *,
    max_parallel: int = 8,
    progress: ProgressFn | None = None,
) -> BatchResult:
    """``run_batch`` of ``answers`` on ``env``, each result committed to ``run_id`` as it comes
    (the same order of runs as ``run_batch``: one group per answer, in order)."""
    results: dict[int, RunResult] = {}
    t0 = time.monotonic()
    with _stopped_unless_done(store, run_id, t0):
        for i, rs in dg.stream_groups(
            env, list(answers), group_size=1, max_parallel=max_parallel, progress=progress
        ):
            store.record(run_id, i, rs[0])
            results[i] = rs[0]
    elapsed = (time.monotonic() - t0) * 1000.0
    store.finish(run_id, "complete", elapsed)
    return BatchResult(results=[results[i] for i in range(len(answers))], execution_time_ms=elapsed)


def record_eval(
    dg: DeepGym,
    store: RunStore,
    run_id: str,
    envs: Sequence[Environment],
    answers: Sequence[str],
    *,
    max_parallel: int = 8,
    progress: ProgressFn | None = None,
) -> EvalResult:
    """Score the answers of ``run_id`` that have no stored result, and score again those stored
    without a verdict, committing each result as it comes.

    A run without a verdict is a failure of ours by the contract (a sandbox or a service that
    died, the host out of room), never the answer's: a resumed eval gives it another try, and
    keeps every stored verdict, so its totals are an uninterrupted eval's. Scheduling is
    ``eval``'s (one group per environment, in order); the result holds every kept result and
    every new one, in suite order.
    """
    done = store.results(run_id)
    again = {i for i, r in done.items() if not r.has_verdict}
    todo = [i for i in range(len(answers)) if i not in done or i in again]
    already = len(answers) - len(todo)

    def advance(k: int, _total: int) -> None:
        if progress is not None:
            progress(already + k, len(answers))

    t0 = time.monotonic()
    store.claim(run_id)
    with _stopped_unless_done(store, run_id, t0):
        if todo:
            for g, rs in dg.stream_groups(
                [envs[i] for i in todo],
                [answers[i] for i in todo],
                group_size=1,
                max_parallel=max_parallel,
                progress=advance,
            ):
                i = todo[g]
                if i in again:
                    store.replace_no_verdict(run_id, i, rs[0])
                else:
                    store.record(run_id, i, rs[0])
                done[i] = rs[0]
    elapsed = (time.monotonic() - t0) * 1000.0
    store.finish(run_id, "complete", elapsed)
    return EvalResult(
        results=[done[i] for i in range(len(answers))],
        env_names=[e.name for e in envs],
        execution_time_ms=elapsed,
    )
