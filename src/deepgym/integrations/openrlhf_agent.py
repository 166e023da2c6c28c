"""OpenRLHF's multi-turn agent over deepgym sessions: one session per rollout.

OpenRLHF's agent executor (``--agent_func_path``) makes one ``AgentInstance`` per prompt, calls
``reset({"observation": prompt, "label": label})`` once, then ``step({"observation_text",
"action_text", "label", "sampling_params"})`` after each generation, and reads ``rewards`` (a
tensor), ``scores``, ``environment_feedback`` (text appended to the conversation), ``done`` and
``extra_logs`` from each step's reply.

``session_agent_instance(base)`` makes that class on OpenRLHF's ``AgentInstanceBase``:

- ``reset`` opens a session of the environment (``env=``, else the label: a session environment's
  name, or an object with ``env`` / ``env_name``) and returns the prompt as the observation;
- ``step`` takes the last fenced ``bash`` block of the model's text as a command, runs it, and
  returns its exit code and output as the feedback (reward 0.0, not done); a turn with no such
  block, or ``DONE`` in it, or the environment's ``max_steps`` reached, ends the agent's phase:
  the final verifier scores the work dir and its score is the reward (``done``);
- a session that failed follows the contract's session rule; a rollout without a verdict gets
  ``infra_failure_score`` (a number OpenRLHF can train on), is flagged in
  ``extra_logs["deepgym_no_verdict"]`` and counted by ``MaskedRate``.

OpenRLHF runs many rollouts at once on one event loop: they share one client per loop (one
session provider, whose warm standby then serves the next rollout), made by the first rollout
on that loop and closed when the loop shuts its async generators down (``asyncio.run`` does, at
its end), so nothing of it outlives the loop.

``write_agent_func_file(path, env=...)`` writes the file ``--agent_func_path`` points to.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym.completions import DONE, turn_command
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.integrations.reward import MaskedRate, label_env
from deepgym.models import Environment, RunResult
from deepgym.types import EnvLike

if TYPE_CHECKING:
    from deepgym.client import AsyncDeepGym

__all__ = ["DONE", "FEEDBACK_CHARS", "session_agent_instance", "write_agent_func_file"]

FEEDBACK_CHARS = 4000
"""The most of a command's output fed back (its tail)."""
_MASKED = MaskedRate("openrlhf agent")


class _LoopClients:
    """One client per event loop, closed when that loop shuts down."""

    def __init__(self, sandbox: str) -> None:
        self.sandbox = sandbox
        self.clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[AsyncDeepGym, AsyncIterator[None]]
        ] = weakref.WeakKeyDictionary()

    async def get(self) -> AsyncDeepGym:
        """The running loop's client (made at the first call on that loop)."""
        from deepgym.client import AsyncDeepGym

        loop = asyncio.get_running_loop()
        held = self.clients.get(loop)
        if held is None:
            client = AsyncDeepGym(sandbox=self.sandbox)
            closer = _close_at_shutdown(client)
            self.clients[loop] = held = (client, closer)  # before any await: one per loop
            await anext(closer)  # the loop now tracks it: its shutdown closes the client
        return held[0]


async def _close_at_shutdown(client: AsyncDeepGym) -> AsyncIterator[None]:
    """Suspends at once; ``loop.shutdown_asyncgens`` (the end of ``asyncio.run``) resumes it
    to close ``client`` on the loop that made it."""
    try:
        yield
    finally:
        await client.close()


