"""Price a reward: measure its service-time distribution, predict what it does to a GRPO step.

``measure`` runs real answers through ``DeepGym`` (the sandbox pool) and returns each run's
service time (``ServiceTime.run_ms``: the run itself, without waiting behind the local pool's
other runs, since a training cluster gives each completion a sandbox) and whether it hit its
time limit. ``build_report`` is
pure: from those samples and the step's shape (batch, group, busy time, timeout) it predicts

- P(the step stalls) and the share of groups with a corrupted advantage;
- the expected step time and GPU idle behind a barrier with the given timeout;
- the same with per-group pipelining, and with the environment's reference-derived time limit;
- the fixes, in order of their predicted gain.

A run that timed out is priced at the timeout under study: in the loop the seed describes, a hung
completion holds the barrier for the whole timeout. The answers run under that timeout, so what
finishes below it is measured as it is.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from deepgym.exceptions import ConfigError
from deepgym.latency import model
from deepgym.models import RunResult
from deepgym.validation import optional_positive_int, positive_int

if TYPE_CHECKING:
    from deepgym.client import DeepGym
    from deepgym.models import BatchResult, Environment

__all__ = ["Fix", "PriceReport", "Scenario", "build_report", "measure", "service_samples"]

TIMEOUT_ERRORS = ("timeout", "solution_timeout")
STALL_TARGET = 0.1
"""'Below the knee' for the rate fix: the rate at which one step in ten stalls."""


class Scenario(BaseModel):
    """A predicted step: its expected wall time and GPU idle."""

    name: str
    timeout_s: float
    timeout_rate: float
    p_stall: float
    step_s: float
    idle: float


class Fix(BaseModel):
    """One intervention and what it is predicted to save per step."""

    name: str
    detail: str
    step_s: float
    gain_s: float
    gain_share: float


class PriceReport(BaseModel):
    """``deepgym price``'s answer (``--json`` prints it)."""

    env: str
    runs: int
    batch: int
    group: int
    busy_s: float
    training_s: float
    timeout_s: float
    derived_limit_s: float
    slots: int | None
    quantiles_s: dict[str, float]
    timeout_rate: float
    p_stall: float
    knee_rate: float
    corrupted_group_share: float
    barrier: Scenario
    pipelined: Scenario
    derived: Scenario
    fixes: list[Fix]
    service_s: list[float] = Field(repr=False)
    timed_out: list[bool] = Field(repr=False)


def service_samples(results: Sequence[RunResult]) -> tuple[list[float], list[bool]]:
    """Each run's service time in seconds (``ServiceTime.run_ms``: no wait for a sandbox) and
    whether it timed out."""
    times = [r.service.run_ms / 1000.0 for r in results]
    return times, [r.error_type in TIMEOUT_ERRORS for r in results]


def _quantiles(xs: Sequence[float]) -> dict[str, float]:
    s = sorted(xs)

    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": s[-1], "mean": statistics.fmean(s)}


@dataclass(frozen=True)
class _Shape:
    """The step under study: what a scenario needs besides the service times."""

    batch: int
    group: int
    busy: float
    training: float
    slots: int | None
    draws: int
    seed: int

    def simulate(self, ok: list[float], p: float, cap: float) -> model.PipelineEstimate:
        return model.pipelined_step(
            ok, p, cap, n=self.batch, group_size=self.group,
            generation=self.busy - self.training, training=self.training,
            slots=self.slots, draws=self.draws, seed=self.seed,
        )  # fmt: skip

    def scenario(self, name: str, ok: list[float], p: float, cap: float) -> Scenario:
        """One sandbox per completion: the exact ``E[max]``; fewer slots: the simulation."""
        if self.slots is not None and self.slots < self.batch:
            step = self.simulate(ok, p, cap).barrier_step
        else:
            step = model.expected_step(ok, p, self.batch, self.busy, cap)
        return Scenario(
            name=name, timeout_s=cap, timeout_rate=p, p_stall=model.p_stall(p, self.batch),
            step_s=step, idle=model.gpu_idle(self.busy, step),
        )  # fmt: skip


