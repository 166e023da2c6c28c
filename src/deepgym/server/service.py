"""What the HTTP routes drive: input checks, runs streamed by group, the store, the drain.

The service object is here; its parts are ``inputs`` (a request's input, checked), ``streams``
(a batch's runs as a stream of events) and ``sessions`` (the agent sessions it keeps).

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
import contextvars
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

from deepgym.client import AsyncDeepGym
from deepgym.engines.base import Engine
from deepgym.exceptions import (
    ConfigError,
    DeepGymTimeoutError,
    SandboxError,
    TransportError,
    VerifierError,
)
from deepgym.models import Environment, RunResult
from deepgym.protocol import EnvSpec, Raised, RunReply, StreamEvent, encode_event
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend, Job, RawRun, RunInput, not_started
from deepgym.scheduling import TimeLimitPolicy, group_slices
from deepgym.server.admission import InFlightBytes
from deepgym.server.inputs import Limits, check_parallel, check_time_limit, parse_env, parse_envs
from deepgym.server.metrics import Metrics
from deepgym.server.sessions import OpenSession, OpenSessions
from deepgym.server.streams import (
    SHUTDOWN_CAUSE,
    Batch,
    BatchPlan,
    Flight,
    failure_cause,
    next_result,
)
from deepgym.session import AsyncSession
from deepgym.store import RunStatus, RunStore

T = TypeVar("T")

START_BY: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "deepgym_start_by", default=None
)
"""The instant (``time.monotonic()``) the runs of the request being served must start by, where
its client's deadline is known (``Service.score``'s ``start_by``); ``MeteredBackend`` puts it on
each job (``Job.start_by``), so that a run never waits for a sandbox past it."""
LATE = "no sandbox was free before the time the run had to start by (its client's deadline)"
RUN_INPUT: contextvars.ContextVar[tuple[Environment, RunInput] | None] = contextvars.ContextVar(
    "deepgym_run_input", default=None
)
"""The request's own cases and files for its runs of its environment (``Service.score``'s
``run_input``); ``MeteredBackend`` puts them on each job of that environment (``Job.input``)."""


class MeteredBackend:
    """Wraps the service's backend: a service-wide cap on runs at once, and the queue gauges.

    Time spent waiting for a slot is added to the run's queue time: ``total_ms`` includes it, the
    service time (``ServiceTime.run_ms``) does not. A run of a request with a start-by time
    (``START_BY``) waits for a slot, and then for a sandbox (the job carries it), no longer than
    that: past it, it never starts and has no verdict (``base.not_started``).
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
        start_by = START_BY.get()
        if start_by is not None:
            job = dataclasses.replace(job, start_by=start_by)
        given = RUN_INPUT.get()
        if given is not None and (job.env is given[0] or job.env == given[0]):  # a copy too
            job = dataclasses.replace(job, input=given[1])
        self.metrics.queue_depth += 1
        try:
            if self._sem is not None and not await _acquire_by(self._sem, start_by):
                raw = not_started(self.name, LATE)
                raw.queue_ms = raw.start_ms = raw.total_ms = (time.monotonic() - t0) * 1000.0
                return raw
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


async def _acquire_by(sem: asyncio.Semaphore, start_by: float | None) -> bool:
    """Acquire ``sem``, waiting no later than ``start_by`` (None: as long as it takes); whether
    it was acquired."""
    if start_by is None:
        await sem.acquire()
        return True
    if time.monotonic() >= start_by:
        return False
    try:
        async with asyncio.timeout(max(start_by - time.monotonic(), 0.0)):
            await sem.acquire()
    except TimeoutError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The service
