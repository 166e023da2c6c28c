"""What the HTTP routes drive: input checks, runs streamed by group, the store, the drain.

Invariants:

- Every input is checked before the first run starts (``parse_env``, ``check_batch``): bad input
  is refused whole, nothing is half-run.
- Every answer of an accepted batch or eval comes back exactly once: with the result it got, or,
  if the service shut down (or failed) before it finished, as a result without a verdict. Each is
  recorded in the store the moment it is known.
- At shutdown (``begin_drain``) new requests are refused with 503; runs in flight get ``grace_s``
  to finish, then the rest are cancelled and come back without a verdict.
- Agent sessions are opened on the service's own client and kept by ``sandbox_id``; one is
  closed by its client, at its environment's ``lifetime`` (reaped once no request of it is in
  flight; its id then answers ``SandboxExpiredError``), or at shutdown (``close_sessions``).

Pure asyncio: no FastAPI here, so the rules are tested without a server.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from deepgym.client import AsyncDeepGym
from deepgym.engines.base import Engine
from deepgym.envs.registry import list_environments, load_environment
from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    DeepGymTimeoutError,
    SandboxError,
    SandboxExpiredError,
    TransportError,
    UnknownEnvironmentError,
    UnknownSessionError,
    VerifierCodeRefusedError,
    VerifierError,
)
from deepgym.models import Environment, RunResult
from deepgym.protocol import EnvSpec, Raised, RunReply, StreamEvent, encode_event
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend, Job, RawRun
from deepgym.scheduling import TimeLimitPolicy, group_slices
from deepgym.server.admission import InFlightBytes
from deepgym.server.metrics import Metrics
from deepgym.session import AsyncSession
from deepgym.store import RunKind, RunStatus, RunStore
from deepgym.text import one_line
from deepgym.validation import (
    name_str,
    optional_positive_int,
    optional_seconds,
    positive_int,
    seconds,
)

log = logging.getLogger("deepgym.server")
T = TypeVar("T")

HEARTBEAT_S = 5.0
SHUTDOWN_CAUSE = "the service shut down before this run finished"
MESSAGE_CHARS = 600
"""An error message a client gets is one line of at most this many characters."""


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_body_bytes: int = 32 * 2**20
    max_answers: int = 10_000
    max_parallel: int = 256
    """A request's ``max_parallel`` is clamped to this; ``concurrency`` caps the whole service."""
    max_sessions: int = 64
    """Agent sessions open at once (each is a sandbox); one more is refused with 429."""
    max_time_limit: float = 600.0
    """The longest time a client may ask for, in seconds: a run's ``time_limit``, a command's
    ``timeout``, and an inline environment's ``timeout``, ``time_limit``, ``step_timeout`` and
    ``lifetime``; more is refused with 400 naming this maximum (``deepgym serve
    --max-time-limit``). The service's own environments keep their caps."""
    max_inflight_bytes: int | None = None
    """The bytes of request bodies (the answers) the service holds at once; one request more is
    refused with 503 and ``Retry-After``, one over it alone with 413 (``deepgym.server.admission``,
    ``deepgym serve --max-inflight-mb``). None: a share of the service's memory."""

    def __post_init__(self) -> None:
        positive_int(self.max_body_bytes, "max_body_bytes")
        optional_positive_int(self.max_inflight_bytes, "max_inflight_bytes", 2**62)
        positive_int(self.max_answers, "max_answers")
        positive_int(self.max_parallel, "max_parallel")
        positive_int(self.max_sessions, "max_sessions")
        seconds(self.max_time_limit, "max_time_limit")


REAP_GRACE_S = 2.0
"""How long past its lifetime a session is kept (its sandbox already ended) before the service
closes it, so that a request at the very end still answers ``SandboxExpiredError``."""
REMEMBERED_EXPIRED = 4096
"""How many reaped sessions' ids the service still answers ``SandboxExpiredError`` for."""