def build_report(
    samples: Sequence[float],
    timed_out: Sequence[bool],
    *,
    env: str,
    batch: int,
    group: int,
    busy: float,
    timeout: float,
    derived_limit: float,
    training: float | None = None,
    slots: int | None = None,
    draws: int = 2000,
    seed: int = 0,
) -> PriceReport:
    """Predict a step from measured service times (pure)."""
    if positive_int(batch, "batch") % positive_int(group, "group"):
        raise ConfigError(f"batch ({batch}) must be a positive multiple of group ({group})")
    optional_positive_int(slots, "slots")
    train = busy / 2.0 if training is None else training
    if not 0 <= train <= busy:
        raise ConfigError(f"training ({train}) must be between 0 and busy ({busy})")
    shape = _Shape(batch, group, busy, train, slots, draws, seed)
    ok, p = model.recap(samples, timed_out, timeout)
    limit = min(derived_limit, timeout)
    barrier = shape.scenario("barrier", ok, p, timeout)
    derived = shape.scenario(
        "reference-derived limit", *model.recap(samples, timed_out, limit), limit
    )
    # The simulated gain of pipelining, applied to the barrier step: comparable numbers.
    pipe = shape.simulate(ok, p, timeout)
    step = barrier.step_s - (pipe.barrier_step - pipe.pipelined_step)
    pipelined = barrier.model_copy(
        update={"name": "per-group pipelining", "step_s": step, "idle": model.gpu_idle(busy, step)}
    )
    return PriceReport(
        env=env, runs=len(samples), batch=batch, group=group, busy_s=busy, training_s=train,
        timeout_s=timeout, derived_limit_s=derived_limit, slots=slots,
        quantiles_s=_quantiles(samples), timeout_rate=p, p_stall=model.p_stall(p, batch),
        knee_rate=model.knee_rate(batch),
        corrupted_group_share=model.corrupted_group_share(p, group),
        barrier=barrier, pipelined=pipelined, derived=derived,
        fixes=_fixes(barrier, pipelined, derived, ok, p, batch, busy, timeout),
        service_s=list(samples), timed_out=list(timed_out),
    )  # fmt: skip


def _fixes(
    barrier: Scenario,
    pipelined: Scenario,
    derived: Scenario,
    ok: list[float],
    p: float,
    batch: int,
    busy: float,
    timeout: float,
) -> list[Fix]:
    """The seed's three fixes, sorted by predicted gain (largest first)."""
    target = model.rate_for_stall(batch, STALL_TARGET)
    if p > target:  # the exact gain of the full-parallel model, applied to the barrier step
        gain = model.expected_step(ok, p, batch, busy, timeout) - model.expected_step(
            ok, target, batch, busy, timeout
        )
        below = barrier.step_s - gain
        rate_detail = f"timeout rate {p:.2%} -> {target:.3%} (one step in ten stalls)"
    else:
        below = barrier.step_s
        rate_detail = f"timeout rate {p:.2%} is already below {target:.3%}"
    lower = f"{timeout:g} s -> the reference-derived {derived.timeout_s:g} s"
    cut = derived.timeout_rate - barrier.timeout_rate
    if cut > 0:  # a faster step that would score real answers as timeouts is no fix
        lower += f"; it cuts off {cut:.1%} of answers that finish now"
    fixes = [
        ("lower the timeout", lower, derived.step_s),
        ("push the rate below the knee", rate_detail, below),
        ("per-group pipelining", "each group's backward as soon as it is scored", pipelined.step_s),
    ]
    out = [
        Fix(
            name=name,
            detail=detail,
            step_s=step,
            gain_s=barrier.step_s - step,
            gain_share=(barrier.step_s - step) / barrier.step_s,
        )
        for name, detail, step in fixes
    ]
    return sorted(out, key=lambda f: -f.gain_s)


def cycle(answers: Sequence[str], batch: int) -> list[str]:
    """``batch`` answers: the given ones, repeated in order as often as needed."""
    if not answers:
        raise ConfigError("no answers to price")
    return [answers[i % len(answers)] for i in range(batch)]


def measure(
    dg: DeepGym,
    env: Environment,
    answers: Sequence[str],
    *,
    batch: int,
    group: int,
    timeout: float,
    max_parallel: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[BatchResult, float]:
    """Run ``batch`` answers (cycled) under ``timeout``; also the reference-derived limit."""
    derived = dg.time_limit(env)
    result = dg.run_batch(
        env,
        cycle(answers, batch),
        group_size=group,
        max_parallel=max_parallel,
        time_limit=timeout,
        progress=progress,
    )
    return result, derived
