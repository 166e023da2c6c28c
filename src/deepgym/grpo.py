"""GRPO helpers that follow the contract: judged-only baselines, and per-group pipelining.

``group_advantages`` is the seed's snippet as a function: a group's mean and standard deviation
come from its judged samples only; a sample without a verdict gets ``None`` (leave it out); a
group with fewer than two judged samples carries no signal (its judged samples get 0.0).

``GroupPipeline`` feeds each group to a callback (for example its backward pass) the moment the
group's rewards are complete, so training overlaps the stragglers instead of waiting for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepgym.models import RunResult

EPS = 1e-8
Score = float | None


def _scores(items: Sequence[RunResult] | Sequence[Score]) -> list[Score]:
    out: list[Score] = []
    for x in items:
        if isinstance(x, RunResult):
            out.append(x.score if x.has_verdict else None)
        else:
            out.append(x)
    return out


def group_advantages(group: Sequence[RunResult] | Sequence[Score], eps: float = EPS) -> list[Score]:
    """Advantages of one group from its judged samples only (``None`` for no verdict)."""
    scores = _scores(group)
    judged = [s for s in scores if s is not None]
    if len(judged) < 2:
        return [None if s is None else 0.0 for s in scores]
    mean = sum(judged) / len(judged)
    std = (sum((s - mean) ** 2 for s in judged) / len(judged)) ** 0.5
    return [None if s is None else (s - mean) / (std + eps) for s in scores]


def batch_advantages(
    results: Sequence[RunResult] | Sequence[Score], group_size: int
) -> list[Score]:
    """``group_advantages`` over consecutive groups of ``group_size``."""
    out: list[Score] = []
    for i in range(0, len(results), group_size):
        out.extend(group_advantages(results[i : i + group_size]))
    return out


@dataclass
class GroupPipeline:
    """Run ``on_group(group_index, results, advantages)`` as each group completes.

    ``feed`` takes any iterable of ``(group_index, results)``, such as
    ``DeepGym.stream_groups(...)``; the callback's return values are kept by group index.
    """

    on_group: Callable[[int, list[RunResult], list[Score]], Any]
    outputs: dict[int, Any] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)

    def feed(self, groups: Iterable[tuple[int, list[RunResult]]]) -> dict[int, Any]:
        """Take complete groups as they arrive; each one's output, by group index."""
        for index, results in groups:
            self.outputs[index] = self.on_group(index, results, group_advantages(results))
            self.order.append(index)
        return self.outputs

    async def afeed(self, groups: AsyncIterable[tuple[int, list[RunResult]]]) -> dict[int, Any]:
        """``feed`` for ``AsyncDeepGym.stream_groups``."""
        async for index, results in groups:
            self.outputs[index] = self.on_group(index, results, group_advantages(results))
            self.order.append(index)
        return self.outputs
