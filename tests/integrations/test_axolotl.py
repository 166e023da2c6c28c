"""Axolotl's reward-function loader rule, as its source states it (Axolotl is not installed: it
pins its own torch, transformers and trl releases and pulls GPU-only packages such as xformers,
triton and flash-linear-attention).

``axolotl.core.trainers.grpo.GRPOStrategy.get_reward_func`` (0.19) imports ``module.function``
from the dotted name under ``trl.reward_funcs``, then raises ``ValueError`` unless
``len(inspect.signature(reward_func).parameters) >= 2``. ``load`` below does the same.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

import deepgym.integrations.reward as shared
from deepgym import AsyncRewardFunction, RewardFunction
from deepgym.integrations import axolotl
from deepgym.reward_function import as_coroutine_function
from tests.integrations.conftest import TWO_SUM_OK


def load(reward_func_fqn: str) -> Any:
    """Axolotl's loader: import by dotted path, then the two-parameter rule."""
    module_name, _, name = reward_func_fqn.rpartition(".")
    reward_func = getattr(importlib.import_module(module_name), name)
    if not len(inspect.signature(reward_func).parameters) >= 2:
        raise ValueError(
            "Reward function must accept at least two arguments: "
            "prompts: list and completions: list"
        )
    return reward_func


def kwargs_only(**kw: Any) -> list[float]:
    return []


def test_the_rule_rejects_a_kwargs_only_function() -> None:
    with pytest.raises(ValueError, match="at least two arguments"):
        load(f"{__name__}.kwargs_only")


@pytest.mark.parametrize(
    "path",
    [
        axolotl.REWARD_FUNC,
        "deepgym.integrations.trl.deepgym_reward",
        "deepgym.integrations.trl.deepgym_reward_async",
        "deepgym.integrations.dapo.deepgym_reward",
    ],
)
def test_every_shipped_reward_function_passes_the_rule(path: str) -> None:
    assert callable(load(path))


def test_reward_function_objects_pass_the_rule() -> None:
    # A user's module may hold ``reward = RewardFunction(...)`` and name it in the config.
    for fn in (
        RewardFunction("two_sum"),
        AsyncRewardFunction("two_sum"),
        as_coroutine_function(AsyncRewardFunction("two_sum")),
    ):
        assert len(inspect.signature(fn).parameters) >= 2


@pytest.fixture
def fresh_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DEEPGYM_ENV", "two_sum")
    monkeypatch.setattr(shared, "_sync", None)
    yield
    if shared._sync is not None:
        shared._sync.close()


def test_the_loaded_function_scores_trl_style_calls(fresh_default: None) -> None:
    fn = load(axolotl.REWARD_FUNC)
    out = fn(
        prompts=["Solve two_sum."] * 3,
        completions=[f"```python\n{TWO_SUM_OK}```", "nothing", TWO_SUM_OK],
        completion_ids=[[1], [2], [3]],
        env_name=[None, None, "no_such_env"],
        trainer_state=None,
        log_extra=lambda column, values: None,
        log_metric=lambda name, value: None,
    )
    assert out == [1.0, 0.0, None]
