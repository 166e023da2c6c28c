"""``AsyncDeepGym`` (the core) and ``DeepGym`` (a blocking portal over it): one API, two shells.

Both are facades: every argument is checked once, here (``deepgym.validation``), and the call
goes to an engine (``deepgym.engines``): ``LocalEngine`` for ``mode="local"`` (sandboxes on this
host, through ``backend=`` or the one ``sandbox=`` names), ``RemoteEngine`` for
``mode="remote"`` (the same calls over HTTP to ``deepgym serve``) or ``RayEngine`` for
``mode="ray"`` (a Ray cluster, one pool per node). ``engine=`` takes any other ``Engine``.

``run`` raises the contract's exceptions; ``run_one``, ``run_batch``, ``stream_groups`` and
``eval`` never raise for one run: a failure becomes a result without a verdict. Bad input raises
``ConfigError`` before anything runs. Every parameter of one class is a parameter of the other
(a test compares their signatures).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from deepgym.blocking import BlockingFace
from deepgym.engines.base import Engine
from deepgym.exceptions import ConfigError
from deepgym.models import BatchResult, EvalResult, RunResult
from deepgym.sandbox import SANDBOXES
from deepgym.sandbox.base import Backend
from deepgym.scheduling import TimeLimitPolicy, group_slices
from deepgym.types import EnvLike, Envs, Group, ProgressFn
from deepgym.validation import (
    name_str,
    optional_positive_int,
    optional_seconds,
    positive_int,
    text,
)

if TYPE_CHECKING:
    from deepgym.eval.evaluate import ModelEval, Sample
    from deepgym.eval.model import ChatModel
    from deepgym.session import Agent, AsyncSession, Budget, Episode, Session
    from deepgym.store import RunStore

__all__ = ["MODES", "SANDBOXES", "AsyncDeepGym", "DeepGym"]

MODES = ("local", "remote", "ray")


def _make_engine(
    mode: str,
    sandbox: str,
    workers: int | None,
    time_limits: TimeLimitPolicy | None,
    url: str | None,
    token: str | None,
    backend: Backend | None,
    address: str | None = None,
) -> Engine:
    """The engine ``mode`` names, after checking that the other arguments fit it."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}, got {mode!r}")
    if sandbox not in SANDBOXES:
        raise ConfigError(f"sandbox must be one of {SANDBOXES}, got {sandbox!r}")
    optional_positive_int(workers, "workers")
    _check_backend(backend)
    if address is not None and mode != "ray":
        raise ConfigError("address is for mode='ray' (a Ray cluster's address)")
    if mode == "ray":
        if url is not None or token is not None or backend is not None:
            raise ConfigError("url, token and backend are not for mode='ray'")
        if workers is not None:
            raise ConfigError("mode='ray' sizes each node's pool from its CPUs: give no workers")
        from deepgym.engines.ray import RayEngine

        return RayEngine(address, sandbox=sandbox, time_limits=time_limits)
    if mode == "local":
        if url is not None or token is not None:
            raise ConfigError("url and token are for mode='remote'")
        from deepgym.engines.local import LocalEngine

        return LocalEngine(backend, sandbox=sandbox, workers=workers, time_limits=time_limits)
    if url is None:
        raise ConfigError("mode='remote' needs url= (the address of a deepgym serve)")
    if workers is not None or time_limits is not None:
        raise ConfigError(
            "workers and time_limits are the service's in mode='remote'; set them on deepgym serve"
        )
    if backend is not None:
        raise ConfigError("backend= runs answers on this host: it is for mode='local'")
    from deepgym.engines.remote import RemoteEngine

    return RemoteEngine(url, token)


def _check_backend(backend: Any) -> None:
    """``backend`` if None or an object with ``run`` and ``close`` (a ``Backend``); a sandbox's
    name given there is pointed to ``sandbox=``."""
    if backend is None or all(callable(getattr(backend, m, None)) for m in ("run", "close")):
        return
    hint = (
        f"; to choose a sandbox by name, give sandbox={backend!r}"
        if isinstance(backend, str)
        else ""
    )
    raise ConfigError(
        f"backend must be a Backend (an object with run and close), got "
        f"{type(backend).__name__}{hint}"
    )


