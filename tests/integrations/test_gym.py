"""Gymnasium: ``DeepGymEnv`` passes Gymnasium's own ``check_env`` and plays short episodes in
the real sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from deepgym import DeepGym, Environment, VerifierError
from deepgym.integrations import gym as dg_gym
from tests.integrations.conftest import BROKEN, TWO_SUM_OK


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    client = DeepGym()
    yield client
    client.close()


def test_check_env_passes(dg: DeepGym) -> None:
    env = dg_gym.DeepGymEnv(["two_sum", "fizzbuzz", "humaneval/0"], client=dg)
    check_env(env, skip_render_check=True)
    env.close()


def test_registered_and_made_by_id(dg: DeepGym) -> None:
    assert dg_gym.ENV_ID in gymnasium.registry
    env = gymnasium.make(dg_gym.ENV_ID, env="two_sum", client=dg)
    obs, info = env.reset(seed=0)
    assert "two_sum" in obs and info["env_name"] == "two_sum"
    env.close()


def test_an_episode_scores_the_answer(dg: DeepGym) -> None:
    env = dg_gym.DeepGymEnv("two_sum", client=dg, render_mode="ansi")
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    answer = f"Here you go:\n```python\n{TWO_SUM_OK}```"
    obs, reward, terminated, truncated, info = env.step(answer)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["has_verdict"] and info["passed"]
    assert env.render() == "two_sum: score 1.000"
    _, reward, _, _, info = env.step("def two_sum(nums, target):\n    return None\n")
    assert reward == 0.0 and info["has_verdict"]  # a judged 0


SILENT = Environment(name="silent", verifier_code="import os\nos._exit(0)\n", timeout=10.0)
"""A verifier that exits before it reports: ``dg.run`` raises ``VerifierError``."""


def test_a_reported_verifier_failure_is_a_step_without_a_verdict(dg: DeepGym) -> None:
    env = dg_gym.DeepGymEnv([BROKEN, "two_sum"], client=dg)
    env.reset(options={"env": "broken"})
    _, reward, terminated, _, info = env.step("x = 1")
    assert not info["has_verdict"] and info["error_type"] == "verifier_error"
    assert reward == 0.0 and terminated  # mask it: the 0.0 means nothing
    with pytest.raises(ValueError, match="options"):
        env.reset(options={"env": "nope"})


def test_step_raises_where_run_does_and_step_batch_returns_the_runs(dg: DeepGym) -> None:
    env = dg_gym.DeepGymEnv(SILENT, client=dg)
    env.reset()
    with pytest.raises(VerifierError):
        dg.run(SILENT, "x = 1")
    with pytest.raises(VerifierError):
        env.step("x = 1")
    steps = env.step_batch(["x = 1", "y = 2"])
    assert [s[4]["has_verdict"] for s in steps] == [False, False]
    assert all(s[1] == 0.0 and s[2] for s in steps)


def test_random_choice_follows_the_seed(dg: DeepGym) -> None:
    env = dg_gym.DeepGymEnv(["two_sum", "fizzbuzz", "knapsack"], client=dg)
    first = [env.reset(seed=s)[1]["env_name"] for s in range(12)]
    again = [env.reset(seed=s)[1]["env_name"] for s in range(12)]
    assert first == again and len(set(first)) > 1
