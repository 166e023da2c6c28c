"""Axolotl: reward functions for its GRPO trainer (TRL's), loaded by dotted path.

Axolotl reads ``trl.reward_funcs`` as ``module.function`` names, imports each, and rejects one
whose signature has fewer than two parameters (``def f(**kw)`` is refused): ``deepgym_reward``
takes ``prompts``, ``completions`` and the rest as keywords, exactly as TRL calls it. The
environment comes from the dataset's ``env`` / ``env_name`` column, else ``DEEPGYM_ENV``. A run
without a verdict is ``None`` (TRL leaves the completion out of its group's baseline).
Axolotl itself is never imported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deepgym.integrations.reward import default_reward_function

__all__ = ["REWARD_FUNC", "deepgym_reward"]

REWARD_FUNC = "deepgym.integrations.axolotl.deepgym_reward"
"""The dotted path to put under ``trl.reward_funcs`` in an Axolotl config."""


def deepgym_reward(
    prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """Each completion's score; ``None`` without a verdict."""
    return default_reward_function()(completions, prompts, **kwargs)