def session_agent_instance(
    base: type,
    *,
    env: EnvLike | None = None,
    infra_failure_score: float = 0.0,
    sandbox: str = "pool",
    masked_rate: MaskedRate | None = None,
) -> type:
    """OpenRLHF's ``AgentInstance`` over deepgym sessions, subclassing ``base`` (OpenRLHF's
    ``openrlhf.utils.agent.AgentInstanceBase``)."""
    if isinstance(infra_failure_score, bool) or not isinstance(infra_failure_score, int | float):
        raise ConfigError(f"infra_failure_score must be a number, got {infra_failure_score!r}")
    masked = masked_rate if masked_rate is not None else _MASKED
    clients = _LoopClients(sandbox)

    class AgentInstance(base):  # type: ignore[misc]
        """One rollout: a deepgym session of the sample's environment."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.client: Any = None
            self.session: Any = None
            self.env: Environment | None = None
            self.steps = 0
            self.failed: RunResult | None = None
            """Why the session did not open (the first step reports it)."""

        def _environment(self, label: Any) -> Environment:
            from deepgym.envs.registry import resolve

            target = env if env is not None else label_env(label)
            if target is None:
                raise ConfigError(
                    f"no environment: pass env=..., or a label naming one ({label!r})"
                )
            found = resolve(target)
            if found.kind != "session":
                raise ConfigError(f"{found.name} is a {found.kind} task, not a session")
            return found

        async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            self.env = self._environment(states.get("label"))
            self.client = await clients.get()  # shared by every rollout on this loop
            self.steps = 0
            try:
                self.session = await self.client.session(self.env)
            except DeepGymError as exc:  # never acted: no verdict, scored at the first step
                from deepgym.session import failure_result

                self.session = None
                self.failed = failure_result(exc, None, acted=False)
            return {"observation": states.get("observation", "")}

        async def _close(self) -> None:
            """End this rollout's session (the loop's client stays, for the next rollout)."""
            if self.session is not None:
                await self.session.close()
                self.session = None

        def _reply(self, result: RunResult, feedback: str = "") -> dict[str, Any]:
            import torch

            no_verdict = not result.has_verdict
            masked.add(no_verdict)
            reward = infra_failure_score if no_verdict else result.score
            return {
                "rewards": torch.tensor(float(reward)),
                "scores": torch.tensor(float(reward)),
                "environment_feedback": feedback,
                "done": True,
                "extra_logs": {
                    "deepgym_no_verdict": torch.tensor(float(no_verdict)),
                    "deepgym_passed": torch.tensor(float(result.passed)),
                },
            }

        async def _score(self, feedback: str = "") -> dict[str, Any]:
            assert self.session is not None
            result = await self.session.score()  # a failure is read by the session rule
            await self._close()
            return self._reply(result, feedback)

        async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            import torch

            from deepgym.session import output_text

            if self.session is None:  # the session never opened
                await self._close()
                why = self.failed or RunResult.no_verdict("sandbox_error", "no session is open")
                return self._reply(why)
            assert self.env is not None
            self.steps += 1
            command = turn_command(str(states.get("action_text", "")))
            if command is None:
                return await self._score()
            session = self.session
            try:
                out = await session.exec(command, self.env.step_timeout)
            except DeepGymError as exc:
                result = session.failure(exc)
                await self._close()
                return self._reply(result)
            feedback = f"\n<output>\n{output_text(out, FEEDBACK_CHARS)}\n</output>\n"
            if self.steps >= self.env.max_steps:  # the budget is spent: the work is scored
                return await self._score(feedback)
            return {
                "rewards": torch.tensor(0.0),
                "scores": torch.tensor(0.0),
                "environment_feedback": feedback,
                "done": False,
                "extra_logs": {},
            }

    return AgentInstance


def write_agent_func_file(
    path: str | Path, *, env: str | None = None, infra_failure_score: float = 0.0
) -> Path:
    """Write the file OpenRLHF's ``--agent_func_path`` loads: ``AgentInstance`` over deepgym
    sessions (``env``: one session environment's name for every sample; None: each label names
    its own) and OpenRLHF's own ``AgentExecutorBase`` as ``AgentExecutor``."""
    target = Path(path)
    settings = json.dumps({"env": env, "infra_failure_score": float(infra_failure_score)})
    target.write_text(
        '"""OpenRLHF agent function: deepgym sessions (written by deepgym)."""\n\n'
        "import json\n\n"
        "from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase\n\n"
        "from deepgym.integrations.openrlhf_agent import session_agent_instance\n\n"
        f"_SETTINGS = json.loads({settings!r})\n"
        "AgentInstance = session_agent_instance(AgentInstanceBase, **_SETTINGS)\n\n\n"
        "class AgentExecutor(AgentExecutorBase):\n"
        "    def __init__(self, max_steps, max_length, llm_engine, hf_tokenizer, result_queue):\n"
        "        super().__init__(\n"
        "            AgentInstance, max_steps, max_length, llm_engine, hf_tokenizer, result_queue\n"
        "        )\n"
    )
    return target
