"""Pricing the reward: what reward latency costs a synchronous GRPO step.

- ``timeline``: named spans per step; GPU idle from the union of busy spans; JSON lines;
  a cross-check against torch's profiler.
- ``model``: the barrier model (pure): stall probability, expected step, corrupted groups,
  the advantage an outage flips, per-group pipelining.
- ``price``: measure a real reward's service times and predict the step (``deepgym price``).
- ``sweep``: a real GRPO step on a small random-weight model with the reward on a dial, in
  randomised complete blocks (``deepgym sweep``; needs torch).
- ``predictions``: pre-registered predictions, marked held or refuted by the data.

The ``deepgym price`` and ``deepgym sweep`` commands live in ``deepgym.cli``.

Nothing here imports torch, numpy or matplotlib at import time.
"""

from __future__ import annotations

from deepgym.latency.model import (
    corrupted_group_share,
    expected_max,
    expected_step,
    expected_step_two_point,
    gpu_idle,
    knee_rate,
    p_stall,
)
from deepgym.latency.timeline import Span, Step, Timeline

__all__ = [
    "Span",
    "Step",
    "Timeline",
    "corrupted_group_share",
    "expected_max",
    "expected_step",
    "expected_step_two_point",
    "gpu_idle",
    "knee_rate",
    "p_stall",
]
