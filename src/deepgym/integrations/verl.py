"""verl: ``compute_score`` (sync and async), the ``deepgym_single_turn`` agent loop, the
``deepgym_agent`` multi-turn loop over agent sessions, and ``make_verl_reward_fn`` for custom
loops.

verl calls a custom reward function as ``compute_score(data_source=, solution_str=, ground_truth=,
extra_info=, **reward_kwargs)``; a dict result needs ``score`` and the same keys for every sample
(they become columns). Which environment runs a sample: ``extra_info["env"]`` (or ``env_name``),
else the ``env`` reward kwarg, else ``DEEPGYM_ENV``, else a ``data_source`` of the form
``deepgym/<name>``. The answer is the response's last fenced code block, else its whole text.

What each form does with a run without a verdict (the contract):

- ``compute_score`` / ``compute_score_async`` raise ``NoVerdictError``: verl's v1 trainer drops the
  sample; the legacy trainer stops, so use the agent loop there.
- The ``deepgym_single_turn`` agent loop (verl's single-turn loop, then the score) sets
  ``reward_score``, so verl skips its own reward step. Without a verdict it raises
  ``NoVerdictError`` under the v1 trainer (``trainer.use_v1``: the session is dropped) and, under
  the legacy trainer, masks the sample (``response_mask`` all 0: no gradient) with reward 0. Each
  sample logs ``score``, ``acc`` and ``error`` (1.0 without a verdict); ``MaskedRate`` watches
  the share masked or dropped.
- The ``deepgym_agent`` loop (``DeepGymAgentLoop``: one session of a ``kind: "session"``
  environment per rollout, the final verifier's score as ``reward_score``) does the same as
  ``deepgym_single_turn``; a session that failed follows the contract's session rule (no
  verdict where the failure is ours, the agent's 0 where its own commands caused it).
- ``make_verl_reward_fn`` returns ``None``.

verl is imported only when an agent loop class is first looked up (verl's registry and hydra do
that); the score functions never import it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from deepgym import AsyncDeepGym, DeepGym, Environment, NoVerdictError, RunResult
from deepgym.completions import answer_of
from deepgym.exceptions import DeepGymError
from deepgym.integrations.reward import MaskedRate, require_verdict, warn_unscored
from deepgym.types import EnvLike
from deepgym.validation import optional_positive_int, positive_int

__all__ = [
    "AGENT_LOOP_CONFIG",
    "AGENT_LOOP_NAME",
    "AGENT_NAME",
    "FEEDBACK_CHARS",
    "DeepGymAgentLoop",  # noqa: F822 - made on first use by __getattr__ (imports verl)
    "DeepGymSingleTurnAgentLoop",  # noqa: F822 - made on first use by __getattr__ (imports verl)
    "compute_score",
    "compute_score_async",
    "environment_of",
    "make_verl_reward_fn",
    "score_dict",
]

AGENT_LOOP_NAME = "deepgym_single_turn"
AGENT_LOOP_CONFIG = Path(__file__).resolve().with_name("verl_agent_loops.yaml")
"""For ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: registers both agent loops."""
AGENT_NAME = "deepgym_agent"
"""The multi-turn loop over agent sessions."""
FEEDBACK_CHARS = 4000
"""The most of a command's output (its tail) sent back to the model."""

DATA_SOURCE_PREFIX = "deepgym/"

_lock = threading.Lock()
_sync_client: DeepGym | None = None
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncDeepGym] = (
    weakref.WeakKeyDictionary()
)


def _sandbox() -> str:
    return os.environ.get("DEEPGYM_SANDBOX") or "pool"


def _client() -> DeepGym:
    global _sync_client
    with _lock:
        if _sync_client is None:
            _sync_client = DeepGym(sandbox=_sandbox())
        return _sync_client


def _async_client() -> AsyncDeepGym:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = _async_clients[loop] = AsyncDeepGym(sandbox=_sandbox())
    return client


def environment_of(
    data_source: Any = None, extra_info: Any = None, env: EnvLike | None = None
) -> EnvLike:
    """The environment of one sample (see the module docstring for the order)."""
    if isinstance(extra_info, Mapping):
        for key in ("env", "env_name"):
            value = extra_info.get(key)
            if isinstance(value, str | Path | Environment) and value:
                return value
    if env is not None:
        return env
    if default := os.environ.get("DEEPGYM_ENV"):
        return default
    if isinstance(data_source, str) and data_source.startswith(DATA_SOURCE_PREFIX):
        return data_source[len(DATA_SOURCE_PREFIX) :]
    raise NoVerdictError(
        f"no environment for data_source {data_source!r}: set extra_info['env'], the env reward "
        "kwarg, DEEPGYM_ENV, or a data_source 'deepgym/<name>'"
    )


