"""SkyRL: deepgym environments as SkyRL-Gym text environments, registered with
``skyrl_gym.envs.register`` as ``deepgym`` (one-shot) and ``deepgym_session`` (multi-turn).

SkyRL's generator makes one environment per trajectory, ``skyrl_gym.make(env_class,
env_config=..., extras=row)``, where ``row`` is the dataset row less its prompt and
``env_class`` (plus ``max_turns``); it calls ``init(prompt)``, then ``step(model_output)`` until
``done``, then ``get_metrics()`` and ``close()``. A row names its environment as SkyRL's own
envs name what a step is checked against: ``reward_spec: {"method": "rule", "ground_truth":
"<environment name>"}`` (``dataset_rows`` writes them); ``extras["env"]`` also works.

- ``deepgym``: ``step`` scores the answer (the last fenced code block of the output, else all of
  it) and ends the episode; the reward is the run's score.
- ``deepgym_session``: a ``kind: "session"`` environment's shell. Each turn's command is the last
  fenced ``bash`` block of the output; its exit code and output come back as the next user
  message. A turn without such a block, or that says ``DONE`` outside every block, ends the
  episode, as does the turn budget (the environment's ``max_steps``, or SkyRL's ``max_turns`` if
  smaller); then the
  final verifier scores the work dir and that is the turn's reward (earlier turns: the per-step
  verifier's score where the environment has one, else 0.0).

SkyRL has no way for an environment to leave a trajectory out (an exception in ``step`` fails the
generator's whole batch). Without a verdict ``step`` raises ``NoVerdictError`` by default (the
engine has already retried an infrastructure failure once): a training step stops rather than
learn an outage as a 0. ``infra_failure_score: <number>`` (in ``env_config``, else in the row's
``reward_spec``) instead gives such a
trajectory that reward, as the OpenRLHF endpoint does, with ``metadata["deepgym_no_verdict"]``
true; either way ``get_metrics()`` reports ``deepgym_no_verdict`` (its mean is the share without a
verdict) and ``deepgym_score`` / ``deepgym_pass`` for judged trajectories only, and
``MaskedRate`` warns when more than 5 of a block of 100 had none. ``sandbox`` (the same two
places) picks the sandbox (default ``DEEPGYM_SANDBOX``, else ``pool``); the environments of a
process share one client.

``import deepgym`` never imports SkyRL-Gym; importing this module does, and registers both ids
(``register()`` again is a no-op).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from skyrl_gym.envs import register as skyrl_register
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
from skyrl_gym.envs.registration import registry

from deepgym import DeepGym, Environment, RunResult, load_environment
from deepgym.completions import answer_of, completion_text, turn_command
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.integrations.reward import MaskedRate, require_verdict, shared_client
from deepgym.session import Session, output_text
from deepgym.types import EnvLike

__all__ = [
    "ENV_CLASS",
    "MAX_OBSERVATION_CHARS",
    "SESSION_ENV_CLASS",
    "DeepGymSessionTextEnv",
    "DeepGymTextEnv",
    "dataset_rows",
    "register",
]

ENV_CLASS = "deepgym"
SESSION_ENV_CLASS = "deepgym_session"
MAX_OBSERVATION_CHARS = 8000
"""The most of a command's output one observation carries (its tail)."""

masked_rate = MaskedRate("skyrl")
"""Trajectories without a verdict, across this process's environments."""


def _setting(env_config: Any, key: str) -> Any:
    """``env_config[key]``: a dict, an OmegaConf ``DictConfig`` (SkyRL's), or None."""
    if env_config is None:
        return None
    if isinstance(env_config, Mapping):
        return env_config.get(key)
    return getattr(env_config, key, None)


def _failure_score(settings: Any) -> float | None:
    value = _setting(settings, "infra_failure_score")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"infra_failure_score must be a number, got {value!r}")
    return float(value)


def _target(extras: Mapping[str, Any]) -> EnvLike:
    """The environment a row names: ``reward_spec.ground_truth`` (as SkyRL's envs keep what a
    step is checked against), else ``env`` / ``env_name``."""
    spec = extras.get("reward_spec")
    candidates = [spec.get("ground_truth") if isinstance(spec, Mapping) else None]
    candidates += [extras.get("env"), extras.get("env_name")]
    for value in candidates:
        if isinstance(value, Environment) or (isinstance(value, str) and value):
            return value
    raise ConfigError(
        "the row names no environment: give reward_spec.ground_truth (or env) its name"
    )


class _Scored:
    """What both environments share: the client, the no-verdict rule, the metrics."""

    def __init__(self, env_config: Any, extras: Mapping[str, Any] | None) -> None:
        self.extras = dict(extras or {})
        target = _target(self.extras)
        self.env = target if isinstance(target, Environment) else load_environment(target)
        spec = self.extras.get("reward_spec")
        settings = {
            key: value if value is not None else _setting(spec, key)
            for key in ("infra_failure_score", "sandbox")
            for value in [_setting(env_config, key)]
        }
        self.failure_score = _failure_score(settings)
        sandbox = settings["sandbox"]
        self.client: DeepGym = shared_client(str(sandbox) if sandbox else None)
        self.result: RunResult | None = None
        """The episode's final result (timings, messages, per-test outcomes)."""

    def reward(self, result: RunResult) -> tuple[float, dict[str, Any]]:
        """The reward and metadata for the episode's final ``result`` (see the module rule)."""
        self.result = result
        masked_rate.add(not result.has_verdict)
        metadata = {
            "deepgym_env": self.env.name,
            "deepgym_no_verdict": not result.has_verdict,
            "deepgym_error_type": result.error_type,
        }
        if result.has_verdict:
            return float(result.score), metadata
        if self.failure_score is None:
            require_verdict(result)
        assert self.failure_score is not None
        return self.failure_score, metadata

    def metrics(self) -> dict[str, Any]:
        result = self.result
        if result is None:
            return {}
        if not result.has_verdict:
            return {"deepgym_no_verdict": 1.0}
        return {
            "deepgym_no_verdict": 0.0,
            "deepgym_score": float(result.score),
            "deepgym_pass": 1.0 if result.passed else 0.0,
        }


