"""Gymnasium: ``DeepGymEnv``, one task per episode, registered as ``deepgym/DeepGym-v0``; and
``DeepGymSessionEnv``, a session environment's multi-step episodes, registered as
``deepgym/DeepGymSession-v0``.

``reset`` picks a task (the one environment, or one of several by ``options={"env": name}`` or
the episode's seeded random choice) and observes its prompt; ``step(answer)`` scores the answer
(its last fenced code block, else all of it) and ends the episode. ``info["has_verdict"]`` is
false for a run without a verdict: its reward 0.0 means nothing, so mask the sample. ``step``
raises where ``DeepGym.run`` raises (the sandbox or the time limit failed before the answer was in
play); ``step_batch`` scores many answers and returns those runs as results without a verdict.

Observations and actions are ``spaces.Text`` with an explicit charset: printable ASCII and
whitespace for code, plus every character of the tasks' prompts for the observations.

``import deepgym`` never imports Gymnasium; importing this module does, and registers the id:
``gymnasium.make("deepgym/DeepGym-v0", env="two_sum")`` after it, or
``gymnasium.make("deepgym.integrations.gym:deepgym/DeepGym-v0", env="two_sum")`` without.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

from deepgym import DeepGym, Environment, RunResult, load_environment
from deepgym.completions import answer_of
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.integrations.reward import MaskedRate
from deepgym.types import EnvLike

__all__ = ["CODE_CHARSET", "ENV_ID", "SESSION_ENV_ID", "DeepGymEnv", "DeepGymSessionEnv"]

ENV_ID = "deepgym/DeepGym-v0"
CODE_CHARSET = frozenset(string.printable)
"""Printable ASCII with space, tab, newline, carriage return, vertical tab and form feed."""
MAX_ANSWER_CHARS = 65_536

Step = tuple[str, float, bool, bool, dict[str, Any]]


def _info(result: RunResult) -> dict[str, Any]:
    """What the run decided, deterministic for a given answer (timings and messages stay on
    ``DeepGymEnv.last_result``)."""
    return {
        "has_verdict": result.has_verdict,
        "score": result.score,
        "passed": result.passed,
        "error_type": result.error_type,
        "env_name": result.env_name,
        "reward_components": dict(result.reward_components),
    }


class DeepGymEnv(gymnasium.Env[str, str]):  # type: ignore[misc]
    """One-step episodes: observe a task, act with an answer, get its score."""

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(
        self,
        env: EnvLike | Sequence[EnvLike] = "two_sum",
        *,
        client: DeepGym | None = None,
        sandbox: str = "pool",
        max_answer_chars: int = MAX_ANSWER_CHARS,
        render_mode: str | None = None,
    ) -> None:
        targets = [env] if isinstance(env, str | Path | Environment) else list(env)
        if not targets:
            raise ConfigError("env must name at least one environment")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.envs = [e if isinstance(e, Environment) else load_environment(e) for e in targets]
        self.client = client if client is not None else DeepGym(sandbox=sandbox)
        self._owns_client = client is None
        self.render_mode = render_mode
        prompt_chars = frozenset("".join(e.task for e in self.envs))
        self.observation_space = spaces.Text(
            max_length=max(1, *(len(e.task) for e in self.envs)),
            min_length=0,
            charset=CODE_CHARSET | prompt_chars,
        )
        self.action_space = spaces.Text(
            max_length=max_answer_chars, min_length=0, charset=CODE_CHARSET
        )
        self.current: Environment = self.envs[0]
        self.last_result: RunResult | None = None
        """The last ``step``'s full result (timings, messages, per-test outcomes)."""

    def _pick(self, options: dict[str, Any] | None) -> Environment:
        wanted = (options or {}).get("env")
        if wanted is None:
            if len(self.envs) == 1:
                return self.envs[0]
            return self.envs[int(self.np_random.integers(len(self.envs)))]
        for e in self.envs:
            if wanted in (e, e.name):
                return e
        raise ConfigError(f"options['env'] {wanted!r} is not one of {[e.name for e in self.envs]}")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on the next environment: the observation is its task text."""
        super().reset(seed=seed)
        self.current = self._pick(options)
        self.last_result = None
        return self.current.task, {"env_name": self.current.name}

    def step(self, action: str) -> Step:
        """Score ``action`` in the current task; the episode ends. Raises where ``dg.run`` does."""
        result = self.client.run(self.current, answer_of(action))
        self.last_result = result
        return self.current.task, float(result.score), True, False, _info(result)

    def step_batch(self, actions: Sequence[str], *, max_parallel: int = 8) -> list[Step]:
        """Score many answers to the current task; a failure is a step without a verdict."""
        batch = self.client.run_batch(
            self.current, [answer_of(a) for a in actions], max_parallel=max_parallel
        )
        return [(self.current.task, float(r.score), True, False, _info(r)) for r in batch.results]

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the last result in a line; else None."""
        if self.render_mode != "ansi":
            return None
        last = self.last_result
        verdict = "no run yet" if last is None else f"score {last.score:.3f}"
        if last is not None and not last.has_verdict:
            verdict = f"no verdict ({last.error_type})"
        return f"{self.current.name}: {verdict}"

    def close(self) -> None:
        """Close the client if this environment made it."""
        if self._owns_client:
            self.client.close()
        super().close()


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="deepgym.integrations.gym:DeepGymEnv")