def score_dict(result: RunResult) -> dict[str, float]:
    """The keys every sample reports (verl turns them into columns): same keys, always."""
    return {
        "score": result.score if result.has_verdict else 0.0,
        "acc": 1.0 if result.passed else 0.0,
        "error": 0.0 if result.has_verdict else 1.0,
    }


def compute_score(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Any = None,
    *,
    env: EnvLike | None = None,
    return_dict: bool = True,
    **kwargs: Any,
) -> dict[str, float] | float:
    """verl's custom reward function; raises ``NoVerdictError`` without a verdict."""
    target = environment_of(data_source, extra_info, env)
    result = _client().run_one(target, answer_of(solution_str))
    require_verdict(result)
    return score_dict(result) if return_dict else result.score


async def compute_score_async(
    data_source: Any = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Any = None,
    *,
    env: EnvLike | None = None,
    return_dict: bool = True,
    **kwargs: Any,
) -> dict[str, float] | float:
    """``compute_score`` as an ``async def`` (verl awaits it in its reward loop)."""
    target = environment_of(data_source, extra_info, env)
    result = require_verdict(await _async_client().run_one(target, answer_of(solution_str)))
    return score_dict(result) if return_dict else result.score


def make_verl_reward_fn(
    env: EnvLike | None = None, *, client: DeepGym | None = None
) -> Callable[..., float | None]:
    """A ``compute_score``-shaped function for custom loops: the score, or ``None`` without a
    verdict (also for a sample whose environment cannot be found or run)."""
    own = client

    def reward_fn(
        data_source: Any = None,
        solution_str: str = "",
        ground_truth: Any = None,
        extra_info: Any = None,
        **kwargs: Any,
    ) -> float | None:
        target: EnvLike | None = None
        try:
            target = environment_of(data_source, extra_info, kwargs.get("env", env))
            dg = own if own is not None else _client()
            result = dg.run_one(target, answer_of(solution_str))
        except Exception as exc:  # one bad sample is None, never a raise out of the loop
            warn_unscored("verl reward_fn", target, exc)
            return None
        return result.score if result.has_verdict else None

    return reward_fn


