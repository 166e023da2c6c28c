"""TRL: reward functions for ``GRPOTrainer`` (and the trainers built on it).

TRL calls each reward function as ``f(prompts=..., completions=..., completion_ids=...,
**dataset_columns, trainer_state=..., log_extra=..., log_metric=...)`` and wants exactly one value
per completion. ``None`` becomes NaN; from TRL 1.6 a completion for which every reward function
returned ``None`` is left out of its group's baseline and gets advantage 0. With several reward
functions a partial ``None`` is summed as 0, so pass one combined deepgym function.

Use ``RewardFunction(env)`` directly, or these module-level functions (for dotted-path loaders,
such as TRL's ``--reward_funcs deepgym.integrations.trl.deepgym_reward``), which read the
environment from the ``env`` / ``env_name`` dataset column, else from ``DEEPGYM_ENV``.
``deepgym_reward_async`` is an ``async def``: every TRL version that runs async reward functions
detects it (an object with an async ``__call__``, such as ``AsyncRewardFunction``, only from 1.14).
TRL itself is never imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepgym.integrations.reward import default_async_reward_function, default_reward_function

__all__ = ["deepgym_reward", "deepgym_reward_async"]


def deepgym_reward(
    prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function: each completion's score, ``None`` without a verdict."""
    return default_reward_function()(completions, prompts, **kwargs)


async def deepgym_reward_async(
    prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """The same as an ``async def`` (TRL runs async reward functions concurrently)."""
    return await default_async_reward_function()(completions, prompts, **kwargs)
