"""The type aliases the public API shares (one definition each)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeAlias

from deepgym.models import Environment, RunResult

EnvLike: TypeAlias = Environment | str | Path
"""An environment: the object itself, a built-in or registered name, or a folder's path."""
Envs: TypeAlias = EnvLike | Sequence[EnvLike]
"""One environment for every answer of a batch, or one per answer."""
ProgressFn: TypeAlias = Callable[[int, int], None]
"""``progress(done, total)``: called as runs finish."""
Group: TypeAlias = tuple[int, list[RunResult]]
"""``(group_index, results)``: one complete GRPO group, as ``stream_groups`` yields it."""

__all__ = ["EnvLike", "Envs", "Group", "ProgressFn"]
