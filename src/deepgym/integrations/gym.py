"""Gymnasium: ``DeepGymEnv``, one task per episode, registered as ``deepgym/DeepGym-v0``.

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
from deepgym.exceptions import ConfigError
from deepgym.types import EnvLike

__all__ = ["CODE_CHARSET", "ENV_ID", "DeepGymEnv"]

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
