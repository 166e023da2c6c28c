"""verifiers: deepgym's environments as a verifiers taskset, scored by deepgym's verdicts.

verifiers 0.4 (``import verifiers.v1 as vf``) loads a taskset by id: the installed package of
that name exporting, in ``__all__``, one ``vf.Taskset`` subclass (and, optionally, the
``vf.Harness`` its agents run by default). deepgym ships that package as ``deepgym_verifiers``:
``vf-eval deepgym-verifiers --env.taskset.envs '["two_sum"]'`` (or ``--env.taskset.id
deepgym-verifiers`` in a training config).

- ``DeepGymTaskset`` yields one ``DeepGymTask`` per environment of ``config.envs`` (its task as
  the prompt, plus ``config.instruction``); ``config.sandbox`` picks deepgym's sandbox (default
  ``DEEPGYM_SANDBOX``, else ``pool``).
- ``DeepGymTask``'s ``@vf.reward`` ``deepgym`` runs the agent's last reply (its last fenced code
  block, else all of it: ``deepgym.completions``) in the sandbox and returns the score; the run's
  facts go to ``trace.info["deepgym"]``. Without a verdict it raises ``NoVerdictError``: verifiers
  records the rollout as failed (a ``TaskError``, ``trace.ok`` false) and prime-rl leaves failed
  rollouts out of training, so an outage is never learned as a 0; a ``RetryRule`` with
  ``type = "TaskError"`` and ``message = "NoVerdictError"`` retries them.
- ``DeepGymHarness`` is verifiers' chat harness (``null``): one model turn, no tools.

``load_environment(**kwargs)`` is the entry point of verifiers 0.3 (``vf.load_environment(
"deepgym-verifiers", envs=[...])``): a ``vf.SingleTurnEnv`` over the same tasks that runs the
reply in deepgym during the rollout. 0.3's ``Rubric`` scores a reward function that raises as
0.0, so there a run without a verdict is the rollout's ``vf.InfraError`` (its ``error``, which
prime-rl masks) and the reward only reads the run's score.

``import deepgym`` never imports verifiers; importing this module does (``verifiers.v1``, which
verifiers 0.3 ships too).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator, Sequence
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.harnesses.null import NullHarness

from deepgym import DeepGym, Environment, RunResult
from deepgym import load_environment as load_deepgym_env
from deepgym.completions import answer_of, completion_text
from deepgym.exceptions import ConfigError
from deepgym.integrations.reward import MaskedRate, require_verdict, shared_client

__all__ = [
    "INSTRUCTION",
    "REWARD_NAME",
    "DeepGymHarness",
    "DeepGymTask",
    "DeepGymTaskData",
    "DeepGymTaskset",
    "DeepGymTasksetConfig",
    "environments",
    "load_environment",
    "score_reply",
]

INSTRUCTION = "\n\nAnswer with the complete solution in one ```python code block."
REWARD_NAME = "deepgym"
masked_rate = MaskedRate("verifiers")
"""Rollouts without a verdict, across this process's tasks."""


def environments(names: Sequence[str]) -> list[Environment]:
    """The one-shot environments ``names`` name (a session environment is refused)."""
    if isinstance(names, str) or not names:
        raise ConfigError("envs must be a list of at least one deepgym environment name")
    out = [load_deepgym_env(name) for name in names]
    for env in out:
        if env.kind == "session":
            raise ConfigError(f"{env.name} is a session environment: not a one-shot task")
    return out


def score_reply(client: DeepGym, env: Environment, reply: Any) -> RunResult:
    """Run ``reply`` (a string or a conversation: its last assistant turn) in ``env``; the
    result, counted by the masked-rate alarm."""
    result = client.run_one(env, answer_of(completion_text(reply)))
    masked_rate.add(not result.has_verdict)
    return result


def _facts(result: RunResult) -> dict[str, Any]:
    return {
        "env": result.env_name,
        "has_verdict": result.has_verdict,
        "passed": result.passed,
        "error_type": result.error_type,
    }


class DeepGymTaskData(vf.TaskData):  # type: ignore[misc]
    """A deepgym task: the environment it runs in, as the taskset's config names it (a name,
    or a folder on this host)."""

    env: str


class DeepGymTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """``--env.taskset.*``: which environments, how they are asked and run."""

    envs: list[str] = ["two_sum"]  # noqa: RUF012 - a pydantic field
    instruction: str = INSTRUCTION
    sandbox: str | None = None


