"""GRPO helpers: judged-only advantages, and per-group backward equal to the barrier's."""

from __future__ import annotations

import pytest

from deepgym.grpo import GroupPipeline, batch_advantages, group_advantages
from deepgym.models import RunResult


def _r(score: float | None) -> RunResult:
    if score is None:
        return RunResult.no_verdict("sandbox_error", "down")
    return RunResult(score=score, passed=score == 1.0)


def test_matches_the_seed_snippet() -> None:
    batch = [_r(1.0), _r(0.0), _r(None), _r(1.0), _r(0.0)]
    judged = [r.score for r in batch if r.has_verdict]
    mean = sum(judged) / len(judged)
    std = (sum((s - mean) ** 2 for s in judged) / len(judged)) ** 0.5
    expected = [(r.score - mean) / (std + 1e-8) if r.has_verdict else None for r in batch]
    assert group_advantages(batch) == expected


def test_an_outage_does_not_punish_a_correct_answer() -> None:
    # Half-correct group of 8 where one correct answer was lost to an outage.
    group = [_r(1.0)] * 3 + [_r(None)] + [_r(0.0)] * 4
    adv = group_advantages(group)
    assert adv[3] is None
    assert all(a is not None and a > 0 for a in adv[:3])


def test_fewer_than_two_judged_carry_no_signal() -> None:
    assert group_advantages([_r(None), _r(1.0)]) == [None, 0.0]
    assert group_advantages([_r(None), _r(None)]) == [None, None]
    assert group_advantages([0.5, None]) == [0.0, None]


def test_batch_advantages_are_per_group() -> None:
    scores = [1.0, 0.0, 1.0, 1.0]
    assert batch_advantages(scores, 2) == [*group_advantages([1.0, 0.0]), 0.0, 0.0]


def test_pipeline_feeds_each_group_as_it_arrives() -> None:
    seen: list[int] = []
    pipe = GroupPipeline(lambda i, rs, adv: seen.append(i) or len(rs))
    out = pipe.feed([(1, [_r(1.0)]), (0, [_r(0.0), _r(1.0)])])
    assert seen == [1, 0] and pipe.order == [1, 0]
    assert out == {1: 1, 0: 2}


def test_per_group_backward_sums_to_the_barrier_gradient() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    groups = 4
    size = 6
    x = torch.randn(groups * size, 4)
    scores: list[float | None] = [float(v) for v in torch.rand(groups * size).round()]
    scores[5] = None  # a no-verdict sample: left out of its group's baseline and of the loss
    adv = batch_advantages(scores, size)

    def loss_of(idx: list[int]) -> torch.Tensor:
        keep = [i for i in idx if adv[i] is not None]
        logp = model(x[keep]).squeeze(-1)
        a = torch.tensor([adv[i] for i in keep])
        return -(a * logp).sum() / len(scores)

    model.zero_grad()
    loss_of(list(range(groups * size))).backward()
    barrier = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    pipe = GroupPipeline(lambda g, rs, a: loss_of(list(range(g * size, (g + 1) * size))).backward())
    fake = [(g, [_r(s) for s in scores[g * size : (g + 1) * size]]) for g in (2, 0, 3, 1)]
    pipe.feed(fake)
    piped = [p.grad.clone() for p in model.parameters()]
    for a, b in zip(barrier, piped, strict=True):
        assert torch.allclose(a, b, atol=1e-6)