class MeteredBackend:
    """Wraps the service's backend: a service-wide cap on runs at once, and the queue gauges.

    Time spent waiting for a slot is added to the run's queue time: ``total_ms`` includes it, the
    service time (``ServiceTime.run_ms``) does not.
    ``inner`` None: the default backend (``make_backend()``, a pool), made at the first run.
    """

    def __init__(self, inner: Backend | None, metrics: Metrics, concurrency: int | None) -> None:
        self._inner = inner
        self.name = inner.name if inner is not None else "pool"
        self.metrics = metrics
        self._sem = asyncio.Semaphore(concurrency) if concurrency else None

    @property
    def inner(self) -> Backend:
        """The wrapped backend (made at first use when none was given)."""
        if self._inner is None:
            self._inner = make_backend(self.name)
        return self._inner

    async def run(self, job: Job) -> RawRun:
        """Run ``job`` once a slot is free, counting the wait as queue time."""
        t0 = time.monotonic()
        self.metrics.queue_depth += 1
        try:
            if self._sem is not None:
                await self._sem.acquire()
        finally:
            self.metrics.queue_depth -= 1
        wait_ms = (time.monotonic() - t0) * 1000.0
        self.metrics.in_flight += 1
        try:
            raw = await self.inner.run(job)
        finally:
            self.metrics.in_flight -= 1
            if self._sem is not None:
                self._sem.release()
        raw.queue_ms += wait_ms
        raw.start_ms += wait_ms
        raw.total_ms += wait_ms
        return raw

    def stats(self) -> dict[str, Any]:
        """The wrapped backend's figures (``PoolBackend.stats``), where it has them."""
        stats = getattr(self._inner, "stats", None)
        return dict(stats()) if callable(stats) else {}

    async def close(self) -> None:
        """Close the wrapped backend, if it was made."""
        if self._inner is not None:
            await self._inner.close()


# ---------------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------------

_PATH_FIELDS = ("verifier_path", "repo_path", "tests_path", "source_dir")
_TIME_FIELDS = ("timeout", "time_limit", "step_timeout", "lifetime")
"""An inline environment's times that hold a sandbox: each at most the service's maximum."""


def _looks_like_path(name: str) -> bool:
    """A name that could reach this host's files: refused, whatever is there."""
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith(("/", "~", ".")) or ".." in parts or "\0" in name:
        return True
    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return True


def parse_env(
    spec: EnvSpec,
    *,
    allow_verifier_code: bool,
    where: str = "env",
    max_time_limit: float | None = None,
) -> Environment:
    """An environment a client named or sent; never a path on this host.

    A name must be a built-in or a registered ``prefix/<id>``. By value, the fields are
    ``Environment``'s (checked by ``deepgym.validation``); verifier code is refused unless
    allowed, and each time that holds a sandbox is at most ``max_time_limit`` seconds.
    """
    if isinstance(spec, str):
        spec = name_str(spec, where)
        if spec in list_environments():
            return load_environment(spec)
        if _looks_like_path(spec):
            raise UnknownEnvironmentError(f"{where}: unknown environment {spec!r}")
        try:
            return load_environment(spec)
        except UnknownEnvironmentError as exc:
            raise UnknownEnvironmentError(f"{where}: {exc}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: an environment name or object, got {type(spec).__name__}")
    for key in _PATH_FIELDS:
        if spec.get(key) is not None:
            raise ConfigError(f"{where}.{key}: a client cannot name a path on the service")
    for key in ("verifier_code", "step_verifier_code"):
        if spec.get(key) is not None and not allow_verifier_code:
            raise VerifierCodeRefusedError(
                f"{where}.{key}: this service does not run verifier code sent by a client "
                "(start it with --allow-verifier-code to allow that)"
            )
    try:
        env = Environment.model_validate(spec)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {one_line(str(exc), MESSAGE_CHARS)}") from exc
    if max_time_limit is not None:
        for key in _TIME_FIELDS:
            value = getattr(env, key)
            if value is not None and value > max_time_limit:
                raise ConfigError(_over_max(f"{where}.{key}", value, max_time_limit))
    return env


def _over_max(what: str, value: float, maximum: float) -> str:
    return (
        f"{what} of {value:g} s is over this service's maximum of {maximum:g} s "
        "(deepgym serve --max-time-limit)"
    )


def parse_envs(
    specs: EnvSpec | list[EnvSpec],
    n: int,
    *,
    allow_verifier_code: bool,
    max_time_limit: float | None = None,
) -> list[Environment]:
    """One environment per answer: one for all, or a list of exactly ``n``."""
    if not isinstance(specs, list):
        env = parse_env(
            specs, allow_verifier_code=allow_verifier_code, max_time_limit=max_time_limit
        )
        return [env] * n
    if len(specs) != n:
        raise ConfigError(f"env: got {len(specs)} environments for {n} answers; give one or {n}")
    cache: dict[str, Environment] = {}
    out = []
    for i, spec in enumerate(specs):
        if isinstance(spec, str) and spec in cache:
            out.append(cache[spec])
            continue
        env = parse_env(
            spec,
            allow_verifier_code=allow_verifier_code,
            where=f"env[{i}]",
            max_time_limit=max_time_limit,
        )
        if isinstance(spec, str):
            cache[spec] = env
        out.append(env)
    return out


