"""SkyRL-Gym: deepgym's environments made by ``skyrl_gym.make`` from a dataset row and driven as
SkyRL's generator drives them (``init``, ``step`` until done, ``get_metrics``, ``close``); the
rewards equal deepgym's own for the same answers, and a run without a verdict is never a 0."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import skyrl_gym

from deepgym import DeepGym, NoVerdictError, load_environment
from deepgym.envs.qa.session_check import reference_actions
from deepgym.exceptions import ConfigError
from deepgym.integrations import reward as dg_reward
from deepgym.integrations import skyrl as dg_skyrl
from tests.integrations.conftest import BROKEN, TWO_SUM_OK, ScriptedBackend

WRONG = "def two_sum(nums, target):\n    return [0, 0]\n"


def _episode(env_class: str, row: dict[str, Any], outputs: list[str], **config: Any) -> Any:
    """One trajectory as ``SkyRLGymGenerator.agent_loop`` plays it: ``make`` with the row's
    extras (less prompt and env_class, plus max_turns), ``init``, ``step`` per model output."""
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = config.pop("max_turns", 5)
    env = skyrl_gym.make(env_class, env_config=config, extras=extras)
    chat, _ = env.init(row.get("prompt"))
    steps = []
    for output in outputs:
        out = env.step(output)
        steps.append(out)
        if out["done"]:
            break
    metrics = env.get_metrics()
    env.close()
    return chat, steps, metrics, env


@pytest.fixture(autouse=True, scope="module")
def shared_clients_closed() -> Iterator[None]:
    """The environments share a process-wide client: closed before the leftover check."""
    yield
    dg_reward.close_shared_clients()


@pytest.fixture
def scripted_sandbox() -> Iterator[ScriptedBackend]:
    """The adapter's shared client for ``sandbox: scripted`` is an in-memory backend."""
    backend = ScriptedBackend()
    client = DeepGym(backend=backend)
    dg_reward._clients["scripted"] = client
    yield backend
    dg_reward._clients.pop("scripted", None)
    client.close()


def test_both_ids_are_registered_with_skyrl_gym() -> None:
    assert {"deepgym", "deepgym_session"} <= set(skyrl_gym.registry)
    dg_skyrl.register()  # again: a no-op, never a duplicate registration error


def test_dataset_rows_carry_env_class_and_the_environment_name() -> None:
    (row,) = dg_skyrl.dataset_rows(["two_sum"])
    assert row["env_class"] == "deepgym"
    assert row["reward_spec"] == {"method": "rule", "ground_truth": "two_sum"}
    assert row["prompt"] == [{"role": "user", "content": load_environment("two_sum").task}]


def test_a_row_without_an_environment_is_refused() -> None:
    with pytest.raises(ConfigError, match="ground_truth"):
        skyrl_gym.make("deepgym", env_config={}, extras={"reward_spec": {"method": "rule"}})


def test_scores_pass_through_and_metrics_average_over_judged(
    scripted_sandbox: ScriptedBackend,
) -> None:
    (row,) = dg_skyrl.dataset_rows(["two_sum"])
    chat, steps, metrics, _ = _episode(
        "deepgym", row, ["It is:\n```python\npass\n```"], sandbox="scripted"
    )
    assert chat == row["prompt"]
    assert [s["reward"] for s in steps] == [1.0] and steps[0]["done"]
    assert steps[0]["metadata"]["deepgym_no_verdict"] is False
    assert scripted_sandbox.answers == ["pass"]  # the fenced block, not the prose
    assert metrics == {"deepgym_no_verdict": 0.0, "deepgym_score": 1.0, "deepgym_pass": 1.0}
    _, steps, metrics, _ = _episode("deepgym", row, ["fail"], sandbox="scripted")
    assert steps[0]["reward"] == 0.0 and metrics["deepgym_score"] == 0.0  # a judged 0


