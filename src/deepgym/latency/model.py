"""The barrier model: what a reward's service-time distribution does to a synchronous GRPO step.

Pure functions, no I/O; times are seconds. A step is generation, then a reward phase that ends
when the slowest of its ``n`` completions is scored (the barrier), then training. *Busy* time is
generation plus training; *GPU idle* is the share of the step's wall time that is not busy.

A completion *times out* with probability ``p``, independently; a timed-out completion holds the
barrier for the full timeout. So:

- the step stalls (contains at least one timeout) with probability ``1 - (1 - p)^n``;
- a group of ``g`` carries a corrupted advantage (a timeout scored 0) with ``1 - (1 - p)^g``;
- the expected reward phase is ``E[max]`` of ``n`` draws from the service-time distribution,
  computed exactly for an empirical distribution (``expected_max``);
- per-group pipelining runs each group's backward as soon as the group is scored, so training
  hides under the stragglers' wait (``pipelined_tail``).

Invariants (property-tested): every probability is in [0, 1] and non-decreasing in ``p`` and in
``n``; ``gpu_idle`` is in [0, 1]; ``expected_max`` lies between the smallest and the largest
possible draw.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass

from deepgym.exceptions import ConfigError
from deepgym.grpo import Score, group_advantages
from deepgym.validation import at_least, probability, seconds

__all__ = [
    "Outage",
    "PipelineEstimate",
    "StallEstimate",
    "barrier_tail",
    "corrupted_group_share",
    "expected_max",
    "expected_step",
    "expected_step_two_point",
    "gpu_idle",
    "knee_rate",
    "outage",
    "p_stall",
    "pipelined_step",
    "pipelined_tail",
    "rate_for_stall",
    "recap",
    "stalled_step_pipelined",
]


# -- validation ----------------------------------------------------------------------------------


# -- the barrier -----------------------------------------------------------------------------------


def p_stall(p: float, n: int) -> float:
    """P(at least one of ``n`` completions times out) at a per-completion timeout rate ``p``."""
    return 1.0 - (1.0 - probability(p, "p")) ** at_least(n, "n", 0)


def corrupted_group_share(p: float, group_size: int) -> float:
    """Share of groups of ``group_size`` with at least one timeout: a corrupted advantage when a
    timeout is scored 0 (the barrier is over the batch; normalisation is over the group)."""
    return p_stall(p, at_least(group_size, "group_size", 1))


def rate_for_stall(n: int, stall: float) -> float:
    """The per-completion timeout rate at which a batch of ``n`` stalls with probability
    ``stall``: the inverse of ``p_stall`` in ``p``."""
    at_least(n, "n", 1)
    return 1.0 - float((1.0 - probability(stall, "stall")) ** (1.0 / n))


def knee_rate(n: int) -> float:
    """The rate at which half the steps of a batch of ``n`` stall. Above it, lowering the rate
    barely moves the step (the barrier is the timeout already); below it, it pays."""
    return rate_for_stall(n, 0.5)


def expected_step_two_point(busy: float, fast: float, timeout: float, p: float, n: int) -> float:
    """The seed's model: every completion takes ``fast`` seconds, or ``timeout`` with rate ``p``.
    ``busy + fast + (timeout - fast) * P(stall)``."""
    busy = seconds(busy, "busy", allow_zero=True)
    fast = seconds(fast, "fast", allow_zero=True)
    timeout = seconds(timeout, "timeout", allow_zero=True)
    if fast > timeout:
        raise ConfigError(f"fast ({fast}) must not exceed timeout ({timeout})")
    return busy + fast + (timeout - fast) * p_stall(p, n)


def gpu_idle(busy: float, step: float) -> float:
    """Share of a step's wall time that is not busy: ``1 - busy / step``, clipped to [0, 1]."""
    step = seconds(step, "step")
    busy = seconds(busy, "busy", allow_zero=True)
    return min(1.0, max(0.0, 1.0 - busy / step))


def recap(
    samples: Sequence[float], timed_out: Sequence[bool], cap: float
) -> tuple[list[float], float]:
    """Split measured service times under a timeout ``cap``: the completions that finish (each
    below ``cap``) and the timeout rate (timed out already, or not done by ``cap``)."""
    cap = seconds(cap, "cap")
    if len(samples) != len(timed_out):
        raise ConfigError(f"got {len(samples)} samples and {len(timed_out)} timed_out flags")
    if not samples:
        raise ConfigError("samples must not be empty")
    ok = [
        seconds(s, "samples[i]", allow_zero=True)
        for s, t in zip(samples, timed_out, strict=True)
        if not t
    ]
    done = [s for s in ok if s < cap]
    return done, 1.0 - len(done) / len(samples)


def expected_max(ok: Sequence[float], p: float, n: int, cap: float) -> float:
    """``E[max]`` of ``n`` draws, each a timeout (``cap`` seconds) with probability ``p`` and
    otherwise uniform over ``ok`` (values above ``cap`` count as ``cap``). Exact:
    ``integral_0^cap 1 - ((1 - p) F(t))^n dt`` with ``F`` the empirical CDF of ``ok``."""
    p, n, cap = probability(p, "p"), at_least(n, "n", 0), seconds(cap, "cap", allow_zero=True)
    if n == 0:
        return 0.0
    if not ok:
        p = 1.0
    xs = sorted(min(seconds(x, "ok[i]", allow_zero=True), cap) for x in ok)
    m = len(xs)
    total, prev = 0.0, 0.0
    for k, x in enumerate(xs):  # on [prev, x) exactly k of the m draws are <= t
        total += (1.0 - ((1.0 - p) * k / m) ** n) * (x - prev)
        prev = x
    return total + (1.0 - (1.0 - p) ** n) * (cap - prev)


