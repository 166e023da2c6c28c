"""From a sweep's raw timing rows to per-arm statistics and named metrics (pure, no torch).

One ``StepRow`` per measured step is the raw shard (CSV). Everything else is derived here:

- per arm: mean step, generation, reward wait and training time; GPU idle, time-weighted
  (``1 - sum(busy) / sum(wall)``, the share of the arm's wall time the device sat idle); the
  share of steps that stalled; the barrier model's predicted step beside the measured one;
- drift: the coefficient of variation across arms of mean generation time (all arms) and of mean
  training time (barrier arms: a pipelined arm trains while the reward runs, by design);
- the metrics that the pre-registered predictions name (see ``predictions.toml``).

Comparisons of two schedules (barrier against pipelined) use each arm's *tail*, the step minus
its generation, plus the mean generation of all steps: generation is the same work in every arm
(its drift is judged on its own), so its noise on a shared machine should not decide which
schedule wins. The plain ratios of mean steps are reported beside them (``raw_step_ratio``).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError
from deepgym.latency.model import p_stall

__all__ = [
    "ArmStats",
    "StepRow",
    "json_safe",
    "metrics",
    "read_rows",
    "summarize",
    "write_rows",
]


@dataclass(frozen=True)
class StepRow:
    """The raw timing of one step (seconds)."""

    block: int
    position: int
    arm: str
    mode: str
    """``barrier`` or ``pipelined``."""
    reward: str
    """``dial`` (a controlled service time) or ``sandbox`` (the real reward)."""
    step: float
    generation: float
    reward_wait: float
    training: float
    busy: float
    idle: float
    timeouts: int
    no_verdict: int
    tokens: str
    """A hash of the generated tokens: equal hashes, identical generation."""
    model_step: float
    """The barrier model's step for this step's service times (NaN where not modelled)."""


_TYPES = {f.name: f.type for f in fields(StepRow)}


def write_rows(path: str | Path, rows: Iterable[StepRow]) -> Path:
    """One CSV row per step, with a header."""
    out = Path(path)
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(_TYPES))
        w.writeheader()
        for r in rows:
            w.writerow(asdict(r))
    return out


def read_rows(path: str | Path) -> list[StepRow]:
    """The rows ``write_rows`` wrote."""
    out = []
    with Path(path).open(newline="", encoding="utf-8") as f:
        for i, d in enumerate(csv.DictReader(f), 2):
            try:
                kw: dict[str, Any] = {}
                for name, typ in _TYPES.items():
                    kw[name] = {"int": int, "float": float}.get(str(typ), str)(d[name])
                out.append(StepRow(**kw))
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"{path}:{i}: bad timing row ({exc})") from None
    return out


@dataclass(frozen=True)
class ArmStats:
    """One arm's steps, summarised."""

    arm: str
    mode: str
    reward: str
    steps: int
    step: float
    generation: float
    reward_wait: float
    training: float
    busy: float
    idle: float
    stall_share: float
    model_step: float
    """Mean of the barrier model's step (NaN where not modelled)."""


def _mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def summarize(rows: Sequence[StepRow]) -> dict[str, ArmStats]:
    """Per-arm statistics, arms in order of first appearance."""
    by: dict[str, list[StepRow]] = {}
    for r in rows:
        by.setdefault(r.arm, []).append(r)
    out = {}
    for arm, rs in by.items():
        wall = sum(r.step for r in rs)
        out[arm] = ArmStats(
            arm=arm,
            mode=rs[0].mode,
            reward=rs[0].reward,
            steps=len(rs),
            step=_mean([r.step for r in rs]),
            generation=_mean([r.generation for r in rs]),
            reward_wait=_mean([r.reward_wait for r in rs]),
            training=_mean([r.training for r in rs]),
            busy=_mean([r.busy for r in rs]),
            idle=1.0 - sum(r.busy for r in rs) / wall if wall > 0 else math.nan,
            stall_share=sum(1 for r in rs if r.timeouts > 0) / len(rs),
            model_step=_mean([r.model_step for r in rs]),
        )
    return out


def _cv(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return math.nan
    mean = statistics.fmean(xs)
    return statistics.pstdev(xs) / mean if mean > 0 else math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def metrics(rows: Sequence[StepRow], batch: int) -> dict[str, float]:
    """Every named metric the predictions may cite; arms that did not run give no entry."""
    arms = summarize(rows)
    generation = _mean([r.generation for r in rows])
    m: dict[str, float] = {}
    for a in arms.values():
        m[f"idle.{a.arm}"] = a.idle
        m[f"step.{a.arm}"] = a.step
        m[f"stall_share.{a.arm}"] = a.stall_share
        if math.isfinite(a.model_step):
            m[f"model_error.{a.arm}"] = a.step / a.model_step - 1.0
    m["generation.distinct_outputs"] = float(len({r.tokens for r in rows}))
    m["drift.generation_cv"] = _cv([a.generation for a in arms.values()])
    m["drift.training_cv"] = _cv([a.training for a in arms.values() if a.mode == "barrier"])
    m["drift.training_cv_all"] = _cv([a.training for a in arms.values()])
    errors = [abs(v) for k, v in m.items() if k.startswith("model_error.")]
    if errors:
        m["model_error.max_abs"] = max(errors)
    _pairs(arms, m, batch, generation)
    dial = [r for r in rows if r.reward == "dial" and r.mode == "barrier"]
    sandbox = [r for r in rows if r.arm == "sandbox"]
    if dial and sandbox:
        m["busy_ratio.sandbox/dial"] = _ratio(
            _mean([r.busy for r in sandbox]), _mean([r.busy for r in dial])
        )
    return {k: v for k, v in m.items() if math.isfinite(v)}


def _pairs(arms: dict[str, ArmStats], m: dict[str, float], batch: int, generation: float) -> None:
    """Metrics that compare two arms."""

    def step(a: ArmStats) -> float:  # the arm's tail after the mean generation of all steps
        return generation + a.step - a.generation

    clean, stalled = arms.get("const:2"), arms.get("stall:1")
    if clean and stalled:
        m["idle_gap.stall:1-const:2"] = stalled.idle - clean.idle

        def expected(p: float) -> float:  # measured clean and stalled steps, exact P(stall)
            return step(clean) + (step(stalled) - step(clean)) * p_stall(p, batch)

        m["model_step_ratio.rate:0.02/rate:0.05"] = expected(0.02) / expected(0.05)
        m["model_step_ratio.rate:0.005/rate:0.01"] = expected(0.005) / expected(0.01)
    for lo, hi in (("rate:0.02", "rate:0.05"), ("rate:0.005", "rate:0.01")):
        if lo in arms and hi in arms:
            m[f"step_ratio.{lo}/{hi}"] = _ratio(step(arms[lo]), step(arms[hi]))
    for pipe_name, barrier_name in (("pipe:1", "stall:1"), ("sandbox-pipe", "sandbox")):
        p, b = arms.get(pipe_name), arms.get(barrier_name)
        if p and b:
            pair = f"{pipe_name}/{barrier_name}"
            m[f"step_ratio.{pair}"] = _ratio(step(p), step(b))
            m[f"raw_step_ratio.{pair}"] = _ratio(p.step, b.step)
            m[f"hidden_training_share.{pipe_name}"] = _ratio(step(b) - step(p), b.training)


def json_safe(x: Any) -> Any:
    """A copy fit for strict JSON: NaN and infinities become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return x
