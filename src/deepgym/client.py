"""``AsyncDeepGym`` (the core) and ``DeepGym`` (a blocking portal over it): one API, two shells.

``run`` raises the contract's exceptions; ``run_batch``, ``stream_groups`` and ``eval`` never
raise for one run: a failure becomes a result without a verdict. Every parameter of one class is a
parameter of the other (a test compares their signatures).

Batches are scheduled group-major, each environment's time limit comes from its reference
answer's measured runtime (``deepgym.scheduling``), and a failure that was ours before the answer
came into play is retried once.

Two engines do the work behind the same methods, chosen by ``mode``: ``local`` (the code below,
sandboxes on this host) and ``remote`` (``deepgym.remote.RemoteEngine``: the same calls over HTTP to
``deepgym serve``, the same results). ``Engine`` is the interface they share.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from deepgym.envs.registry import load_suite, resolve
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.models import BatchResult, Environment, EvalResult, RunResult
from deepgym.results import build_result, raise_for
from deepgym.sandbox.base import Backend, Job
from deepgym.scheduling import TimeLimitPolicy, broadcast_envs, group_slices, should_retry
from deepgym.verdict import Classification

if TYPE_CHECKING:
    from deepgym.remote import RemoteEngine

T = TypeVar("T")
EnvLike = Environment | str | Path
Envs = EnvLike | Sequence[EnvLike]
ProgressFn = Callable[[int, int], None]
Group = tuple[int, list[RunResult]]

SANDBOXES = ("pool", "strict", "unsafe")
MODES = ("local", "remote")


class Engine(Protocol):
    """What runs a client's calls: sandboxes on this host, or a ``deepgym serve`` over HTTP."""

    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float: ...

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult: ...

    async def run_batch(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        group_size: int | None = None,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> BatchResult: ...

    def stream_groups(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        group_size: int,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> AsyncGenerator[Group, None]: ...

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult: ...

    async def close(self) -> None: ...


def _check_parallel(max_parallel: int) -> int:
    if not isinstance(max_parallel, int) or isinstance(max_parallel, bool) or max_parallel < 1:
        raise ConfigError(f"max_parallel must be a positive int, got {max_parallel!r}")
    return max_parallel


def _check_limit(time_limit: float | None) -> float | None:
    if time_limit is not None and (not isinstance(time_limit, int | float) or time_limit <= 0):
        raise ConfigError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    return time_limit


def _make_backend(mode: str, sandbox: str, workers: int | None) -> Backend:
    if mode != "local":
        raise ConfigError(f"mode {mode!r} has no local backend")
    if sandbox == "pool":
        from deepgym.sandbox.pool import PoolBackend

        return PoolBackend(workers)
    from deepgym.sandbox.local import LocalBackend

    return LocalBackend(sandbox)


def _resolve_all(envs: Envs, n: int) -> list[Environment]:
    cache: dict[int, Environment] = {}
    out = []
    for e in broadcast_envs(envs, n):
        key = id(e)
        if key not in cache:
            cache[key] = resolve(e)  # type: ignore[arg-type]
        out.append(cache[key])
    return out


def _make_remote(
    mode: str,
    url: str | None,
    token: str | None,
    workers: int | None,
    time_limits: TimeLimitPolicy | None,
) -> RemoteEngine | None:
    """The remote engine for ``mode='remote'`` (httpx loads at its first call); None for local
    mode."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "local":
        if url is not None or token is not None:
            raise ConfigError("url and token are for mode='remote'")
        return None
    if url is None:
        raise ConfigError("mode='remote' needs url= (the address of a deepgym serve)")
    if workers is not None or time_limits is not None:
        raise ConfigError(
            "workers and time_limits are the service's in mode='remote'; set them on deepgym serve"
        )
    from deepgym.remote import RemoteEngine

    return RemoteEngine(url, token)


class AsyncDeepGym:
    """Scores answers in sandboxes; the asyncio core of the API.

    ``mode='local'`` runs sandboxes on this host; ``mode='remote'`` sends every call to the
    ``deepgym serve`` at ``url`` (with ``token`` as its bearer token), whose sandbox and time
    limits apply.
    """

    def __init__(
        self,
        mode: str = "local",
        *,
        sandbox: str = "pool",
        workers: int | None = None,
        time_limits: TimeLimitPolicy | None = None,
        url: str | None = None,
        token: str | None = None,
    ) -> None:
        self._remote = _make_remote(mode, url, token, workers, time_limits)
        if sandbox not in SANDBOXES:
            raise ConfigError(f"sandbox must be one of {SANDBOXES}, got {sandbox!r}")
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"workers must be a positive int or None, got {workers!r}")
        self.mode = mode
        self.sandbox = sandbox
        self.workers = workers
        self.url = url
        self.time_limits = time_limits if time_limits is not None else TimeLimitPolicy()
        self._backend: Backend | None = None
        self._limits: dict[tuple[str, int], asyncio.Future[float]] = {}

    def _get_backend(self) -> Backend:
        if self._backend is None:
            self._backend = _make_backend(self.mode, self.sandbox, self.workers)
        return self._backend

    # -- time limits ----------------------------------------------------------------------
    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """The effective time limit for ``env``: the call's, the environment's ``time_limit``,
        or ``clamp(k * reference runtime, floor, env.timeout)`` measured once and cached."""
        if self._remote is not None:
            return await self._remote.time_limit(env, time_limit)
        e = resolve(env)
        if _check_limit(time_limit) is not None:  # an explicit choice stands as given
            return float(time_limit)  # type: ignore[arg-type]
        if e.time_limit is not None:
            return e.time_limit
        if self.time_limits.factor is None or not e.reference_solution:
            return e.timeout
        key = (e.name, hash(e.model_dump_json(exclude={"source_dir"})))
        fut = self._limits.get(key)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._limits[key] = fut
            try:
                fut.set_result(await self._measure_limit(e))
            except BaseException as exc:
                del self._limits[key]
                fut.set_exception(exc)
                raise
        return await asyncio.shield(fut)

    async def _measure_limit(self, env: Environment) -> float:
        assert env.reference_solution is not None
        job = Job(
            env=env,
            answer=env.reference_solution,
            timeout=env.timeout,
            case_timeout=env.case_timeout,
        )
        best: float | None = None
        for _ in range(2):  # the faster of two runs: one-off start-up costs are not the task's
            raw = await self._get_backend().run(job)
            result, _ = build_result(raw, env.name, env.timeout)
            if not result.passed:  # no trustworthy measurement: keep the cap
                return env.timeout
            elapsed = (raw.report or {}).get("elapsed_ms")
            ms = float(elapsed) if isinstance(elapsed, int | float) else raw.total_ms
            best = ms if best is None else min(best, ms)
            if self.time_limits.limit(best / 1000.0, env.timeout) <= self.time_limits.floor:
                break  # already at the floor: a second measurement cannot lower it
        assert best is not None
        return self.time_limits.limit(best / 1000.0, env.timeout)

    # -- one run --------------------------------------------------------------------------
    async def _attempt(
        self, env: Environment, answer: str, limit: float, queue_ms: float, attempt: int
    ) -> tuple[RunResult, Classification]:
        if not isinstance(answer, str):
            raise ConfigError(f"model_output must be a str, got {type(answer).__name__}")
        job = Job(env=env, answer=answer, timeout=limit, case_timeout=min(env.case_timeout, limit))
        raw = await self._get_backend().run(job)
        return build_result(raw, env.name, limit, queue_ms=queue_ms, attempts=attempt)

    async def _run_with_retry(
        self, env: Environment, answer: str, limit: float, queued: float
    ) -> tuple[RunResult, Classification]:
        deadline = time.monotonic() + 2 * limit
        attempt = 1
        while True:
            queue_ms = (time.monotonic() - queued) * 1000.0 if attempt == 1 else 0.0
            result, c = await self._attempt(env, answer, limit, queue_ms, attempt)
            if not should_retry(result, attempt, deadline - time.monotonic()):
                return result, c
            attempt += 1

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer. Raises ``SandboxError``, ``TimeoutError`` or ``VerifierError`` on
        the no-verdict failures the contract lists; returns every other result."""
        if self._remote is not None:
            return await self._remote.run(env, model_output, time_limit=time_limit)
        e = resolve(env)
        limit = await self.time_limit(e, time_limit)
        result, c = await self._run_with_retry(e, model_output, limit, time.monotonic())
        raise_for(result, c)
        return result

    async def _safe(
        self, env: Environment, answer: Any, queued: float, time_limit: float | None
    ) -> RunResult:
        try:
            limit = await self.time_limit(env, time_limit)
            result, _ = await self._run_with_retry(env, answer, limit, queued)
            return result
        except DeepGymError as exc:
            error_type = "sandbox_error"
            if isinstance(exc, ConfigError):
                error_type = "runtime_error"
            return RunResult.no_verdict(
                error_type, f"{type(exc).__name__}: {exc}", env_name=env.name
            )
        except OSError as exc:  # a host failure (fork, pipes, disk): ours, not the policy's
            return RunResult.no_verdict(
                "runtime_error", f"{type(exc).__name__}: {exc}", env_name=env.name
            )

    # -- many runs ------------------------------------------------------------------------
    def _launch(
        self,
        envs: Sequence[Environment],
        outputs: Sequence[Any],
        max_parallel: int,
        time_limit: float | None,
        progress: ProgressFn | None,
        on_done: Callable[[int], None] | None = None,
    ) -> list[asyncio.Task[RunResult]]:
        """One task per answer, in index order: the fair semaphore makes the order group-major."""
        sem = asyncio.Semaphore(_check_parallel(max_parallel))
        _check_limit(time_limit)
        queued = time.monotonic()
        done = 0

        async def one(i: int) -> RunResult:
            nonlocal done
            async with sem:
                result = await self._safe(envs[i], outputs[i], queued, time_limit)
            done += 1
            if progress is not None:
                progress(done, len(outputs))
            if on_done is not None:
                on_done(i)
            return result

        return [asyncio.ensure_future(one(i)) for i in range(len(outputs))]

    def _batch_inputs(
        self, env: Envs, outputs: Sequence[str]
    ) -> tuple[list[Environment], list[Any]]:
        if isinstance(outputs, str) or not isinstance(outputs, Sequence):
            raise ConfigError("outputs must be a sequence of answers, not one str")
        return _resolve_all(env, len(outputs)), list(outputs)

    async def run_batch(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        group_size: int | None = None,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """Score many answers: one environment for all, or one per answer. Results come back in
        the order of ``outputs``; groups of ``group_size`` are scheduled group-major."""
        if self._remote is not None:
            return await self._remote.run_batch(
                env,
                outputs,
                max_parallel=max_parallel,
                group_size=group_size,
                time_limit=time_limit,
                progress=progress,
            )
        envs, answers = self._batch_inputs(env, outputs)
        group_slices(len(answers), group_size)  # validates group_size
        t0 = time.monotonic()
        tasks = self._launch(envs, answers, max_parallel, time_limit, progress)
        results = list(await asyncio.gather(*tasks))
        return BatchResult(results=results, execution_time_ms=(time.monotonic() - t0) * 1000.0)

    async def stream_groups(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        group_size: int,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> AsyncGenerator[Group, None]:
        """Yield ``(group_index, results)`` the moment each group of ``group_size`` consecutive
        answers is complete, while the rest keep running."""
        if self._remote is not None:
            remote = self._remote.stream_groups(
                env,
                outputs,
                group_size=group_size,
                max_parallel=max_parallel,
                time_limit=time_limit,
                progress=progress,
            )
            async with aclosing(remote):
                async for item in remote:
                    yield item
            return
        envs, answers = self._batch_inputs(env, outputs)
        groups = group_slices(len(answers), group_size)
        group_of = {i: g for g, r in enumerate(groups) for i in r}
        left = [len(r) for r in groups]
        ready: asyncio.Queue[int] = asyncio.Queue()

        def on_done(i: int) -> None:
            g = group_of[i]
            left[g] -= 1
            if left[g] == 0:
                ready.put_nowait(g)

        tasks = self._launch(envs, answers, max_parallel, time_limit, progress, on_done)
        try:
            for _ in groups:
                g = await ready.get()
                yield g, [tasks[i].result() for i in groups[g]]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """Score one answer per environment; ``outputs`` maps each environment's name to it.

        An environment with no answer in ``outputs`` is scored on the empty answer (a judged 0).
        """
        if self._remote is not None:
            return await self._remote.eval(
                envs_or_suite,
                outputs,
                max_parallel=max_parallel,
                time_limit=time_limit,
                progress=progress,
            )
        envs = (
            load_suite(envs_or_suite)
            if isinstance(envs_or_suite, str)
            else [resolve(e) for e in envs_or_suite]
        )
        if not isinstance(outputs, Mapping):
            raise ConfigError("outputs must map environment names to answers")
        t0 = time.monotonic()
        answers = [outputs.get(e.name, "") for e in envs]
        results = list(
            await asyncio.gather(*self._launch(envs, answers, max_parallel, time_limit, progress))
        )
        return EvalResult(
            results=results,
            env_names=[e.name for e in envs],
            execution_time_ms=(time.monotonic() - t0) * 1000.0,
        )

    async def sandbox_stats(self) -> dict[str, Any]:
        """This client's local sandbox in figures: for the pool, its workers and the memory
        (RSS, KiB) each holds when idle; empty before the first run, or for a remote client."""
        stats = getattr(self._backend, "stats", None)
        return dict(stats()) if callable(stats) else {}

    async def close(self) -> None:
        """Release the backend (its temporary files, cgroups and workers) or the connection."""
        if self._remote is not None:
            await self._remote.close()
        if self._backend is not None:
            backend, self._backend = self._backend, None
            await backend.close()

    async def __aenter__(self) -> AsyncDeepGym:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Portal:
    """An event loop in a daemon thread; blocking calls submit coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="deepgym", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _next(self, agen: AsyncIterator[T]) -> T:
        return await agen.__anext__()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Drive an async iterator from blocking code, one item at a time."""
        try:
            while True:
                try:
                    yield self.call(self._next(agen))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None and self.loop.is_running():
                self.call(aclose())

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class _Closable(Protocol):
    async def close(self) -> None: ...


class BlockingFace:
    """A blocking object over an async one (``_core``, with an ``async close()``): each call
    runs on a portal started at the first call, which ``close`` (or exit) stops."""

    _core: _Closable

    def __init__(self) -> None:
        self._portal: _Portal | None = None
        self._lock = threading.Lock()

    def _get_portal(self) -> _Portal:
        with self._lock:
            if self._portal is None:
                self._portal = _Portal()
                atexit.register(self.close)
            return self._portal

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._get_portal().call(coro)

    def close(self) -> None:
        """Release the async core and stop the portal thread."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            portal.call(self._core.close())
            portal.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DeepGym(BlockingFace):
    """The blocking client: the same methods as ``AsyncDeepGym``, driven through a portal."""

    _core: AsyncDeepGym

    def __init__(
        self,
        mode: str = "local",
        *,
        sandbox: str = "pool",
        workers: int | None = None,
        time_limits: TimeLimitPolicy | None = None,
        url: str | None = None,
        token: str | None = None,
    ) -> None:
        self._core = AsyncDeepGym(
            mode, sandbox=sandbox, workers=workers, time_limits=time_limits, url=url, token=token
        )
        self.mode = mode
        self.sandbox = sandbox
        self.workers = workers
        self.url = url
        self.time_limits = self._core.time_limits
        super().__init__()

    def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """See ``AsyncDeepGym.time_limit``."""
        return self._call(self._core.time_limit(env, time_limit))

    def run(self, env: EnvLike, model_output: str, *, time_limit: float | None = None) -> RunResult:
        """See ``AsyncDeepGym.run``."""
        return self._call(self._core.run(env, model_output, time_limit=time_limit))

    def run_batch(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        group_size: int | None = None,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """See ``AsyncDeepGym.run_batch``."""
        return self._call(
            self._core.run_batch(
                env,
                outputs,
                max_parallel=max_parallel,
                group_size=group_size,
                time_limit=time_limit,
                progress=progress,
            )
        )

    def stream_groups(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        group_size: int,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> Iterator[Group]:
        """See ``AsyncDeepGym.stream_groups``: a blocking iterator over complete groups."""
        agen = self._core.stream_groups(
            env,
            outputs,
            group_size=group_size,
            max_parallel=max_parallel,
            time_limit=time_limit,
            progress=progress,
        )
        return self._get_portal().iterate(agen)

    def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """See ``AsyncDeepGym.eval``."""
        return self._call(
            self._core.eval(
                envs_or_suite,
                outputs,
                max_parallel=max_parallel,
                time_limit=time_limit,
                progress=progress,
            )
        )

    def sandbox_stats(self) -> dict[str, Any]:
        """See ``AsyncDeepGym.sandbox_stats``."""
        return self._call(self._core.sandbox_stats())