def _define_single_turn() -> type:
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    @register(AGENT_LOOP_NAME)
    class DeepGymSingleTurnAgentLoop(SingleTurnAgentLoop):  # type: ignore[misc]
        """verl's single-turn loop, scored by deepgym: ``reward_score`` is set, so verl skips
        its reward step. No verdict: dropped under the v1 trainer, masked under the legacy one."""

        masked_rate = MaskedRate("verl deepgym_single_turn")

        def __init__(self, *args: Any, env: EnvLike | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.deepgym_env = env

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            output = await super().run(sampling_params, **kwargs)
            return await self.apply_reward(output, **kwargs)

        def under_v1(self) -> bool:
            return bool(OmegaConf.select(self.config, "trainer.use_v1", default=False))

        async def apply_reward(self, output: AgentLoopOutput, **kwargs: Any) -> AgentLoopOutput:
            """Score ``output``'s response and set its reward (see the class docstring)."""
            try:
                target = environment_of(
                    kwargs.get("data_source"), kwargs.get("extra_info"), self.deepgym_env
                )
                text = self.tokenizer.decode(output.response_ids, skip_special_tokens=True)
                result = await _async_client().run_one(target, answer_of(text))
            except NoVerdictError as exc:
                result = RunResult.no_verdict("runtime_error", str(exc))
            self.masked_rate.add(not result.has_verdict)
            if not result.has_verdict:
                if self.under_v1():
                    raise NoVerdictError(
                        f"no verdict ({result.error_type}): {result.error[:300]}", result=result
                    )
                output.response_mask = [0] * len(output.response_mask)
            output.reward_score = score_dict(result)["score"]
            output.extra_fields["reward_extra_info"] = score_dict(result)
            return output

    return DeepGymSingleTurnAgentLoop


def _define_agent() -> type:
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

    from deepgym.completions import turn_command
    from deepgym.session import failure_result, output_text

    @register(AGENT_NAME)
    class DeepGymAgentLoop(AgentLoopBase):  # type: ignore[misc]
        """verl's multi-turn agent loop over a deepgym session (one session per rollout).

        Each assistant turn's last fenced ``bash`` block runs in the session's shell and its
        output comes back as a ``user`` message (``response_mask`` 0); a turn with no such block,
        or ``DONE``, ends the agent's phase, as do the environment's ``max_steps`` (or
        ``max_turns``, the smaller) and ``response_length``. The final verifier's score is the
        ``reward_score``. Without a verdict: dropped under the v1 trainer, masked under the
        legacy one, logged as ``error`` 1.0."""

        masked_rate = MaskedRate("verl deepgym_agent")

        def __init__(
            self,
            *args: Any,
            env: EnvLike | None = None,
            max_turns: int | None = None,
            feedback_chars: int = FEEDBACK_CHARS,
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.deepgym_env = env
            self.max_turns = optional_positive_int(max_turns, "max_turns")
            self.feedback_chars = positive_int(feedback_chars, "feedback_chars")
            self.response_length = int(self.rollout_config.response_length)

        def under_v1(self) -> bool:
            return bool(OmegaConf.select(self.config, "trainer.use_v1", default=False))

        async def run(
            self, sampling_params: dict[str, Any], priority: int = 0, **kwargs: Any
        ) -> AgentLoopOutput:
            messages: list[dict[str, Any]] = [dict(m) for m in kwargs["raw_prompt"]]
            ids: list[int] = list(await self.ct_build_initial_tokens(messages))
            mask: list[int] = []
            logprobs: list[float] | None = None
            request_id = uuid.uuid4().hex
            turns, metrics = 0, {"num_preempted": -1}
            result: RunResult | None = None
            session: Any = None
            env: Environment | None = None
            try:
                target = environment_of(
                    kwargs.get("data_source"), kwargs.get("extra_info"), self.deepgym_env
                )
                session = await _async_client().session(target)  # refuses a non-session
                env = session.env
            except DeepGymError as exc:  # never acted: no verdict
                result = failure_result(exc, None, acted=False)  # the sample is empty, masked
            budget = 0 if env is None else min(env.max_steps, self.max_turns or env.max_steps)
            try:
                while result is None:
                    out = await self.server_manager.generate(
                        request_id=request_id,
                        prompt_ids=ids,
                        sampling_params=sampling_params,
                    )
                    merged, mask, logprobs = await self.ct_merge_assistant_token(
                        ids, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs
                    )
                    ids = merged.token_ids
                    turns += 1
                    text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                    command = turn_command(text)
                    if command is None or len(mask) >= self.response_length:
                        break
                    assert env is not None  # a session is open
                    try:
                        done = await session.exec(command, env.step_timeout)
                    except DeepGymError as exc:
                        result = session.failure(exc)
                        break
                    if turns >= budget:
                        break
                    before = [*messages, {"role": "assistant", "content": text}]
                    messages = [
                        *before,
                        {"role": "user", "content": output_text(done, self.feedback_chars)},
                    ]
                    merged, grown, grown_lp = await self.ct_merge_context_msg(
                        before, messages, ids, mask, logprobs
                    )
                    if len(grown) >= self.response_length:  # no room for another turn
                        break
                    ids, mask, logprobs = merged.token_ids, grown, grown_lp
                if result is None:
                    result = await session.score()  # a failure is read by the session rule
            finally:
                if session is not None:
                    await session.close()
            cut = len(ids) - len(mask)  # the prompt, then the response (as verl's own loops)
            return self._output(ids[:cut], ids[cut:], mask, logprobs, turns, metrics, result)

        def _output(
            self,
            prompt_ids: list[int],
            response: list[int],
            mask: list[int],
            logprobs: list[float] | None,
            turns: int,
            metrics: dict[str, Any],
            result: RunResult,
        ) -> AgentLoopOutput:
            n = self.response_length
            self.masked_rate.add(not result.has_verdict)
            if not result.has_verdict:
                if self.under_v1():
                    raise NoVerdictError(
                        f"no verdict ({result.error_type}): {result.error[:300]}", result=result
                    )
                mask = [0] * len(mask)
            scores = score_dict(result)
            return AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=response[:n],
                response_mask=mask[:n],
                response_logprobs=logprobs[:n] if logprobs else None,
                reward_score=scores["score"],
                num_turns=2 * turns,
                metrics=metrics,
                extra_fields={
                    "reward_extra_info": scores,
                    "turn_scores": [],
                    "tool_rewards": [],
                },
            )

    return DeepGymAgentLoop


_agent_loop_class: type | None = None
_agent_class: type | None = None


def __getattr__(name: str) -> Any:
    global _agent_loop_class, _agent_class
    if name == "DeepGymSingleTurnAgentLoop":
        with _lock:
            if _agent_loop_class is None:
                _agent_loop_class = _define_single_turn()
        return _agent_loop_class
    if name == "DeepGymAgentLoop":
        with _lock:
            if _agent_class is None:
                _agent_class = _define_agent()
        return _agent_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
