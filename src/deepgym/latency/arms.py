"""The sweep's arms, and what one step of each will meet (pure: no torch, no I/O).

An arm is a way to run the reward (see ``deepgym.latency.sweep``). A block's random draws
(``Draws``) are shared by its arms, so arms differ only by what they are meant to differ by
(common random numbers); a ``Plan`` is what one step of one arm meets: the dial's service time
and result for every completion, or the real reward's completions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from deepgym.exceptions import ConfigError
from deepgym.latency.model import barrier_tail, pipelined_tail
from deepgym.models import RunResult

if TYPE_CHECKING:
    from deepgym.latency.timeline import Step
    from deepgym.models import Environment

__all__ = [
    "DEFAULT_ARMS",
    "SEED_BUSY",
    "SEED_MEDIAN",
    "SEED_TIMEOUT",
    "Arm",
    "Draws",
    "Plan",
    "dial_plan",
    "model_step",
    "parse_arm",
    "sandbox_plan",
]

SEED_BUSY = 24.5
"""The seed's busy time per step (generation + training), seconds."""
SEED_TIMEOUT = 30.0
SEED_MEDIAN = 2.0

DEFAULT_ARMS = (
    "const:0.25",
    "const:2",
    "const:10",
    "const:20",
    "stall:1",
    "rate:0.05",
    "rate:0.02",
    "rate:0.01",
    "rate:0.005",
    "pipe:1",
    "sandbox",
    "sandbox-pipe",
)


@dataclass(frozen=True)
class Arm:
    """One way to run the reward."""

    name: str
    reward: Literal["dial", "sandbox"]
    median: float = SEED_MEDIAN
    stragglers: int = 0
    rate: float = 0.0
    pipelined: bool = False


def parse_arm(spec: str) -> Arm:
    """``const:R``, ``stall:K``, ``rate:P``, ``pipe:K``, ``sandbox`` or ``sandbox-pipe``."""
    if spec in ("sandbox", "sandbox-pipe"):
        return Arm(spec, "sandbox", pipelined=spec == "sandbox-pipe")
    kind, _, value = spec.partition(":")
    try:
        if kind == "const":
            r = float(value)
            if math.isfinite(r) and r >= 0:
                return Arm(spec, "dial", median=r)
        elif kind in ("stall", "pipe"):
            k = int(value)
            if k >= 0:
                return Arm(spec, "dial", stragglers=k, pipelined=kind == "pipe")
        elif kind == "rate":
            p = float(value)
            if 0 <= p <= 1:
                return Arm(spec, "dial", rate=p)
    except ValueError:
        pass
    raise ConfigError(
        f"unknown arm {spec!r}: use const:R, stall:K, rate:P, pipe:K, sandbox or sandbox-pipe"
    )


@dataclass
class Plan:
    """What one step of one arm will meet: service times (seconds), results, completions."""

    services: list[float] = field(default_factory=list)
    results: list[RunResult] = field(default_factory=list)
    completions: list[str] = field(default_factory=list)


def dial_plan(arm: Arm, n: int, scale: float, draws: Draws) -> Plan:
    """Service times (seconds here) and results for a dial arm in this block."""
    median, timeout = arm.median * scale, SEED_TIMEOUT * scale
    late = set(draws.stragglers[: arm.stragglers])
    if arm.rate > 0:
        late |= {i for i, u in enumerate(draws.uniform) if u < arm.rate}
    services, results = [], []
    for i in range(n):
        if i in late:
            services.append(timeout)
            results.append(RunResult.no_verdict("timeout", "the dial's timeout"))
        else:
            services.append(median)
            s = draws.scores[i]
            results.append(RunResult(score=s, passed=s == 1.0))
    return Plan(services=services, results=results)


def sandbox_plan(env: Environment, n: int, draws: Draws) -> Plan:
    """A mix of the reference, wrong answers, and one answer that never returns."""
    entry = env.entry_point or "solve"
    wrong = f"def {entry}(*args, **kwargs):\n    return None\n"
    never = f"def {entry}(*args, **kwargs):\n    while True:\n        pass\n"
    good = env.reference_solution or ""
    completions = [good if draws.scores[i] == 1.0 else wrong for i in range(n)]
    completions[draws.stragglers[0]] = never
    return Plan(completions=completions)


@dataclass(frozen=True)
class Draws:
    """One block's random draws, shared by its arms (common random numbers)."""

    order: list[str]
    uniform: list[float]
    stragglers: list[int]
    scores: list[float]

    @classmethod
    def of(cls, seed: int, block: int, arms: Sequence[str], n: int) -> Draws:
        """The block's arm order and draws, from ``(seed, block)`` alone (reproducible)."""
        rng = random.Random(f"{seed}:{block}")
        order = list(arms)
        rng.shuffle(order)
        return cls(
            order=order,
            uniform=[rng.random() for _ in range(n)],
            stragglers=rng.sample(range(n), n),
            scores=[float(rng.random() < 0.5) for _ in range(n)],
        )


def model_step(arm: Arm, plan: Plan, step: Step, groups: int, group: int) -> float:
    """The barrier model's step for this step: measured generation and training, the dial's
    service times, the barrier or per-group schedule (NaN for the real reward)."""
    if arm.reward != "dial":
        return math.nan
    done = [max(plan.services[i : i + group]) for i in range(0, groups * group, group)]
    per = step.total("training") / groups
    tail = pipelined_tail(done, per) if arm.pipelined else barrier_tail(done, per)
    return step.total("generation") + tail + step.total("optimizer")