# ---------------------------------------------------------------------------------------------


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
            ignored = [
                name
                for name, value in (
                    ("backend", backend),
                    ("time_limits", time_limits),
                    ("concurrency", concurrency),
                )
                if value is not None
            ]
            if ignored:
                raise ConfigError(
                    f"engine= runs the answers: {', '.join(ignored)} would be ignored; give "
                    "them to the engine (RayEngine(sandbox=..., time_limits=...)), or no engine"
                )
            self.client = AsyncDeepGym(engine=engine)
        else:
            self.client = AsyncDeepGym(
                backend=MeteredBackend(backend, self.metrics, concurrency), time_limits=time_limits
            )
        """The local client that runs every request's answers, on the metered backend."""
        self.local = engine is None
        """Whether the answers run on this host's backend (``MeteredBackend``), where a run can
        take a request's own cases and files (``RunInput``); not on another engine's."""
        self.store = store
        self.allow_verifier_code = allow_verifier_code
        self.limits = limits if limits is not None else Limits()
        self.admission = InFlightBytes(self.limits.max_inflight_bytes)
        """The bytes of requests admitted and not yet answered, against their bound."""
        self.draining = False
        self._flights: set[Flight] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.agent_sessions = OpenSessions(self.client, self.limits.max_sessions, self._abandonable)
        """The agent sessions open now, and the ids reaped lately."""

    @property
    def sessions(self) -> dict[str, OpenSession]:
        """The agent sessions open now, by ``sandbox_id``."""
        return self.agent_sessions.sessions

    def env(self, spec: EnvSpec, where: str = "env") -> Environment:
        """An environment a client named or sent, as this service allows (``parse_env``)."""
        return parse_env(
            spec,
            allow_verifier_code=self.allow_verifier_code,
            where=where,
            max_time_limit=self.limits.max_time_limit,
        )

    # -- flights and the drain ------------------------------------------------------------
    def _enter(self) -> Flight:
        if self.draining:
            raise TransportError("the service is shutting down", status_code=503)
        flight = Flight()
        self._flights.add(flight)
        self._idle.clear()
        return flight

    def _exit(self, flight: Flight) -> None:
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

    async def score(
        self,
        env: Environment,
        answer: str,
        time_limit: float | None,
        start_by: float | None = None,
        run_input: RunInput | None = None,
    ) -> RunResult:
        """One run with the batch rules (never raises for the run: no verdict is a result),
        counted in the metrics: what SandboxFusion's routes answer from. ``start_by``: the
        instant (``time.monotonic()``) past which the run must not start (``START_BY``): its
        client gives up before it could end. ``run_input``: the request's own cases and files
        for its runs of ``env`` (``RUN_INPUT``); on another engine than this host's, its cases
        become the environment's, and files are refused (``ConfigError``)."""
        if run_input is not None and not self.local:
            env = _folded(env, run_input)
            run_input = None
        token = START_BY.set(start_by)  # before the run's task is made: it copies the context
        given = RUN_INPUT.set(None if run_input is None else (env, run_input))
        try:
            result: RunResult = await self._abandonable(
                self.client.run_one(env, answer, time_limit=time_limit)
            )
        finally:
            RUN_INPUT.reset(given)
            START_BY.reset(token)
        self.metrics.observe(result)
        return result

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

    async def _stream(self, plan: BatchPlan, flight: Flight) -> AsyncIterator[bytes]:
        batch = Batch(plan, self.metrics, self.store)
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
                item = await next_result(queue, abandon)
                if item == "heartbeat":
                    yield encode_event(StreamEvent(event="heartbeat"))
                    continue
                if not isinstance(item, tuple):  # shut down, or the runs stopped early
                    break
                done += 1
                yield encode_event(StreamEvent(event="progress", done=done, total=n))
                if (line := batch.take(*item, ran=True)) is not None:
                    yield line
            cause = SHUTDOWN_CAUSE if abandon.done() else failure_cause(pump)
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
        return await self.agent_sessions.open_session(env)

    async def in_session(self, sid: str, op: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """``op`` on session ``sid`` as one request (``OpenSessions.in_session``)."""
        return await self.agent_sessions.in_session(sid, op)

    async def close_session(self, sid: str) -> None:
        """Close session ``sid`` (its client is done with it)."""
        await self.agent_sessions.close_session(sid)

    async def close_sessions(self) -> None:
        """Close every session still open (at shutdown)."""
        await self.agent_sessions.close_sessions()

    async def close(self) -> None:
        """Close every session, then the client, and with it the backend."""
        await self.close_sessions()
        await self.client.close()


def _folded(env: Environment, run_input: RunInput) -> Environment:
    """``env`` with ``run_input``'s cases as its own, for an engine that runs environments as
    they are sent (a Ray cluster's): files in or out of a run need this host's backend."""
    if run_input.files or run_input.fetch:
        raise ConfigError(
            "files and fetch_files need the service's own sandbox: this service runs its "
            "answers on another engine (deepgym serve --ray)"
        )
    if run_input.cases is None:
        return env
    return env.model_copy(update={"test_cases": list(run_input.cases)})


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