def check_time_limit(
    time_limit: float | None, limits: Limits | None = None, what: str = "time_limit"
) -> float | None:
    """A client's ``time_limit``: None, or finite seconds > 0, at most the service's maximum
    (``Limits.max_time_limit``; more is refused, naming it)."""
    value = optional_seconds(time_limit, what)
    maximum = (limits if limits is not None else Limits()).max_time_limit
    if value is not None and value > maximum:
        raise ConfigError(_over_max(what, value, maximum))
    return value


def check_parallel(max_parallel: int, limits: Limits) -> int:
    """A client's ``max_parallel``, capped by the service's limit."""
    return min(positive_int(max_parallel, "max_parallel"), limits.max_parallel)


# ---------------------------------------------------------------------------------------------
# The service
# ---------------------------------------------------------------------------------------------


class _Flight:
    """One request that is running answers; ``abandon`` is set when the drain's grace ends."""

    def __init__(self) -> None:
        self.abandon = asyncio.Event()


@dataclass
class BatchPlan:
    """A checked batch or eval, ready to run."""

    kind: RunKind
    source: str
    envs: list[Environment]
    answers: list[str]
    group_size: int | None
    max_parallel: int
    time_limit: float | None
    with_names: bool = False
    """Send the environments' names in the ``start`` event (an eval of a named suite)."""


@dataclass
class _OpenSession:
    """One agent session the service keeps: its requests in flight, its reaping."""

    session: AsyncSession
    reaper: asyncio.TimerHandle | None = None
    busy: int = 0
    expired: bool = False
    """Past its lifetime: closed once no request of it is in flight."""