SESSION_ENV_ID = "deepgym/DeepGymSession-v0"
MAX_OBSERVATION_CHARS = 16_384
"""The most of a command's output an observation carries (its streams' tails)."""
DONE = "done"
"""The action that ends the agent's phase: the final verifier scores the work dir."""


def _printable(text: str, charset: frozenset[str]) -> str:
    return "".join(c if c in charset else "?" for c in text)


class DeepGymSessionEnv(gymnasium.Env[str, str]):  # type: ignore[misc]
    """Multi-step episodes of a session environment: observe its task, then each command's
    output; act with a bash command, or ``done``.

    One step per action. A command's reward is the per-step verifier's score where the
    environment has one, else 0.0. The episode is ``terminated`` on ``done`` or when the budget
    (``max_steps``, the environment's by default) is spent; then the final verifier scores the
    work dir, the reward is its score, and ``info`` carries ``has_verdict``, ``score``,
    ``passed`` and ``error_type`` (a failure of the session follows the contract's session rule:
    without a verdict, mask the sample; ``masked_rate`` warns when more than 5 of a block of 100
    episodes had none). Observations are ``spaces.Text``: the task, then
    ``exit N`` and the command's output, capped and with characters outside the charset as
    ``?``.
    """

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(
        self,
        env: EnvLike = "agent/fix_add",
        *,
        client: DeepGym | None = None,
        sandbox: str = "pool",
        max_steps: int | None = None,
        max_command_chars: int = 8192,
        render_mode: str | None = None,
        masked_rate: MaskedRate | None = None,
    ) -> None:
        self.env = env if isinstance(env, Environment) else load_environment(env)
        if self.env.kind != "session":
            raise ConfigError(f"{self.env.name} is a {self.env.kind} task: use DeepGymEnv")
        if render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.max_steps = max_steps if max_steps is not None else self.env.max_steps
        if isinstance(self.max_steps, bool) or self.max_steps < 1:
            raise ConfigError(f"max_steps must be a positive int, got {max_steps!r}")
        self.client = client if client is not None else DeepGym(sandbox=sandbox)
        self._owns_client = client is None
        self.render_mode = render_mode
        self._charset = CODE_CHARSET | frozenset(self.env.task)
        self.observation_space = spaces.Text(
            max_length=max(len(self.env.task), MAX_OBSERVATION_CHARS),
            min_length=0,
            charset=self._charset,
        )
        self.action_space = spaces.Text(
            max_length=max_command_chars, min_length=0, charset=CODE_CHARSET
        )
        self._session: Any = None
        self._steps = 0
        self.last_result: RunResult | None = None
        """The last episode's full result (timings, messages, per-test outcomes)."""
        self.masked_rate = masked_rate if masked_rate is not None else MaskedRate(SESSION_ENV_ID)
        """Episodes without a verdict: a warning when more than 5 of a block of 100 had none."""

    def _end_session(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Open a new session (closing the last one): the observation is the task."""
        super().reset(seed=seed)
        self._end_session()
        self._steps = 0
        self.last_result = None
        self._session = self.client.session(self.env)
        return self.env.task, {"env_name": self.env.name, "step": 0}

    def _finish(self, obs: str) -> Step:
        session = self._session
        try:
            result = session.score()
        except DeepGymError as exc:  # the provider's own failure, read by the session rule
            result = session.failure(exc)
        return self._ended(obs, result)

    def _ended(self, obs: str, result: RunResult) -> Step:
        self._end_session()
        self.last_result = result
        self.masked_rate.add(not result.has_verdict)
        return obs, float(result.score), True, False, {**_info(result), "step": self._steps}

    def step(self, action: str) -> Step:
        """Run ``action`` (a bash command) in the session, or end it with ``done``."""
        from deepgym.session import output_text

        if self._session is None:
            raise ConfigError("the episode has ended (or not begun): call reset()")
        self._steps += 1
        if action.strip() == DONE:
            return self._finish("")
        session = self._session
        try:
            out = session.exec(action, timeout=self.env.step_timeout)
            shaped = session.step_reward() if self.env.step_verifier_code else None
        except DeepGymError as exc:  # the session failed: the contract's rule gives the result
            return self._ended("", session.failure(exc))
        obs = _printable(output_text(out, MAX_OBSERVATION_CHARS), self._charset)
        if self._steps >= self.max_steps:  # the budget is spent: the work is scored as it is
            return self._finish(obs)
        reward = float(shaped.score) if shaped is not None and shaped.has_verdict else 0.0
        info = {"exit_code": out.exit_code, "timed_out": out.timed_out, "step": self._steps}
        return obs, reward, False, False, info

    def render(self) -> str | None:
        """With ``render_mode="ansi"``, the episode's state in a line; else None."""
        if self.render_mode != "ansi":
            return None
        last = self.last_result
        if last is None:
            return f"{self.env.name}: step {self._steps}"
        verdict = (
            f"score {last.score:.3f}" if last.has_verdict else f"no verdict ({last.error_type})"
        )
        return f"{self.env.name}: {verdict}"

    def close(self) -> None:
        """End the session, and close the client if this environment made it."""
        self._end_session()
        if self._owns_client:
            self.client.close()
        super().close()


if SESSION_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=SESSION_ENV_ID, entry_point="deepgym.integrations.gym:DeepGymSessionEnv")