def _meta(meta: Any) -> dict[str, str]:
    """A caller's settings kept with a run: names and values that are short texts."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise ConfigError(f"meta must map names to texts, got {type(meta).__name__}")
    return {name_str(k, "a key of meta"): text(v, f"meta[{k!r}]", 4096) for k, v in meta.items()}


def _check_outputs(outputs: Any) -> list[str]:
    if isinstance(outputs, str) or not isinstance(outputs, Sequence):
        raise ConfigError("outputs must be a sequence of answers, not one str")
    return [text(answer, f"outputs[{i}]") for i, answer in enumerate(outputs)]


def _check_answer(model_output: Any) -> str:
    return text(model_output, "model_output")


def _check_answer_map(outputs: Any) -> Mapping[str, str]:
    if not isinstance(outputs, Mapping):
        raise ConfigError("outputs must map environment names to answers")
    for key, answer in outputs.items():
        name_str(key, "a key of outputs")
        text(answer, f"outputs[{key!r}]")
    return outputs


class AsyncDeepGym:
    """Scores answers in sandboxes; the asyncio core of the API.

    ``mode='local'`` runs sandboxes on this host: the ``backend`` given (any ``Backend``, such as
    ``deepgym.sandbox.make_backend("pool", workers=4)`` or a test's fake), else the one
    ``sandbox`` names (``pool``, ``strict``, ``unsafe``; a pool of ``workers``), made at the first
    run. ``mode='remote'`` sends every call to the ``deepgym serve`` at ``url`` (with ``token`` as
    its bearer token), whose sandbox and time limits apply. ``mode='ray'`` runs them on a Ray
    cluster, one pool per node (``deepgym.engines.ray``): ``address`` attaches to a running one
    (``"auto"``, ``"ray://..."``, a trainer's), None starts a local one. ``engine`` replaces them
    all with an ``Engine`` of your own (then give none of the other settings).
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
        backend: Backend | None = None,
        engine: Engine | None = None,
        address: str | None = None,
    ) -> None:
        if engine is not None:
            given = {
                "mode": mode != "local",
                "address": address is not None,
                "sandbox": sandbox != "pool",
                "workers": workers is not None,
                "time_limits": time_limits is not None,
                "url": url is not None,
                "token": token is not None,
                "backend": backend is not None,
            }
            clash = [k for k, v in given.items() if v]
            if clash:
                raise ConfigError(f"engine= replaces {', '.join(clash)}: give one or the other")
            if not isinstance(engine, Engine):
                raise ConfigError(f"engine must be an Engine, got {type(engine).__name__}")
            self._engine = engine
        else:
            self._engine = _make_engine(
                mode, sandbox, workers, time_limits, url, token, backend, address
            )
        self.mode: str = self._engine.mode
        self.sandbox: str = str(getattr(self._engine, "sandbox", sandbox))
        self.workers = workers
        self.url = url
        self.time_limits: TimeLimitPolicy = getattr(
            self._engine, "time_limits", time_limits or TimeLimitPolicy()
        )

    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """The effective time limit for ``env``: the call's, the environment's ``time_limit``,
        or ``clamp(k * reference runtime, floor, env.timeout)`` measured once and cached.

        ``env.timeout`` caps all three: a ``time_limit`` above it is held to it (a batch may
        span environments of different caps), and each result's ``time_limit_s`` says the limit
        its run had. It is at most ``deepgym.validation.MAX_SECONDS``; a service refuses one
        above its own maximum (``deepgym serve --max-time-limit``)."""
        return await self._engine.time_limit(env, optional_seconds(time_limit, "time_limit"))

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer. Raises ``SandboxError``, ``TimeoutError`` or ``VerifierError`` on
        the no-verdict failures the contract lists; returns every other result."""
        answer = _check_answer(model_output)
        limit = optional_seconds(time_limit, "time_limit")
        return await self._engine.run(env, answer, time_limit=limit)

    async def run_one(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer with the batch rules: never raises for the run (a failure is a
        result without a verdict). The same as ``run_batch(env, [model_output]).results[0]``."""
        answers = [_check_answer(model_output)]
        batch = await self.run_batch(env, answers, max_parallel=1, time_limit=time_limit)
        return batch.results[0]

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
        answers = _check_outputs(outputs)
        group_slices(len(answers), group_size)  # checks group_size
        return await self._engine.run_batch(
            env,
            answers,
            max_parallel=positive_int(max_parallel, "max_parallel"),
            group_size=group_size,
            time_limit=optional_seconds(time_limit, "time_limit"),
            progress=progress,
        )

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
        answers = _check_outputs(outputs)
        group_slices(len(answers), group_size)  # checks group_size
        stream = self._engine.stream_groups(
            env,
            answers,
            group_size=group_size,
            max_parallel=positive_int(max_parallel, "max_parallel"),
            time_limit=optional_seconds(time_limit, "time_limit"),
            progress=progress,
        )
        async with aclosing(stream):
            async for item in stream:
                yield item

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
        if not isinstance(envs_or_suite, str | Sequence):
            raise ConfigError(
                "envs_or_suite must be a suite's name or a sequence of environments, "
                f"got {type(envs_or_suite).__name__}"
            )
        return await self._engine.eval(
            envs_or_suite,
            _check_answer_map(outputs),
            max_parallel=positive_int(max_parallel, "max_parallel"),
            time_limit=optional_seconds(time_limit, "time_limit"),
            progress=progress,
        )

    async def eval_model(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        model: ChatModel,
        *,
        samples: int = 1,
        k: Sequence[int] = (1,),
        pass_hat: Sequence[int] = (),
        max_parallel: int = 8,
        time_limit: float | None = None,
        dedupe: bool = True,
        store: RunStore | None = None,
        resume: str | None = None,
        progress: ProgressFn | None = None,
        on_sample: Callable[[Sample], None] | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> ModelEval:
        """Sample ``samples`` answers per environment from ``model`` (a ``ChatModel``), score
        each as it arrives, and report unbiased pass@k for each ``k`` (and pass^k for each of
        ``pass_hat``); a sample the model server did not give has no verdict, never a 0.

        Scoring is per problem: with ``dedupe`` an answer identical to one already scored for
        the same environment shares that run's result instead of running again.

        With ``store`` (a ``RunStore``), every sample's text and result are recorded as they
        come; ``resume`` (a run id there) finishes a stopped eval without asking the model again
        for a sample it has (``deepgym.eval.evaluate``); ``meta``, the caller's own settings
        (the command line's output files), is kept with the run for a resume to read."""
        from deepgym.envs.registry import resolve_many
        from deepgym.eval.evaluate import evaluate_model
        from deepgym.eval.model import ChatModel

        if not isinstance(model, ChatModel):
            raise ConfigError(f"model must be a ChatModel, got {type(model).__name__}")
        envs = resolve_many(envs_or_suite)
        return await evaluate_model(
            self,
            envs,
            model,
            samples=positive_int(samples, "samples"),
            k=k,
            pass_hat=pass_hat,
            max_parallel=positive_int(max_parallel, "max_parallel"),
            time_limit=optional_seconds(time_limit, "time_limit"),
            dedupe=bool(dedupe),
            source=envs_or_suite if isinstance(envs_or_suite, str) else "",
            store=store,
            resume=resume,
            progress=progress,
            on_sample=on_sample,
            meta=_meta(meta),
        )

    async def session(self, env: EnvLike) -> AsyncSession:
        """Open an agent session of ``env`` (a ``kind: "session"`` environment): a sandbox of
        its own, with a persistent shell, files, and ``score`` (``deepgym.session``)."""
        from deepgym.envs.registry import resolve
        from deepgym.session import AsyncSession

        environment = resolve(env)
        if environment.kind != "session":
            raise ConfigError(
                f"env {environment.name!r} is a {environment.kind} task, not a session"
            )
        open_session = getattr(self._engine, "open_session", None)
        if open_session is None:  # an engine of one's own may have no sessions
            raise ConfigError(f"this client's engine ({self.mode!r}) has no agent sessions")
        return AsyncSession(await open_session(environment))

    async def run_episode(
        self,
        env: EnvLike,
        agent: Agent,
        *,
        budget: Budget | None = None,
        store: RunStore | None = None,
    ) -> Episode:
        """One episode of ``agent`` in a session of ``env``: the result and the trajectory. A
        failure of the session is read by ``deepgym.session.failure_result``. With ``store``
        (a ``RunStore``), its trace is recorded as it happens (``deepgym episodes``)."""
        from deepgym.envs.registry import resolve
        from deepgym.session import Budget, run_episode_async

        environment = resolve(env)
        if not callable(agent):
            raise ConfigError(f"agent must be callable, got {type(agent).__name__}")
        return await run_episode_async(
            lambda: self.session(environment), environment, agent, budget or Budget(), store
        )

    async def sandbox_stats(self) -> dict[str, Any]:
        """This client's local sandbox in figures: for the pool, its workers and the memory
        (RSS, KiB) each holds when idle; empty before the first run, or for a remote client."""
        return await self._engine.sandbox_stats()

    async def close(self) -> None:
        """Release the engine (its sandboxes, temporary files and cgroups, or the connection)."""
        await self._engine.close()

    async def __aenter__(self) -> AsyncDeepGym:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


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
        backend: Backend | None = None,
        engine: Engine | None = None,
        address: str | None = None,
    ) -> None:
        self._core = AsyncDeepGym(
            mode,
            sandbox=sandbox,
            workers=workers,
            time_limits=time_limits,
            url=url,
            token=token,
            backend=backend,
            engine=engine,
            address=address,
        )
        self.mode = self._core.mode
        self.sandbox = self._core.sandbox
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

    def run_one(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """See ``AsyncDeepGym.run_one``."""
        return self._call(self._core.run_one(env, model_output, time_limit=time_limit))

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

    def eval_model(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        model: ChatModel,
        *,
        samples: int = 1,
        k: Sequence[int] = (1,),
        pass_hat: Sequence[int] = (),
        max_parallel: int = 8,
        time_limit: float | None = None,
        dedupe: bool = True,
        store: RunStore | None = None,
        resume: str | None = None,
        progress: ProgressFn | None = None,
        on_sample: Callable[[Sample], None] | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> ModelEval:
        """See ``AsyncDeepGym.eval_model``."""
        return self._call(
            self._core.eval_model(
                envs_or_suite,
                model,
                samples=samples,
                k=k,
                pass_hat=pass_hat,
                max_parallel=max_parallel,
                time_limit=time_limit,
                dedupe=dedupe,
                store=store,
                resume=resume,
                progress=progress,
                on_sample=on_sample,
                meta=meta,
            )
        )

    def session(self, env: EnvLike) -> Session:
        """See ``AsyncDeepGym.session``: the same session, with blocking methods."""
        from deepgym.session import Session

        return Session(self._call(self._core.session(env)), self)

    def run_episode(
        self,
        env: EnvLike,
        agent: Agent,
        *,
        budget: Budget | None = None,
        store: RunStore | None = None,
    ) -> Episode:
        """See ``AsyncDeepGym.run_episode``."""
        return self._call(self._core.run_episode(env, agent, budget=budget, store=store))

    def sandbox_stats(self) -> dict[str, Any]:
        """See ``AsyncDeepGym.sandbox_stats``."""
        return self._call(self._core.sandbox_stats())
