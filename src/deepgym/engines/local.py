"""The local engine: sandboxes on this host, through one ``Backend``.

Batches are scheduled group-major (a fair semaphore admits answers in index order), each
environment's time limit comes from its reference answer's measured runtime (measured once per
environment and machine, ``deepgym.time_limits``, and only once a run goes past the floor: runs
start at once under the cap and are held to the limit when it arrives, ``deepgym.scheduling``),
and a failure that was ours before the answer came into play is retried once inside the run's
deadline.
``run`` raises the contract's no-verdict exceptions; the batch methods turn every failure of one
run into a result without a verdict, except ``SandboxUnavailableError`` (this host cannot run the
sandbox at all), which they raise: every run would fail alike, and a batch of rewards all
``None`` would go unnoticed. A host error a backend lets out (``OSError``: a full disk while an
environment is staged, a fork or a pipe that fails) is translated once, where the engine calls
the backend (``_backend_run``), into ``SandboxError``: every backend's host failure is ours, a
run without a verdict, never the answer's 0 and never a foreign exception out of ``run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deepgym.envs.registry import resolve, resolve_many
from deepgym.exceptions import ConfigError, DeepGymError, SandboxError, SandboxUnavailableError
from deepgym.models import BatchResult, Environment, EvalResult, RunResult
from deepgym.results import build_result, raise_for
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend, Job, RawRun
from deepgym.scheduling import (
    TimeLimitPolicy,
    broadcast_envs,
    group_slices,
    holds_under,
    should_retry,
)
from deepgym.time_limits import TimeLimits
from deepgym.types import EnvLike, Envs, Group, ProgressFn
from deepgym.verdict import Classification

if TYPE_CHECKING:
    from deepgym.sandbox.sessions import LocalSession, LocalSessions

__all__ = ["LocalEngine"]


def _single(env: Environment) -> Environment:
    """``env``, if one answer can be scored on it (a session is an episode, not an answer)."""
    if env.kind == "session":
        raise ConfigError(
            f"env {env.name!r} is a session: score it with dg.session(env) or dg.run_episode"
        )
    return env


def resolve_per_answer(envs: Envs, n: int) -> list[Environment]:
    """One resolved environment per answer (each distinct object resolved once)."""
    cache: dict[int, Environment] = {}
    out = []
    for e in broadcast_envs(envs, n):
        key = id(e)
        if key not in cache:
            cache[key] = _single(resolve(e))  # type: ignore[arg-type]
        out.append(cache[key])
    return out


class LocalEngine:
    """Runs a client's calls in sandboxes on this host.

    ``backend``: the sandbox backend to use (None: ``make_backend(sandbox, workers=workers)``,
    made at the first run). ``time_limits``: how a time limit is derived from the reference
    (the limits themselves: ``limits``, a ``TimeLimits``).
    ``max_in_flight``: the most runs at once across all calls (None: each call's
    ``max_parallel`` only), as a node's scorer on a Ray cluster admits no more than its pool.
    """

    mode = "local"

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        sandbox: str = "pool",
        workers: int | None = None,
        time_limits: TimeLimitPolicy | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        self._backend = backend
        self.max_in_flight = max_in_flight
        self._in_flight: asyncio.Semaphore | None = None
        self.sandbox = sandbox if backend is None else str(getattr(backend, "name", sandbox))
        self.workers = workers
        self.time_limits = time_limits if time_limits is not None else TimeLimitPolicy()
        self.limits = TimeLimits(self.time_limits, self._reference_ms, sandbox=self.sandbox)
        self._sessions: LocalSessions | None = None

    @property
    def backend(self) -> Backend:
        """The sandbox backend (made at first use when none was given)."""
        if self._backend is None:
            self._backend = make_backend(self.sandbox, workers=self.workers)
        return self._backend

    # -- time limits ----------------------------------------------------------------------
    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """The call's limit, the environment's ``time_limit``, or ``clamp(k * reference
        runtime, floor, env.timeout)`` measured once per environment and cached."""
        return await self.limits.limit(_single(resolve(env)), time_limit)

    async def _reference_ms(self, env: Environment) -> float | None:
        """The reference's runtime here (ms, the faster of two runs); None if it failed
        (``TimeLimits``'s measurement: it asks only for an environment with a reference)."""
        job = Job(
            env=env,
            answer=env.reference_solution or "",
            timeout=env.timeout,
            case_timeout=env.case_timeout,
        )
        best: float | None = None
        for _ in range(2):  # the faster of two runs: one-off start-up costs are not the task's
            raw = await self._backend_run(job)
            result, _ = build_result(raw, env.name, env.timeout, scoring=env.scoring)
            if not result.passed:
                return None
            elapsed = (raw.report or {}).get("elapsed_ms")
            ms = float(elapsed) if isinstance(elapsed, int | float) else raw.total_ms
            best = ms if best is None else min(best, ms)
            if self.time_limits.limit(best / 1000.0, env.timeout) <= self.time_limits.floor:
                break  # already at the floor: a second measurement cannot lower it
        return best

    # -- one run --------------------------------------------------------------------------
    async def _backend_run(self, job: Job) -> RawRun:
        """The backend's run of ``job``; a host error it lets out becomes ``SandboxError``
        (the contract's no-verdict error; the engine's own errors pass as they are)."""
        try:
            return await self.backend.run(job)
        except DeepGymError:
            raise  # already the contract's (a TransportError is an OSError too)
        except OSError as exc:
            raise SandboxError(f"the host failed the run: {exc}") from exc

    async def _attempt(
        self, env: Environment, answer: str, limit: float, queue_ms: float, attempt: int
    ) -> tuple[RunResult, Classification]:
        job = Job(env=env, answer=answer, timeout=limit, case_timeout=min(env.case_timeout, limit))
        raw = await self._backend_run(job)
        return build_result(
            raw,
            env.name,
            limit,
            queue_ms=queue_ms,
            attempts=attempt,
            memory_mb=env.memory_mb,
            scoring=env.scoring,
        )

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

    async def _judged(
        self, env: Environment, answer: str, time_limit: float | None, queued: float
    ) -> tuple[RunResult, Classification]:
        """One answer's result under its time limit, without waiting for a limit that is still
        to be derived (``_provisional``)."""
        limit = self.limits.now(env, time_limit)
        if limit is not None:
            return await self._run_with_retry(env, answer, limit, queued)
        return await self._provisional(env, answer, queued)

    async def _provisional(
        self, env: Environment, answer: str, queued: float
    ) -> tuple[RunResult, Classification]:
        """No serial wait for a derived limit: the run starts at once under the environment's
        cap. Any derived limit is at least ``min(floor, cap)``, so a run that ends within that
        (``holds_under``) has its result whatever the limit; one that goes on has the limit
        measured beside it (once per environment) and is held to it: a run still going when
        its limit has passed is stopped, and one whose result the limit would have changed
        (it took longer, or its solution used more CPU) runs again under the limit, as if the
        limit had been known from the start: the verdict never depends on which came first."""
        cap = env.timeout
        started = time.monotonic()
        run = asyncio.ensure_future(self._run_with_retry(env, answer, cap, queued))
        try:
            sure = min(self.time_limits.floor, cap)
            await asyncio.wait({run}, timeout=sure)
            if run.done() and holds_under(run.result()[0], sure):
                return run.result()
            limit = await self.limits.derive(env)
            if limit >= cap:  # the limit is the cap the run is held to already
                return await run
            left = started + limit - time.monotonic()
            if left > 0:
                await asyncio.wait({run}, timeout=left)
            if run.done():
                result, c = run.result()
                if holds_under(result, limit):
                    return result.model_copy(update={"time_limit_s": limit}), c
        finally:
            if not run.done():  # past its limit (or the call was cancelled): stop it
                run.cancel()
                await asyncio.wait({run})
        return await self._run_with_retry(env, answer, limit, queued)

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer; raise ``SandboxError``, ``TimeoutError`` or ``VerifierError`` on
        the no-verdict failures the contract lists."""
        e = _single(resolve(env))
        result, c = await self._judged(e, model_output, time_limit, time.monotonic())
        raise_for(result, c)
        return result

    async def _safe(
        self, env: Environment, answer: str, queued: float, time_limit: float | None
    ) -> RunResult:
        """One run of a batch: every failure becomes a result without a verdict."""
        try:
            result, _ = await self._judged(env, answer, time_limit, queued)
            return result
        except SandboxUnavailableError:
            raise  # this host cannot run the sandbox: every run would fail alike (the batch raises)
        except DeepGymError as exc:
            error_type = "runtime_error" if isinstance(exc, ConfigError) else "sandbox_error"
            return RunResult.no_verdict(
                error_type, f"{type(exc).__name__}: {exc}", env_name=env.name
            )
        except OSError as exc:  # a host failure outside the backend: ours, not the policy's
            return RunResult.no_verdict(
                "runtime_error", f"{type(exc).__name__}: {exc}", env_name=env.name
            )

    # -- many runs ------------------------------------------------------------------------
    def _launch(
        self,
        envs: Sequence[Environment],
        outputs: Sequence[str],
        max_parallel: int,
        time_limit: float | None,
        progress: ProgressFn | None,
        on_done: Callable[[int], None] | None = None,
    ) -> list[asyncio.Task[RunResult]]:
        """One task per answer, in index order: the fair semaphore makes the order group-major."""
        sem = asyncio.Semaphore(max_parallel)
        queued = time.monotonic()
        done = 0

        if self.max_in_flight is not None and self._in_flight is None:
            self._in_flight = asyncio.Semaphore(self.max_in_flight)
        cap = self._in_flight if self._in_flight is not None else contextlib.nullcontext()

        async def one(i: int) -> RunResult:
            nonlocal done
            try:
                async with sem, cap:
                    result = await self._safe(envs[i], outputs[i], queued, time_limit)
            except BaseException:
                # A failure ``_safe`` does not turn into a result (a bug of ours, the host that
                # cannot sandbox at all): its group still completes, so ``stream_groups`` raises
                # it rather than wait for ever on a group that never fills.
                if on_done is not None:
                    on_done(i)
                raise
            done += 1
            if progress is not None:
                progress(done, len(outputs))
            if on_done is not None:
                on_done(i)
            return result

        return [asyncio.ensure_future(one(i)) for i in range(len(outputs))]

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
        """Score many answers, in the order of ``outputs``."""
        envs = resolve_per_answer(env, len(outputs))
        t0 = time.monotonic()
        tasks = self._launch(envs, outputs, max_parallel, time_limit, progress)
        try:
            results = list(await asyncio.gather(*tasks))
        finally:  # one raised (a misconfiguration) or the call was cancelled: end the others
            await _cancel(tasks)
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
        """Yield ``(group_index, results)`` the moment each group is complete."""
        envs = resolve_per_answer(env, len(outputs))
        groups = group_slices(len(outputs), group_size)
        group_of = {i: g for g, r in enumerate(groups) for i in r}
        left = [len(r) for r in groups]
        ready: asyncio.Queue[int] = asyncio.Queue()

        def on_done(i: int) -> None:
            g = group_of[i]
            left[g] -= 1
            if left[g] == 0:
                ready.put_nowait(g)

        tasks = self._launch(envs, outputs, max_parallel, time_limit, progress, on_done)
        try:
            for _ in groups:
                g = await ready.get()
                yield g, [tasks[i].result() for i in groups[g]]
        finally:
            await _cancel(tasks)

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """Score one answer per environment (the empty answer where ``outputs`` has none)."""
        envs = resolve_many(envs_or_suite)
        t0 = time.monotonic()
        answers = [outputs.get(e.name, "") for e in envs]
        tasks = self._launch(envs, answers, max_parallel, time_limit, progress)
        try:
            results = list(await asyncio.gather(*tasks))
        finally:
            await _cancel(tasks)
        return EvalResult(
            results=results,
            env_names=[e.name for e in envs],
            execution_time_ms=(time.monotonic() - t0) * 1000.0,
        )

    async def sandbox_stats(self) -> dict[str, Any]:
        """For the pool, its workers and the memory (RSS, KiB) each holds when idle; for any
        backend that built a compiled language's answer, its compile cache (``compile_cache``:
        hits, misses, programs, bytes); empty before the first run."""
        stats = getattr(self._backend, "stats", None)
        out = dict(stats()) if callable(stats) else {}
        programs = getattr(self._backend, "programs", None)
        if programs is not None and (programs.hits or programs.misses):
            out["compile_cache"] = programs.stats()
        return out

    # -- agent sessions ---------------------------------------------------------------------
    async def open_session(self, env: Environment) -> LocalSession:
        """A new agent session of ``env`` in a sandbox of its own on this host."""
        if self._sessions is None:
            from deepgym.sandbox.sessions import LocalSessions  # only for those who open one

            self._sessions = LocalSessions()
        return await self._sessions.open(env)

    async def close(self) -> None:
        """Release the backend (its temporary files, cgroups and workers) and end every
        session still open."""
        if self._sessions is not None:
            sessions, self._sessions = self._sessions, None
            await sessions.close()
        await self.limits.close()
        if self._backend is not None:
            backend, self._backend = self._backend, None
            await backend.close()


async def _cancel(tasks: Sequence[asyncio.Task[RunResult]]) -> None:
    """Cancel the tasks still running and wait until every one has ended. A task already being
    cancelled (by ``gather``, when the call itself was) is left to finish its clean-up: a second
    cancel would interrupt it (a sandbox killed but not reaped)."""
    for t in tasks:
        if not t.done() and not t.cancelling():
            t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
