"""OpenRLHF's multi-turn agent over deepgym sessions, driven the way OpenRLHF's agent executor
drives an ``AgentInstance`` (reset once, then step after each generation, reading ``rewards``,
``scores``, ``environment_feedback``, ``done`` and ``extra_logs``), with scripted model turns in
place of generation. OpenRLHF itself needs vLLM and a GPU, so its base classes are stood in for
by classes of the same protocol."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time
import types
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import pytest

from deepgym.exceptions import ConfigError
from deepgym.integrations.openrlhf_agent import session_agent_instance, write_agent_func_file
from deepgym.integrations.reward import MaskedRate
from tests.procs import descendants

pytestmark = pytest.mark.sandbox


class AgentInstanceBase(ABC):
    """OpenRLHF's protocol (``openrlhf.utils.agent``)."""

    @abstractmethod
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return states

    @abstractmethod
    async def step(self, state_dict: dict[str, Any], **kwargs: Any) -> dict[str, Any]: ...


async def _execute(
    cls: type, prompt: str, label: Any, turns: list[str], max_steps: int = 10
) -> dict[str, Any]:
    """What OpenRLHF's executor does with one prompt, on text."""
    agent = cls()
    observation = (await agent.reset({"observation": prompt, "label": label}))["observation"]
    total, scores, logs, steps = 0.0, 0.0, {}, 0
    for action in turns[:max_steps]:
        steps += 1
        result = await agent.step(
            {
                "observation_text": observation,
                "action_text": action,
                "label": label,
                "sampling_params": None,
            }
        )
        total += result["rewards"].item()
        scores = result.get("scores", total)
        logs = result.get("extra_logs", {})
        observation = observation + action + result["environment_feedback"]
        if result["done"]:
            break
    return {
        "reward": total,
        "scores": float(scores),
        "extra_logs": logs,
        "observation": observation,
        "steps": steps,
    }


FIX_TURNS = [
    "Let me look.\n```bash\ncat calc.py\n```",
    "The bug is in add.\n```bash\nsed -i 's/a - b/a + b/' calc.py\n```",
    "Fixed. DONE",
]


def test_a_rollout_fixes_the_bug_and_is_rewarded_by_the_final_verifier() -> None:
    cls = session_agent_instance(AgentInstanceBase)
    out = asyncio.run(_execute(cls, "Fix calc.add.", "agent/fix_add", FIX_TURNS))
    assert out["reward"] == 1.0 and out["scores"] == 1.0 and out["steps"] == 3
    assert "<output>\nexit 0\n" in out["observation"] and "return a - b" in out["observation"]
    assert out["extra_logs"]["deepgym_no_verdict"].item() == 0.0
    assert out["extra_logs"]["deepgym_passed"].item() == 1.0


def test_a_turn_without_a_command_ends_the_phase_and_the_budget_holds() -> None:
    cls = session_agent_instance(AgentInstanceBase, env="agent/fix_add")
    out = asyncio.run(_execute(cls, "p", None, ["I give up."]))
    assert out["steps"] == 1 and out["reward"] == 0.0
    assert out["extra_logs"]["deepgym_no_verdict"].item() == 0.0  # judged: a real 0
    busy = ["```bash\nls\n```"] * 30
    out = asyncio.run(_execute(cls, "p", None, busy, max_steps=30))
    assert out["steps"] == 20  # agent/fix_add's max_steps: then the work is scored


def test_rollouts_on_one_loop_share_one_client_closed_with_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepgym.client import AsyncDeepGym

    made: list[Any] = []
    closed: list[Any] = []
    close = AsyncDeepGym.close

    async def recorded_close(self: AsyncDeepGym) -> None:
        closed.append(self)
        await close(self)

    monkeypatch.setattr(AsyncDeepGym, "close", recorded_close)

    class Recorded(session_agent_instance(AgentInstanceBase)):  # type: ignore[misc]
        async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            out = await super().reset(states, **kwargs)
            made.append(self.client)
            return out

    async def rollouts(n: int) -> list[dict[str, Any]]:  # at once, as OpenRLHF runs them
        return await asyncio.gather(
            *(_execute(Recorded, "Fix calc.add.", "agent/fix_add", FIX_TURNS) for _ in range(n))
        )

    before = descendants(os.getpid())
    outs = asyncio.run(rollouts(2))
    assert [o["reward"] for o in outs] == [1.0, 1.0]
    assert len(made) == 2 and made[0] is made[1]  # one client: one session provider
    assert closed == [made[0]]  # closed once, when the loop shut down
    assert asyncio.run(rollouts(1))[0]["reward"] == 1.0
    assert made[2] is not made[0] and closed == [made[0], made[2]]  # a new loop, its own client
    deadline = time.monotonic() + 5
    while (left := descendants(os.getpid()) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left behind: {sorted(left)}"


def test_a_session_that_fails_has_no_verdict_and_the_infra_score(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepgym.client import AsyncDeepGym
    from deepgym.exceptions import SandboxError

    async def broken(self: Any, env: Any) -> Any:
        raise SandboxError("no sandbox here")

    monkeypatch.setattr(AsyncDeepGym, "session", broken)
    rate = MaskedRate("test", block=1, limit=0)
    cls = session_agent_instance(
        AgentInstanceBase, env="agent/fix_add", infra_failure_score=-1.0, masked_rate=rate
    )
    out = asyncio.run(_execute(cls, "p", None, FIX_TURNS))
    assert out["steps"] == 1 and out["reward"] == -1.0
    assert out["extra_logs"]["deepgym_no_verdict"].item() == 1.0
    assert (rate.masked, rate.alerts) == (1, 1)


def test_bad_settings_and_labels_are_named() -> None:
    with pytest.raises(ConfigError, match="infra_failure_score"):
        session_agent_instance(AgentInstanceBase, infra_failure_score="x")  # type: ignore[arg-type]
    cls = session_agent_instance(AgentInstanceBase)
    with pytest.raises(ConfigError, match="no environment"):
        asyncio.run(cls().reset({"observation": "p", "label": None}))
    with pytest.raises(ConfigError, match="not a session"):
        asyncio.run(cls().reset({"observation": "p", "label": "two_sum"}))


def test_the_agent_func_file_loads_against_openrlhfs_module_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class AgentExecutorBase:
        def __init__(self, agent_instance_cls: type, *args: Any) -> None:
            assert issubclass(agent_instance_cls, AgentInstanceBase)
            self.agent_instance_cls = agent_instance_cls
            self.args = args

    fake = types.ModuleType("openrlhf.utils.agent")
    fake.AgentInstanceBase = AgentInstanceBase  # type: ignore[attr-defined]
    fake.AgentExecutorBase = AgentExecutorBase  # type: ignore[attr-defined]
    for name in ("openrlhf", "openrlhf.utils"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "openrlhf.utils.agent", fake)
    path = write_agent_func_file(tmp_path / "agent_func.py", env="agent/fix_add")
    spec = importlib.util.spec_from_file_location("agent_func", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    executor = module.AgentExecutor(10, 4096, None, None, None)
    assert issubclass(executor.agent_instance_cls, AgentInstanceBase)
    out = asyncio.run(_execute(executor.agent_instance_cls, "p", None, FIX_TURNS))
    assert out["reward"] == 1.0
