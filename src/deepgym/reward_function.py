"""Reward functions for RL trainers: ``RewardFunction`` (blocking) and ``AsyncRewardFunction``.

Each call scores a batch of completions and returns one value per completion, in order: the
run's score where it has a verdict, ``None`` where it has none (the contract: leave it out, never
train on it as a 0). Invariants:

- The answer is the code of the completion's last assistant turn (``deepgym.completions``).
- One bad sample never raises out of a trainer's step: an exception while reading it, resolving
  its environment or scoring it makes that sample ``None``, never a 0. A call logs once what had
  no verdict, counted by cause: a warning, or an error when no sample of the call got a verdict.
  A call whose every sample failed with the same misconfiguration (``is_misconfiguration``: a
  refused token, an unreachable service, an unknown environment, a sandbox this host cannot run)
  raises it: every reward of the step would be ``None``.
- A call keeps its own deadline (``timeout``): a sample not judged by then is ``None``. Its run is
  not cancelled; it finishes in the background within its own time limit.
- Unknown keyword arguments are accepted and ignored (trainers pass their dataset columns). A
  column named ``env`` or ``env_name`` (``env_keys``) names each sample's environment.

``RewardFunction`` drives ``AsyncRewardFunction`` through a blocking portal: one core, two shells.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from deepgym.blocking import BlockingFace
from deepgym.client import AsyncDeepGym
from deepgym.completions import answer_of, prompt_text
from deepgym.envs.registry import resolve
from deepgym.exceptions import ConfigError, is_misconfiguration
from deepgym.models import Environment, RunResult
from deepgym.text import one_line, short_cause
from deepgym.types import EnvLike
from deepgym.validation import optional_positive_int, optional_seconds, positive_int

__all__ = ["ENV_KEYS", "AsyncRewardFunction", "RewardFunction", "as_coroutine_function"]

ENV_KEYS = ("env", "env_name")
"""Keyword arguments (dataset columns) that name each sample's environment, in priority order."""

log = logging.getLogger("deepgym.rewards")


def _column(kwargs: Mapping[str, Any], keys: Sequence[str], n: int) -> list[Any]:
    for key in keys:
        value = kwargs.get(key)
        if value is None:
            continue
        if isinstance(value, str | Path | Environment):
            return [value] * n
        if isinstance(value, Sequence) and len(value) == n:
            return list(value)
        raise ConfigError(f"column {key!r} must name one environment or one per completion ({n})")
    return [None] * n


def _judged(result: RunResult | None) -> TypeGuard[RunResult]:
    return result is not None and result.has_verdict and math.isfinite(result.score)


def _verdict_score(result: RunResult | None) -> float | None:
    return result.score if _judged(result) else None


def _cause(result: RunResult | None, exc: BaseException | None) -> str:
    if exc is not None:
        return f"{type(exc).__name__}: {one_line(str(exc), 300)}"
    if result is None:
        return "no result"
    return f"{result.error_type}: {short_cause(result.error)}"


def _report(
    out: Sequence[RunResult | None],
    raised: Mapping[int, BaseException],
    late: int,
    timeout: float | None,
) -> None:
    """Say once per call what had no verdict, counted by cause (never a line per sample).

    A call in which no sample got a verdict is an error in the log; one in which every sample
    failed with the same misconfiguration (``is_misconfiguration``: a refused token, a service
    that cannot be reached, an unknown environment, a sandbox this host cannot run) raises it:
    training on a step whose every reward is None would go on unnoticed.
    """
    n = len(out)
    causes: dict[str, list[int]] = {}
    for i, r in enumerate(out):
        if i in raised or (r is not None and not _judged(r)):
            causes.setdefault(_cause(r, raised.get(i)), []).append(i)
    if late:
        causes[f"missed the call's {timeout:.1f} s deadline"] = [
            i for i, r in enumerate(out) if r is None and i not in raised
        ]
    if not causes:
        return
    errors = list(raised.values())
    if len(errors) == n and len(causes) == 1 and all(is_misconfiguration(e) for e in errors):
        raise errors[0]
    said = "; ".join(f"{cause} ({_samples(idx, n)})" for cause, idx in causes.items())
    missing = sum(len(idx) for idx in causes.values())
    if missing == n:
        log.error("no sample of this call got a verdict (all %d left out): %s", n, said)
    else:
        log.warning("%d of %d samples got no verdict (left out): %s", missing, n, said)


