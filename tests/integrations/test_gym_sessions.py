"""Gymnasium over a session environment: ``DeepGymSessionEnv`` passes ``check_env``, plays the
reference agent's commands to a score of 1.0, ends on ``done`` or when its budget is spent, and
reports a session that failed without a verdict where the contract says so."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from deepgym import DeepGym, load_environment
from deepgym.envs.qa.session_check import reference_actions
from deepgym.exceptions import ConfigError
from deepgym.integrations import gym as dg_gym

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def test_check_env_passes(dg: DeepGym) -> None:
    env = dg_gym.DeepGymSessionEnv("agent/fix_add", client=dg, max_steps=3)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_the_reference_commands_score_one_and_done_ends_the_episode(dg: DeepGym) -> None:
    env = gymnasium.make(dg_gym.SESSION_ENV_ID, env="agent/fix_add", client=dg)
    obs, info = env.reset(seed=0)
    assert "calc.add" in obs and info == {"env_name": "agent/fix_add", "step": 0}
    commands = [a.command for a in reference_actions(load_environment("agent/fix_add"))]
    for command in commands:
        obs, reward, terminated, truncated, info = env.step(command)
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert obs.startswith("exit 0")
    obs, reward, terminated, truncated, info = env.step("done")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["has_verdict"] and info["passed"] and info["step"] == len(commands) + 1
    with pytest.raises(ConfigError, match="reset"):
        env.step("ls")  # the episode has ended
    env.close()


def test_the_budget_ends_the_episode_with_the_work_scored(dg: DeepGym) -> None:
    env = dg_gym.DeepGymSessionEnv("agent/log_counts", client=dg, max_steps=2)
    env.reset()
    _, reward, terminated, _, _ = env.step("ls")
    assert not terminated and reward == 0.0
    obs, reward, terminated, _, info = env.step("echo 'not a solution' > count.sh")
    assert terminated and obs.startswith("exit 0")  # the last command's output, then the score
    assert info["has_verdict"] and reward == 0.0 and not info["passed"]
    assert (env.masked_rate.total, env.masked_rate.masked) == (1, 0)  # each episode counted
    env.close()


def test_output_outside_the_charset_is_replaced_and_capped(dg: DeepGym) -> None:
    env = dg_gym.DeepGymSessionEnv("agent/fix_add", client=dg)
    env.reset()
    obs, *_ = env.step("head -c 40000 /dev/zero | tr '\\0' x; printf '\\ncaf\\303\\251\\n'")
    assert "caf?" in obs and env.observation_space.contains(obs)
    assert len(obs) <= dg_gym.MAX_OBSERVATION_CHARS
    env.close()


def test_a_single_answer_task_is_refused() -> None:
    with pytest.raises(ConfigError, match="use DeepGymEnv"):
        dg_gym.DeepGymSessionEnv("two_sum", client=None)