class Service:
    """The state behind the routes: the client, the store, the metrics and the drain.

    ``backend`` runs the answers (None: a pool, made at the first run), wrapped in a
    ``MeteredBackend`` (the ``concurrency`` cap and the queue gauges); ``time_limits`` is how the
    service derives an environment's time limit from its reference. ``engine``: run the answers
    there instead (``deepgym serve --ray``: a Ray cluster several services can share).
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        time_limits: TimeLimitPolicy | None = None,
        store: RunStore | None = None,
        allow_verifier_code: bool = False,
        limits: Limits | None = None,
        concurrency: int | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.metrics = Metrics()
        if engine is not None:  # another engine (a Ray cluster's) runs the answers
            self.client = AsyncDeepGym(engine=engine)
        else:
            self.client = AsyncDeepGym(
                backend=MeteredBackend(backend, self.metrics, concurrency), time_limits=time_limits
            )
        """The local client that runs every request's answers, on the metered backend."""
        self.store = store
        self.allow_verifier_code = allow_verifier_code
        self.limits = limits if limits is not None else Limits()
        self.admission = InFlightBytes(self.limits.max_inflight_bytes)
        """The bytes of requests admitted and not yet answered, against their bound."""
        self.draining = False
        self._flights: set[_Flight] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.sessions: dict[str, _OpenSession] = {}
        """The agent sessions open now, by ``sandbox_id``."""
        self._opening = 0
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def env(self, spec: EnvSpec, where: str = "env") -> Environment:
        """An environment a client named or sent, as this service allows (``parse_env``)."""
        return parse_env(
            spec,
            allow_verifier_code=self.allow_verifier_code,
            where=where,
            max_time_limit=self.limits.max_time_limit,
        )

    # -- flights and the drain ------------------------------------------------------------
    def _enter(self) -> _Flight:
        if self.draining:
            raise TransportError("the service is shutting down", status_code=503)
        flight = _Flight()
        self._flights.add(flight)
        self._idle.clear()
        return flight

    def _exit(self, flight: _Flight) -> None:
        self._flights.discard(flight)
        if not self._flights:
            self._idle.set()

    @property
    def in_flight_requests(self) -> int:
        """Requests being served now."""
        return len(self._flights)

    def begin_drain(self, grace_s: float) -> None:
        """Refuse new work; after ``grace_s``, runs still going are cancelled (no verdict)."""
        if self.draining:
            return
        self.draining = True
        asyncio.get_running_loop().call_later(max(grace_s, 0.0), self.abandon_all)

    def abandon_all(self) -> None:
        """End every request now: what has not finished comes back without a verdict."""
        for flight in list(self._flights):
            flight.abandon.set()

    async def wait_idle(self) -> None:
        """Wait until no request is in flight."""
        await self._idle.wait()

    # -- single calls ---------------------------------------------------------------------
    async def _abandonable(self, coro: Any) -> Any:
        flight = self._enter()
        task = asyncio.ensure_future(coro)
        abandon = asyncio.ensure_future(flight.abandon.wait())
        try:
            await asyncio.wait({task, abandon}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise TransportError(SHUTDOWN_CAUSE, status_code=503)
            return task.result()
        finally:
            abandon.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, abandon, return_exceptions=True)
            self._exit(flight)

    async def time_limit(self, env: Environment, time_limit: float | None) -> float:
        """The time limit the service uses for ``env``."""
        value: float = await self._abandonable(self.client.time_limit(env, time_limit))
        return value

    async def run_one(self, env: Environment, answer: str, time_limit: float | None) -> RunReply:
        """``dg.run`` on this host; its no-verdict exceptions travel in the reply."""
        try:
            result: RunResult = await self._abandonable(
                self.client.run(env, answer, time_limit=time_limit)
            )
        except (SandboxError, DeepGymTimeoutError, VerifierError) as exc:
            got = exc.result if isinstance(exc.result, RunResult) else None
            if got is not None:
                self.metrics.observe(got)
            return RunReply(result=got, raised=Raised(type=type(exc).__name__, message=str(exc)))
        self.metrics.observe(result)
        return RunReply(result=result)

    # -- streams --------------------------------------------------------------------------
    def check_batch(
        self,
        specs: EnvSpec | list[EnvSpec],
        answers: list[str],
        group_size: int | None,
        max_parallel: int,
        time_limit: float | None,
    ) -> BatchPlan:
        """A batch request, checked whole before anything runs."""
        envs = parse_envs(
            specs,
            len(answers),
            allow_verifier_code=self.allow_verifier_code,
            max_time_limit=self.limits.max_time_limit,
        )
        group_slices(len(answers), group_size)
        source = ",".join(dict.fromkeys(e.name for e in envs))[:200] or "batch"
        return BatchPlan(
            kind="batch",
            source=source,
            envs=envs,
            answers=answers,
            group_size=group_size,
            max_parallel=check_parallel(max_parallel, self.limits),
            time_limit=check_time_limit(time_limit, self.limits),
        )

    def open_stream(self, plan: BatchPlan) -> AsyncIterator[bytes]:
        """NDJSON events: ``start``, then ``progress`` per run and ``group`` per complete group,
        ``heartbeat`` when idle, and ``end``. Every answer comes back exactly once.

        The request counts as in flight from this call (a drain that begins later waits for it).
        """
        flight = self._enter()
        return self._stream(plan, flight)

    async def _stream(self, plan: BatchPlan, flight: _Flight) -> AsyncIterator[bytes]:
        batch = _Batch(plan, self.metrics, self.store)
        n = len(plan.answers)
        t0 = time.monotonic()
        queue: asyncio.Queue[tuple[int, RunResult] | None] = asyncio.Queue()
        pump = asyncio.ensure_future(self._pump(plan, queue))
        abandon = asyncio.ensure_future(flight.abandon.wait())
        status: RunStatus = "cancelled"
        try:
            yield encode_event(
                StreamEvent(
                    event="start",
                    run_id=batch.run_id,
                    total=n,
                    env_names=batch.names if plan.with_names else None,
                )
            )
            done = 0
            while done < n:
                item = await _next(queue, abandon)
                if item == "heartbeat":
                    yield encode_event(StreamEvent(event="heartbeat"))
                    continue
                if not isinstance(item, tuple):  # shut down, or the runs stopped early
                    break
                done += 1
                yield encode_event(StreamEvent(event="progress", done=done, total=n))
                if (line := batch.take(*item, ran=True)) is not None:
                    yield line
            cause = SHUTDOWN_CAUSE if abandon.done() else _failure(pump)
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
            for line in batch.close_out(queue, cause):
                yield line
            status = "complete"
            elapsed = (time.monotonic() - t0) * 1000.0
            yield encode_event(StreamEvent(event="end", execution_time_ms=elapsed))
        finally:
            abandon.cancel()
            pump.cancel()
            await asyncio.gather(pump, abandon, return_exceptions=True)
            batch.finish(status, (time.monotonic() - t0) * 1000.0)
            self._exit(flight)

    async def _pump(
        self, plan: BatchPlan, queue: asyncio.Queue[tuple[int, RunResult] | None]
    ) -> None:
        """Run the answers one group per answer (the client's scheduling), each result queued
        the moment it is known; ``None`` last, however it ends."""
        try:
            stream = self.client.stream_groups(
                plan.envs,
                plan.answers,
                group_size=1,
                max_parallel=plan.max_parallel,
                time_limit=plan.time_limit,
            )
            async with aclosing(stream):
                async for i, rs in stream:
                    queue.put_nowait((i, rs[0]))
        finally:
            queue.put_nowait(None)

    # -- agent sessions -------------------------------------------------------------------
    async def open_session(self, env: Environment) -> str:
        """Open a session of ``env`` on the service's client; its ``sandbox_id``."""
        if len(self.sessions) + self._opening >= self.limits.max_sessions:
            raise TransportError(
                f"{self.limits.max_sessions} sessions are open: the service's limit",
                status_code=429,
            )
        self._opening += 1
        try:
            session: AsyncSession = await self._abandonable(self.client.session(env))
        finally:
            self._opening -= 1
        sid = session.sandbox_id
        entry = _OpenSession(session)
        loop = asyncio.get_running_loop()
        entry.reaper = loop.call_later(env.lifetime + REAP_GRACE_S, self._reap, sid)
        self.sessions[sid] = entry
        return sid

    def _entry(self, sid: str) -> _OpenSession:
        entry = self.sessions.get(sid)
        if entry is not None and not entry.expired:
            return entry
        cause = self._expired.get(sid)
        if cause is not None or entry is not None:
            raise SandboxExpiredError(cause or f"session {sid}: its sandbox's lifetime ended")
        raise UnknownSessionError(
            f"unknown session {one_line(sid, 80)!r}: closed, or never opened on this service"
        )

    async def in_session(self, sid: str, op: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """``op`` on session ``sid`` as one request (the drain waits for it); a session past
        its lifetime is closed once its last request is done."""
        entry = self._entry(sid)
        entry.busy += 1
        try:
            result: T = await self._abandonable(op(entry.session))
            return result
        finally:
            entry.busy -= 1
            if entry.expired and entry.busy == 0:
                self._end_later(sid)

    async def close_session(self, sid: str) -> None:
        """Close session ``sid`` (its client is done with it)."""
        entry = self.sessions.get(sid)
        if entry is None:
            if sid not in self._expired:  # one reaped at its lifetime is closed already
                self._entry(sid)  # raises: unknown
            return
        await self._drop(sid, entry)

    def _reap(self, sid: str) -> None:
        """The session's lifetime is over: close it now, or once its requests are done."""
        entry = self.sessions.get(sid)
        if entry is None:
            return
        entry.expired = True
        lifetime = entry.session.env.lifetime
        self._expired[sid] = f"session {sid}: its sandbox's lifetime of {lifetime:g} s ended"
        while len(self._expired) > REMEMBERED_EXPIRED:
            self._expired.popitem(last=False)
        if entry.busy == 0:
            self._end_later(sid)

    def _end_later(self, sid: str) -> None:
        entry = self.sessions.get(sid)
        if entry is None:
            return
        task = asyncio.ensure_future(self._drop(sid, entry))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _drop(self, sid: str, entry: _OpenSession) -> None:
        if self.sessions.get(sid) is entry:
            del self.sessions[sid]
        if entry.reaper is not None:
            entry.reaper.cancel()
        try:
            await entry.session.close()
        except (DeepGymError, OSError) as exc:  # the session is gone either way
            log.warning("session %s: closing it failed: %s", sid, exc)

    async def close_sessions(self) -> None:
        """Close every session still open (at shutdown)."""
        entries = list(self.sessions.items())
        await asyncio.gather(*(self._drop(sid, e) for sid, e in entries))
        await asyncio.gather(*list(self._closing), return_exceptions=True)

    async def close(self) -> None:
        """Close every session, then the client, and with it the backend."""
        await self.close_sessions()
        await self.client.close()


async def _next(
    queue: asyncio.Queue[tuple[int, RunResult] | None], abandon: asyncio.Future[Any]
) -> tuple[int, RunResult] | str | None:
    """The next result (None: the runs stopped), ``"abandon"`` once the drain's grace is over,
    or ``"heartbeat"`` after ``HEARTBEAT_S`` with neither."""
    getter = asyncio.ensure_future(queue.get())
    await asyncio.wait({getter, abandon}, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED)
    if getter.done():
        return getter.result()
    getter.cancel()  # an item it was about to take stays in the queue
    return "abandon" if abandon.done() else "heartbeat"


class _Batch:
    """One accepted batch's bookkeeping: results by index, groups still open, the store's record.

    Each result is recorded the moment it is taken; a failing store stops recording, never the
    batch (the store is a record, not a reason to fail a run).
    """

    def __init__(self, plan: BatchPlan, metrics: Metrics, store: RunStore | None) -> None:
        n = len(plan.answers)
        self.names = [e.name for e in plan.envs]
        self.groups = group_slices(n, plan.group_size)
        self.group_of = {i: g for g, r in enumerate(self.groups) for i in r}
        self.left = [len(r) for r in self.groups]
        self.results: list[RunResult | None] = [None] * n
        self.metrics = metrics
        self.store = store
        self.run_id: str | None = None
        if store is not None:
            params = {"group_size": plan.group_size, "max_parallel": plan.max_parallel}
            try:
                self.run_id = store.create_run(
                    plan.kind, plan.source, self.names, plan.answers, params
                )
            except sqlite3.Error as exc:
                log.warning("not recording this %s: %s", plan.kind, exc)

    def take(self, i: int, r: RunResult, *, ran: bool) -> bytes | None:
        """Keep result ``i``; its group's line once the group is complete."""
        self.results[i] = r
        self.metrics.observe(r, ran=ran)
        if self.store is not None and self.run_id is not None:
            try:
                self.store.record(self.run_id, i, r)
            except sqlite3.Error as exc:
                log.warning("run %s: recording stopped: %s", self.run_id, exc)
                self.run_id = None
        g = self.group_of[i]
        self.left[g] -= 1
        if self.left[g]:
            return None
        members = [m for m in (self.results[j] for j in self.groups[g]) if m is not None]
        return encode_event(
            StreamEvent(event="group", group=g, start=self.groups[g].start, results=members)
        )

    def close_out(
        self, queue: asyncio.Queue[tuple[int, RunResult] | None], cause: str
    ) -> Iterator[bytes]:
        """After the runs stopped: the results still queued, then every missing one, without a
        verdict (``cause`` says why). Every answer comes back exactly once."""
        while not queue.empty():
            item = queue.get_nowait()
            if item is None or self.results[item[0]] is not None:
                continue
            if (line := self.take(*item, ran=True)) is not None:
                yield line
        error_type = "sandbox_error" if cause == SHUTDOWN_CAUSE else "runtime_error"
        for i, r in enumerate(self.results):
            if r is None:
                lost = RunResult.no_verdict(error_type, cause, env_name=self.names[i])
                if (line := self.take(i, lost, ran=False)) is not None:
                    yield line

    def finish(self, status: RunStatus, elapsed_ms: float) -> None:
        if self.store is not None and self.run_id is not None:
            try:
                self.store.finish(self.run_id, status, elapsed_ms)
            except sqlite3.Error as exc:
                log.warning("run %s: %s", self.run_id, exc)


def _failure(task: asyncio.Future[None]) -> str:
    exc = task.exception() if task.done() and not task.cancelled() else None
    if exc is None:
        return "the service stopped before this run finished"
    return f"the service failed before this run finished: {type(exc).__name__}: {exc}"


def eval_plan(
    service: Service,
    envs: Sequence[Environment],
    outputs: dict[str, str],
    source: str,
    max_parallel: int,
    time_limit: float | None,
    *,
    with_names: bool,
) -> BatchPlan:
    """An eval as a batch of one group per environment (``eval``'s own scheduling)."""
    return BatchPlan(
        kind="eval",
        source=source,
        envs=list(envs),
        answers=[outputs.get(e.name, "") for e in envs],
        group_size=1,
        max_parallel=check_parallel(max_parallel, service.limits),
        time_limit=check_time_limit(time_limit, service.limits),
        with_names=with_names,
    )