def _first_prompt(prompt: Any, task: str) -> list[dict[str, Any]]:
    """The row's prompt, else the environment's task as the user message."""
    if prompt:
        return (
            list(prompt) if not isinstance(prompt, str) else [{"role": "user", "content": prompt}]
        )
    return [{"role": "user", "content": task}]


class DeepGymTextEnv(BaseTextEnv):  # type: ignore[misc]
    """One-shot: ``step`` scores the model's answer in the row's environment and ends."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._scored = _Scored(env_config, extras)
        self.env = self._scored.env

    def init(self, prompt: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The first prompt: the row's, else the environment's task."""
        return _first_prompt(prompt, self.env.task), {"deepgym_env": self.env.name}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Score ``action``; the episode ends. Raises ``NoVerdictError`` without a verdict
        unless ``infra_failure_score`` is set."""
        self.turns += 1
        result = self._scored.client.run_one(self.env, answer_of(action))
        reward, metadata = self._scored.reward(result)
        return BaseTextEnvStepOutput(observations=[], reward=reward, done=True, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """``deepgym_no_verdict``, and for a judged episode ``deepgym_score`` and
        ``deepgym_pass`` (SkyRL averages each over the episodes that report it)."""
        return self._scored.metrics()

    @property
    def last_result(self) -> RunResult | None:
        """The episode's result, once ``step`` has scored it."""
        return self._scored.result


class DeepGymSessionTextEnv(BaseTextEnv):  # type: ignore[misc]
    """Multi-turn over a session environment's shell (see the module docstring)."""

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._scored = _Scored(env_config, extras)
        self.env = self._scored.env
        if self.env.kind != "session":
            raise ConfigError(f"{self.env.name} is a {self.env.kind} task: use {ENV_CLASS!r}")
        turns = self._scored.extras.get("max_turns")  # SkyRL's generator sets its max_turns
        self.max_turns = min(self.env.max_steps, int(turns)) if turns else self.env.max_steps
        self._session: Session | None = None

    def init(self, prompt: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Open the episode's session; the first prompt is the row's, else the task."""
        self._end()
        self._session = self._scored.client.session(self.env)
        return _first_prompt(prompt, self.env.task), {"deepgym_env": self.env.name}

    def _end(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def _finish(self, session: Session, result: RunResult | None = None) -> BaseTextEnvStepOutput:
        if result is None:
            try:
                result = session.score()
            except DeepGymError as exc:  # the provider's own failure, read by the session rule
                result = session.failure(exc)
        self._end()
        reward, metadata = self._scored.reward(result)
        return BaseTextEnvStepOutput(observations=[], reward=reward, done=True, metadata=metadata)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Run the turn's command, or score the work dir when the turn ends the episode."""
        session = self._session
        if session is None:
            raise ConfigError("the episode has ended (or not begun): call init()")
        self.turns += 1
        command = turn_command(completion_text(action))
        if command is None:
            return self._finish(session)
        try:
            out = session.exec(command, timeout=self.env.step_timeout)
            shaped = session.step_reward() if self.env.step_verifier_code else None
        except DeepGymError as exc:  # the session failed: the contract's rule gives the result
            return self._finish(session, session.failure(exc))
        if self.turns >= self.max_turns:  # the budget is spent: the work is scored as it is
            return self._finish(session)
        reward = float(shaped.score) if shaped is not None and shaped.has_verdict else 0.0
        observation = {"role": "user", "content": output_text(out, MAX_OBSERVATION_CHARS)}
        metadata = {"exit_code": out.exit_code, "timed_out": out.timed_out}
        return BaseTextEnvStepOutput(
            observations=[observation], reward=reward, done=False, metadata=metadata
        )

    def get_metrics(self) -> dict[str, Any]:
        """As ``DeepGymTextEnv.get_metrics``, plus ``deepgym_turns``."""
        return {**self._scored.metrics(), "deepgym_turns": self.turns}

    @property
    def last_result(self) -> RunResult | None:
        """The episode's final result, once scored."""
        return self._scored.result

    def close(self) -> None:
        """Close the session if the episode left one open."""
        self._end()


def dataset_rows(
    envs: Iterable[EnvLike], *, env_class: str = ENV_CLASS, data_source: str = "deepgym"
) -> list[dict[str, Any]]:
    """SkyRL dataset rows for ``envs``: ``prompt`` (the task as the user message),
    ``env_class``, ``reward_spec`` (the environment's name) and ``data_source``; write them
    with ``datasets.Dataset.from_list(rows).to_parquet(...)``."""
    rows = []
    for target in envs:
        env = target if isinstance(target, Environment) else load_environment(target)
        rows.append(
            {
                "data_source": data_source,
                "prompt": [{"role": "user", "content": env.task}],
                "env_class": env_class,
                "reward_spec": {"method": "rule", "ground_truth": env.name},
                "extra_info": {"env": env.name},
            }
        )
    return rows


def register() -> None:
    """Register ``deepgym`` and ``deepgym_session`` with SkyRL-Gym (done on import; again is a
    no-op)."""
    for env_id, cls in (
        (ENV_CLASS, "DeepGymTextEnv"),
        (SESSION_ENV_CLASS, "DeepGymSessionTextEnv"),
    ):
        if env_id not in registry:
            skyrl_register(id=env_id, entry_point=f"deepgym.integrations.skyrl:{cls}")


register()