def _samples(indices: Sequence[int], n: int) -> str:
    shown = ", ".join(map(str, indices[:5])) + (", ..." if len(indices) > 5 else "")
    return f"{len(indices)} of {n}: sample{'s' if len(indices) > 1 else ''} {shown}"


class AsyncRewardFunction:
    """Scores completions in sandboxes; ``await reward(completions=...)`` -> ``list[float | None]``.

    ``env`` is the environment of every sample unless a column in ``env_keys`` names another;
    ``environments`` maps names used in that column to environments (other names load through
    ``load_environment``). ``timeout`` is the deadline of one call in seconds (None: none).
    ``prepend_prompt``: an answer without a code block is the prompt followed by the completion.
    """

    def __init__(
        self,
        env: EnvLike | None = None,
        *,
        environments: Mapping[str, EnvLike] | None = None,
        client: AsyncDeepGym | None = None,
        sandbox: str = "pool",
        workers: int | None = None,
        max_parallel: int = 8,
        timeout: float | None = 300.0,
        env_keys: Sequence[str] = ENV_KEYS,
        prepend_prompt: bool = False,
        name: str = "deepgym",
    ) -> None:
        positive_int(max_parallel, "max_parallel")
        optional_positive_int(workers, "workers")
        timeout = optional_seconds(timeout, "timeout")
        if isinstance(env_keys, str):
            env_keys = (env_keys,)
        self.env = resolve(env) if env is not None else None
        self.environments = dict(environments or {})
        self.sandbox = sandbox
        self.workers = workers
        self.max_parallel = max_parallel
        self.timeout = timeout
        self.env_keys = tuple(env_keys)
        self.prepend_prompt = prepend_prompt
        self.__name__ = name
        self._client = client
        self._owns_client = client is None
        self._env_cache: dict[str, Environment] = {}
        self._sem: asyncio.Semaphore | None = None
        self._stragglers: set[asyncio.Task[RunResult]] = set()

    # -- pickling: a copy starts without the live client (TRL and verl may copy the function) --
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._owns_client:
            state["_client"] = None
        state.update(_sem=None, _stragglers=set())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _get_client(self) -> AsyncDeepGym:
        if self._client is None:
            self._client = AsyncDeepGym(sandbox=self.sandbox, workers=self.workers)
        return self._client

    def _env_for(self, value: Any) -> Environment:
        if value is None:
            if self.env is None:
                keys = ", ".join(self.env_keys)
                raise ConfigError(f"no environment: pass env=..., or a column named one of {keys}")
            return self.env
        if isinstance(value, Environment):
            return value
        if isinstance(value, str) and value in self.environments:
            return resolve(self.environments[value])
        key = str(value)
        if key not in self._env_cache:
            self._env_cache[key] = resolve(value)
        return self._env_cache[key]

    def _answer(self, completion: Any, prompt: Any) -> str:
        prefix = prompt_text(prompt) if self.prepend_prompt else ""
        return answer_of(completion, prefix)

    async def _one(self, env: Environment, answer: str) -> RunResult:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_parallel)
        async with self._sem:
            return await self._get_client().run_one(env, answer)

    def _keep(self, task: asyncio.Task[RunResult]) -> None:
        self._stragglers.add(task)

        def done(t: asyncio.Task[RunResult]) -> None:
            self._stragglers.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("a sample scored after its deadline failed: %r", t.exception())

        task.add_done_callback(done)

    async def results(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[RunResult | None]:
        """One ``RunResult`` per completion; ``None`` where the sample could not be scored
        (an error reading it, or the deadline)."""
        if completions is None or isinstance(completions, str | Mapping):
            raise ConfigError("completions must be a list with one completion per sample")
        n = len(completions)
        if prompts is not None and len(prompts) != n:
            raise ConfigError(f"prompts has {len(prompts)} items, completions {n}")
        column = _column(kwargs, self.env_keys, n)
        tasks: dict[int, asyncio.Task[RunResult]] = {}
        raised: dict[int, BaseException] = {}
        for i, completion in enumerate(completions):
            try:
                env = self._env_for(column[i])
                answer = self._answer(completion, prompts[i] if prompts is not None else None)
                tasks[i] = asyncio.ensure_future(self._one(env, answer))
            except Exception as exc:  # one bad sample is None, never a raise out of the step
                raised[i] = exc
        if tasks:
            await asyncio.wait(list(tasks.values()), timeout=self.timeout)
        out: list[RunResult | None] = [None] * n
        late = 0
        for i, task in tasks.items():
            if not task.done():
                late += 1
                self._keep(task)
            elif task.cancelled():
                raised[i] = asyncio.CancelledError("its run was cancelled")
            elif (err := task.exception()) is not None:
                raised[i] = err
            else:
                out[i] = task.result()
        _report(out, raised, late, self.timeout)
        return out

        return out

    async def __call__(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """The reward of each completion: its score, or ``None`` without a verdict."""
        scores = [_verdict_score(r) for r in await self.results(completions, prompts, **kwargs)]
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and scores:
            share = sum(s is None for s in scores) / len(scores)
            try:
                log_metric(f"{self.__name__}/no_verdict_frac", share)
            except Exception as exc:  # a logging hook never breaks a step
                log.warning("log_metric failed: %r", exc)
        return scores

    async def shaped_rewards(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, float] | None]:
        """The verifier's ``reward_components`` of each completion; ``None`` without a verdict."""
        results = await self.results(completions, prompts, **kwargs)
        return [dict(r.reward_components) if _judged(r) else None for r in results]

    async def per_test_rewards(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, float] | None]:
        """``{'test_0': 1.0, ..., 'overall': score}`` per completion; ``None`` without a verdict."""
        results = await self.results(completions, prompts, **kwargs)
        return [r.per_test_rewards() if _judged(r) else None for r in results]

    async def close(self) -> None:
        """Wait for runs past their deadline, then release the client if this function made it."""
        if self._stragglers:
            await asyncio.gather(*list(self._stragglers), return_exceptions=True)
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def __aenter__(self) -> AsyncRewardFunction:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class RewardFunction(BlockingFace):
    """The blocking reward function: ``reward(completions=...)`` -> ``list[float | None]``.

    Same parameters and methods as ``AsyncRewardFunction``, which it drives through a portal (an
    event loop in a daemon thread), so it works from any thread and inside a running event loop.
    """

    _core: AsyncRewardFunction

    def __init__(
        self,
        env: EnvLike | None = None,
        *,
        environments: Mapping[str, EnvLike] | None = None,
        client: AsyncDeepGym | None = None,
        sandbox: str = "pool",
        workers: int | None = None,
        max_parallel: int = 8,
        timeout: float | None = 300.0,
        env_keys: Sequence[str] = ENV_KEYS,
        prepend_prompt: bool = False,
        name: str = "deepgym",
    ) -> None:
        self._core = AsyncRewardFunction(
            env,
            environments=environments,
            client=client,
            sandbox=sandbox,
            workers=workers,
            max_parallel=max_parallel,
            timeout=timeout,
            env_keys=env_keys,
            prepend_prompt=prepend_prompt,
            name=name,
        )
        self.__name__ = name
        super().__init__()

    def __getstate__(self) -> dict[str, Any]:
        return {"_core": self._core, "__name__": self.__name__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _portal=None, _lock=threading.Lock())

    @property
    def env(self) -> Environment | None:
        """The environment of every sample no column names."""
        return self._core.env

    @property
    def timeout(self) -> float | None:
        """The deadline of one call in seconds (None: none)."""
        return self._core.timeout

    def __call__(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """See ``AsyncRewardFunction.__call__``."""
        return self._call(self._core(completions, prompts, **kwargs))

    def results(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[RunResult | None]:
        """See ``AsyncRewardFunction.results``."""
        return self._call(self._core.results(completions, prompts, **kwargs))

    def shaped_rewards(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, float] | None]:
        """See ``AsyncRewardFunction.shaped_rewards``."""
        return self._call(self._core.shaped_rewards(completions, prompts, **kwargs))

    def per_test_rewards(
        self,
        completions: Sequence[Any] | None = None,
        prompts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, float] | None]:
        """See ``AsyncRewardFunction.per_test_rewards``."""
        return self._call(self._core.per_test_rewards(completions, prompts, **kwargs))


def as_coroutine_function(
    reward: AsyncRewardFunction,
) -> Callable[..., Coroutine[Any, Any, list[float | None]]]:
    """A plain ``async def`` calling ``reward``: trainers that check
    ``inspect.iscoroutinefunction`` (TRL before 1.14) see it as async."""

    async def reward_fn(
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        return await reward(completions, prompts, **kwargs)

    reward_fn.__name__ = reward.__name__
    reward_fn.__qualname__ = reward.__name__
    return reward_fn