class DeepGymTask(vf.Task[DeepGymTaskData, vf.State, vf.TaskConfig]):  # type: ignore[misc]
    """One deepgym environment; scored by deepgym (``@vf.reward`` ``deepgym``)."""

    sandbox: str | None = None
    """deepgym's sandbox for this task (the taskset's ``config.sandbox``)."""

    @vf.reward  # type: ignore[untyped-decorator]
    async def deepgym(self, task: DeepGymTaskData, trace: Any) -> float:
        """The run's score; ``NoVerdictError`` (a failed rollout) without a verdict."""
        env = load_deepgym_env(task.env)
        client = shared_client(self.sandbox)
        result = await asyncio.to_thread(score_reply, client, env, trace.last_reply)
        trace.info[REWARD_NAME] = _facts(result)
        return float(require_verdict(result).score)


class DeepGymTaskset(vf.Taskset[DeepGymTask, DeepGymTasksetConfig]):  # type: ignore[misc]
    """deepgym's environments as verifiers tasks (``config.envs``, in order)."""

    def load(self) -> Iterator[DeepGymTask]:
        """One task per environment."""
        specs = list(self.config.envs)
        for spec, env in zip(specs, environments(specs), strict=True):
            data = DeepGymTaskData(
                id=env.name, name=env.name, prompt=env.task + self.config.instruction, env=spec
            )
            task = DeepGymTask(data, self.config.task)
            task.sandbox = self.config.sandbox
            yield task


class DeepGymHarness(NullHarness):  # type: ignore[misc]
    """verifiers' chat harness (``null``): one model turn, no tools; the taskset's default."""


def load_environment(
    envs: Sequence[str] = ("two_sum",),
    *,
    instruction: str = INSTRUCTION,
    sandbox: str | None = None,
    **kwargs: Any,
) -> Any:
    """verifiers 0.3's entry point: a ``vf.SingleTurnEnv`` over ``envs`` whose rollout runs the
    reply in deepgym (``vf.InfraError`` without a verdict) and whose rubric's reward is the
    run's score. ``kwargs`` go to ``SingleTurnEnv``."""
    legacy = importlib.import_module("verifiers")  # 0.3: the classic API at the top level
    if not hasattr(legacy, "SingleTurnEnv"):
        raise ConfigError(
            "load_environment is verifiers 0.3's entry point; with verifiers 0.4 use the "
            "taskset: --env.taskset.id deepgym-verifiers"
        )
    from datasets import Dataset

    specs = list(envs)
    by_spec = dict(zip(specs, environments(specs), strict=True))
    rows = [{"question": env.task + instruction, "answer": spec} for spec, env in by_spec.items()]

    single_turn: Any = legacy.SingleTurnEnv

    class DeepGymSingleTurnEnv(single_turn):  # type: ignore[misc]
        """verifiers 0.3's single-turn environment, its reply run in deepgym's sandbox as part
        of the rollout: 0.3's ``Rubric`` scores a reward function that raises as 0.0, so a
        missing verdict must be the rollout's error (``vf.InfraError``), which prime-rl
        masks, never the reward's."""

        async def add_model_response(self, state: Any, *args: Any, **kw: Any) -> None:
            await super().add_model_response(state, *args, **kw)
            reply = state["trajectory"][-1]["completion"] if state.get("trajectory") else ""
            if isinstance(reply, list):  # 0.3's messages are pydantic models
                reply = [m if isinstance(m, dict) else m.model_dump() for m in reply]
            result = await asyncio.to_thread(
                score_reply, shared_client(sandbox), by_spec[state["answer"]], reply
            )
            state[REWARD_NAME] = {**_facts(result), "score": result.score}
            if not result.has_verdict:
                raise legacy.InfraError(
                    f"deepgym has no verdict ({result.error_type}): {result.error[:300]}"
                )

    def deepgym(state: Any, **_: Any) -> float:
        """The run's score (a rollout without a verdict carries ``vf.InfraError`` instead)."""
        facts = state.get(REWARD_NAME) or {}
        return float(facts["score"]) if facts.get("has_verdict") else 0.0

    rubric = legacy.Rubric(funcs=[deepgym], weights=[1.0])
    return DeepGymSingleTurnEnv(dataset=Dataset.from_list(rows), rubric=rubric, **kwargs)