def expected_step(ok: Sequence[float], p: float, n: int, busy: float, cap: float) -> float:
    """Expected step time behind a barrier with every completion scored at once."""
    return seconds(busy, "busy", allow_zero=True) + expected_max(ok, p, n, cap)


# -- outages in a group --------------------------------------------------------------------------


@dataclass(frozen=True)
class Outage:
    """A group's advantages before an outage, with the lost completion scored 0, and with it
    left out (the contract: no verdict is not a zero)."""

    before: list[Score]
    scored_zero: list[Score]
    masked: list[Score]


def outage(scores: Sequence[float], index: int) -> Outage:
    """What happens to a group's advantages when completion ``index`` loses its verdict."""
    if not 0 <= index < len(scores):
        raise ConfigError(f"index must be in [0, {len(scores)}), got {index!r}")
    zeroed: list[float | None] = [float(s) for s in scores]
    masked: list[float | None] = list(zeroed)
    zeroed[index] = 0.0
    masked[index] = None
    return Outage(
        before=group_advantages(list(scores)),
        scored_zero=group_advantages(zeroed),
        masked=group_advantages(masked),
    )


# -- per-group pipelining --------------------------------------------------------------------


def pipelined_tail(group_done: Sequence[float], train_per_group: float) -> float:
    """When the last backward ends, if each group trains as soon as it is scored (one device,
    groups in the order they complete). Times are from the start of the reward phase."""
    train = seconds(train_per_group, "train_per_group", allow_zero=True)
    t = 0.0
    for done in sorted(seconds(d, "group_done[i]", allow_zero=True) for d in group_done):
        t = max(t, done) + train
    return t


def barrier_tail(group_done: Sequence[float], train_per_group: float) -> float:
    """When the last backward ends behind a barrier: every group waits for the slowest."""
    train = seconds(train_per_group, "train_per_group", allow_zero=True)
    return (max(group_done) if group_done else 0.0) + train * len(group_done)


@dataclass(frozen=True)
class StallEstimate:
    """A stalled step with and without per-group pipelining."""

    hidden: float
    """Seconds of training that run under the straggler's wait."""
    barrier_step: float
    pipelined_step: float


def stalled_step_pipelined(
    stalled_step: float,
    training: float,
    groups: int,
    *,
    fast: float,
    timeout: float,
    late_groups: int = 1,
) -> StallEstimate:
    """The seed's derivation: ``groups - late_groups`` groups are scored after ``fast`` seconds,
    the rest wait for ``timeout``; per-group backward hides the early groups' training under
    that wait, and the stalled step shrinks by what was hidden."""
    at_least(groups, "groups", 1)
    at_least(late_groups, "late_groups", 1)
    if late_groups > groups:
        raise ConfigError(f"late_groups ({late_groups}) must not exceed groups ({groups})")
    fast, timeout = (
        seconds(fast, "fast", allow_zero=True),
        seconds(timeout, "timeout", allow_zero=True),
    )
    done = [fast] * (groups - late_groups) + [timeout] * late_groups
    per = seconds(training, "training", allow_zero=True) / groups
    hidden = barrier_tail(done, per) - pipelined_tail(done, per)
    return StallEstimate(
        hidden, stalled_step, seconds(stalled_step, "stalled_step", allow_zero=True) - hidden
    )


@dataclass(frozen=True)
class PipelineEstimate:
    """Expected step times from the same simulated draws, behind a barrier and pipelined."""

    barrier_step: float
    pipelined_step: float
    draws: int


def _completion_times(services: list[float], slots: int | None) -> list[float]:
    """When each completion is scored, with ``slots`` sandboxes at once (None: one each),
    started in index order (group-major) on the first free slot."""
    if slots is None or slots >= len(services):
        return services
    free = [0.0] * slots
    out = []
    for s in services:
        start = heapq.heappop(free)
        heapq.heappush(free, start + s)
        out.append(start + s)
    return out


def pipelined_step(
    ok: Sequence[float],
    p: float,
    cap: float,
    *,
    n: int,
    group_size: int,
    generation: float,
    training: float,
    slots: int | None = None,
    draws: int = 2000,
    seed: int = 0,
) -> PipelineEstimate:
    """Monte Carlo estimate of the expected step behind a barrier and with per-group backward.

    Each draw samples ``n`` service times (a timeout of ``cap`` seconds with probability ``p``,
    else uniform over ``ok``), schedules them on ``slots`` sandboxes, and times both schedules.
    Deterministic for a given ``seed``."""
    p, cap = probability(p, "p"), seconds(cap, "cap", allow_zero=True)
    at_least(n, "n", 1)
    at_least(group_size, "group_size", 1)
    at_least(draws, "draws", 1)
    if slots is not None:
        at_least(slots, "slots", 1)
    if n % group_size:
        raise ConfigError(f"n ({n}) must be a multiple of group_size ({group_size})")
    gen = seconds(generation, "generation", allow_zero=True)
    per = seconds(training, "training", allow_zero=True) / (n // group_size)
    pool = [min(seconds(x, "ok[i]", allow_zero=True), cap) for x in ok]
    rng = random.Random(seed)
    barrier = pipelined = 0.0
    for _ in range(draws):
        services = [cap if not pool or rng.random() < p else rng.choice(pool) for _ in range(n)]
        done = _completion_times(services, slots)
        groups = [max(done[i : i + group_size]) for i in range(0, n, group_size)]
        barrier += gen + barrier_tail(groups, per)
        pipelined += gen + pipelined_tail(groups, per)
    return PipelineEstimate(barrier / draws, pipelined / draws, draws)