def test_no_verdict_raises_by_default(scripted_sandbox: ScriptedBackend) -> None:
    row = {"reward_spec": {"method": "rule", "ground_truth": BROKEN}}  # an object, not a name
    env = skyrl_gym.make("deepgym", env_config={"sandbox": "scripted"}, extras=row)
    env.init(None)
    before = dg_skyrl.masked_rate.masked
    with pytest.raises(NoVerdictError, match="no verdict") as caught:
        env.step("pass")
    assert caught.value.result is not None and not caught.value.result.has_verdict
    assert dg_skyrl.masked_rate.masked == before + 1
    assert env.get_metrics() == {"deepgym_no_verdict": 1.0}  # no score in the averages


def test_infra_failure_score_is_given_and_flagged(scripted_sandbox: ScriptedBackend) -> None:
    row = {"reward_spec": {"method": "rule", "ground_truth": BROKEN}}
    _, steps, metrics, _ = _episode(
        "deepgym", row, ["pass"], sandbox="scripted", infra_failure_score=-1.0
    )
    assert steps[0]["reward"] == -1.0 and steps[0]["done"]
    assert steps[0]["metadata"]["deepgym_no_verdict"] is True
    assert metrics == {"deepgym_no_verdict": 1.0}
    row["reward_spec"]["infra_failure_score"] = 0.25  # the row's own, where env_config has none
    _, steps, _, _ = _episode("deepgym", row, ["pass"], sandbox="scripted")
    assert steps[0]["reward"] == 0.25 and steps[0]["metadata"]["deepgym_no_verdict"] is True
    with pytest.raises(ConfigError, match="infra_failure_score"):
        skyrl_gym.make("deepgym", env_config={"infra_failure_score": "zero"}, extras=row)


@pytest.mark.sandbox
def test_rewards_equal_deepgyms_own_in_the_real_sandbox() -> None:
    answers = [f"Here:\n```python\n{TWO_SUM_OK}```", f"```python\n{WRONG}```"]
    (row,) = dg_skyrl.dataset_rows(["two_sum"])
    rewards = [_episode("deepgym", row, [a])[1][0]["reward"] for a in answers]
    with DeepGym() as dg:
        own = [r.score for r in dg.run_batch("two_sum", [TWO_SUM_OK, WRONG]).results]
    assert rewards == own == [1.0, 0.0]


@pytest.mark.sandbox
def test_a_session_episode_runs_the_commands_and_scores_the_work_dir() -> None:
    env_name = "agent/fix_add"
    commands = [a.command for a in reference_actions(load_environment(env_name))]
    outputs = [f"Next:\n```bash\n{c}\n```" for c in commands] + ["All fixed. DONE"]
    (row,) = dg_skyrl.dataset_rows([env_name], env_class="deepgym_session")
    chat, steps, metrics, env = _episode("deepgym_session", row, outputs, max_turns=20)
    assert "calc.add" in chat[0]["content"]
    assert [s["done"] for s in steps] == [False] * len(commands) + [True]
    assert all(s["observations"][0]["content"].startswith("exit 0") for s in steps[:-1])
    assert steps[-1]["reward"] == 1.0 and env.last_result.passed
    assert metrics["deepgym_score"] == 1.0 and metrics["deepgym_turns"] == len(commands) + 1


@pytest.mark.sandbox
def test_the_turn_budget_ends_a_session_with_the_work_scored() -> None:
    (row,) = dg_skyrl.dataset_rows(["agent/log_counts"], env_class="deepgym_session")
    outputs = ["```bash\nls\n```", "```bash\necho 'not a solution' > count.sh\n```", "x"]
    _, steps, metrics, _ = _episode("deepgym_session", row, outputs, max_turns=2)
    assert [s["done"] for s in steps] == [False, True]
    assert steps[-1]["reward"] == 0.0 and metrics["deepgym_pass"] == 0.0
    with pytest.raises(ConfigError, match="function task"):
        skyrl_gym.make("deepgym_session", env_config={}, extras={"env": "two_sum"})
