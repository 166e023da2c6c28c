"""``AsyncDeepGym`` (the core) and ``DeepGym`` (a blocking portal over it): one API, two shells.

``run`` raises the contract's exceptions; ``run_batch`` and ``eval`` never raise for one run: a
failure becomes a result without a verdict. Every parameter of one class is a parameter of the
other (a test compares their signatures).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from deepgym.envs.registry import load_suite, resolve
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.models import BatchResult, Environment, EvalResult, RunResult
from deepgym.results import build_result, raise_for
from deepgym.sandbox.base import Backend, Job

T = TypeVar("T")
EnvLike = Environment | str | Path
ProgressFn = Callable[[int, int], None]

SANDBOXES = ("pool", "strict", "unsafe")


def _check_parallel(max_parallel: int) -> int:
    if not isinstance(max_parallel, int) or isinstance(max_parallel, bool) or max_parallel < 1:
        raise ConfigError(f"max_parallel must be a positive int, got {max_parallel!r}")
    return max_parallel


def _make_backend(mode: str, sandbox: str, workers: int | None) -> Backend:
    if mode != "local":
        raise ConfigError(f"mode must be 'local', got {mode!r}")
    if sandbox == "pool":
        from deepgym.sandbox.pool import PoolBackend

        return PoolBackend(workers)
    from deepgym.sandbox.local import LocalBackend

    return LocalBackend(sandbox)


class AsyncDeepGym:
    """Scores answers in sandboxes; the asyncio core of the API."""

    def __init__(
        self, mode: str = "local", *, sandbox: str = "pool", workers: int | None = None
    ) -> None:
        if mode != "local":
            raise ConfigError(f"mode must be 'local', got {mode!r}")
        if sandbox not in SANDBOXES:
            raise ConfigError(f"sandbox must be one of {SANDBOXES}, got {sandbox!r}")
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"workers must be a positive int or None, got {workers!r}")
        self.mode = mode
        self.sandbox = sandbox
        self.workers = workers
        self._backend: Backend | None = None

    def _get_backend(self) -> Backend:
        if self._backend is None:
            self._backend = _make_backend(self.mode, self.sandbox, self.workers)
        return self._backend

    async def _run_one(
        self, env: Environment, answer: str, queue_ms: float = 0.0
    ) -> tuple[RunResult, Any]:
        if not isinstance(answer, str):
            raise ConfigError(f"model_output must be a str, got {type(answer).__name__}")
        job = Job(env=env, answer=answer, timeout=env.timeout, case_timeout=env.case_timeout)
        raw = await self._get_backend().run(job)
        return build_result(raw, env.name, env.timeout, queue_ms=queue_ms)

    async def run(self, env: EnvLike, model_output: str) -> RunResult:
        """Score one answer. Raises ``SandboxError``, ``TimeoutError`` or ``VerifierError`` on
        the no-verdict failures the contract lists; returns every other result."""
        result, c = await self._run_one(resolve(env), model_output)
        raise_for(result, c)
        return result

    async def _safe(self, env: Environment, answer: Any, queued: float) -> RunResult:
        try:
            result, _ = await self._run_one(env, answer, (time.monotonic() - queued) * 1000.0)
            return result
        except DeepGymError as exc:
            return RunResult.no_verdict(
                "sandbox_error", f"{type(exc).__name__}: {exc}", env_name=env.name
            )
        except OSError as exc:  # a host failure (fork, pipes, disk): ours, not the policy's
            return RunResult.no_verdict(
                "runtime_error", f"{type(exc).__name__}: {exc}", env_name=env.name
            )

    async def _gather(
        self,
        pairs: Sequence[tuple[Environment, Any]],
        max_parallel: int,
        progress: ProgressFn | None,
    ) -> list[RunResult]:
        sem = asyncio.Semaphore(_check_parallel(max_parallel))
        done = 0
        queued = time.monotonic()

        async def one(env: Environment, answer: Any) -> RunResult:
            nonlocal done
            async with sem:
                result = await self._safe(env, answer, queued)
            done += 1
            if progress is not None:
                progress(done, len(pairs))
            return result

        return list(await asyncio.gather(*(one(e, a) for e, a in pairs)))

    async def run_batch(
        self,
        env: EnvLike,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """Score many answers to one environment; a failure is a no-verdict result, not a raise."""
        e = resolve(env)
        if isinstance(outputs, str):
            raise ConfigError("outputs must be a sequence of answers, not one str")
        t0 = time.monotonic()
        results = await self._gather([(e, o) for o in outputs], max_parallel, progress)
        return BatchResult(results=results, execution_time_ms=(time.monotonic() - t0) * 1000.0)

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """Score one answer per environment; ``outputs`` maps each environment's name to it.

        An environment with no answer in ``outputs`` is scored on the empty answer (a judged 0).
        """
        envs = (
            load_suite(envs_or_suite)
            if isinstance(envs_or_suite, str)
            else [resolve(e) for e in envs_or_suite]
        )
        if not isinstance(outputs, Mapping):
            raise ConfigError("outputs must map environment names to answers")
        t0 = time.monotonic()
        results = await self._gather(
            [(e, outputs.get(e.name, "")) for e in envs], max_parallel, progress
        )
        return EvalResult(
            results=results,
            env_names=[e.name for e in envs],
            execution_time_ms=(time.monotonic() - t0) * 1000.0,
        )

    async def close(self) -> None:
        """Release the backend (its temporary files, cgroups and workers)."""
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

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class DeepGym:
    """The blocking client: the same methods as ``AsyncDeepGym``, driven through a portal."""

    def __init__(
        self, mode: str = "local", *, sandbox: str = "pool", workers: int | None = None
    ) -> None:
        self._core = AsyncDeepGym(mode, sandbox=sandbox, workers=workers)
        self.mode = mode
        self.sandbox = sandbox
        self.workers = workers
        self._portal: _Portal | None = None
        self._lock = threading.Lock()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._portal is None:
                self._portal = _Portal()
                atexit.register(self.close)
            portal = self._portal
        return portal.call(coro)

    def run(self, env: EnvLike, model_output: str) -> RunResult:
        """See ``AsyncDeepGym.run``."""
        return self._call(self._core.run(env, model_output))

    def run_batch(
        self,
        env: EnvLike,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """See ``AsyncDeepGym.run_batch``."""
        return self._call(
            self._core.run_batch(env, outputs, max_parallel=max_parallel, progress=progress)
        )

    def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """See ``AsyncDeepGym.eval``."""
        return self._call(
            self._core.eval(envs_or_suite, outputs, max_parallel=max_parallel, progress=progress)
        )

    def close(self) -> None:
        """Release the backend and stop the portal thread."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            portal.call(self._core.close())
            portal.stop()

    def __enter__(self) -> DeepGym:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
