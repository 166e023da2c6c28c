"""DAPO on TRL: ``GRPOTrainer`` with DAPO's settings and deepgym's reward function.

DAPO's pieces that TRL has: token-level loss normalisation (``loss_type="dapo"``), clip-higher
(``epsilon=0.2``, ``epsilon_high=0.28``), no KL term (``beta=0.0``) and overlong filtering
(``mask_truncated_completions=True``). Dynamic sampling (dropping groups whose rewards are all
equal) is not a TRL option; a completion without a verdict is left out of its group's baseline
(TRL 1.6+), so it never makes a group look uniform. The reward function is the same as TRL's:
``deepgym_reward`` here, or a ``RewardFunction``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepgym.integrations.reward import default_reward_function

__all__ = ["DAPO_ARGS", "dapo_config", "deepgym_reward"]

DAPO_ARGS: dict[str, Any] = {
    "loss_type": "dapo",
    "epsilon": 0.2,
    "epsilon_high": 0.28,
    "beta": 0.0,
    "mask_truncated_completions": True,
}
"""``GRPOConfig`` arguments that make TRL's GRPO trainer run DAPO."""


def dapo_config(**overrides: Any) -> Any:
    """A ``trl.GRPOConfig`` with ``DAPO_ARGS`` (``overrides`` win, e.g. ``output_dir``)."""
    from trl import GRPOConfig

    return GRPOConfig(**{**DAPO_ARGS, **overrides})


def deepgym_reward(
    prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function: each completion's score; ``None`` without a verdict."""
    return default_reward_function()(completions, prompts, **kwargs)
