"""Plots for ``deepgym price`` and ``deepgym sweep`` (matplotlib, imported here only).

Both write a PNG and return its path; the figures use the Agg backend, so no display is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym.latency import model

if TYPE_CHECKING:
    from deepgym.latency.price import PriceReport
    from deepgym.latency.sweep import SweepResult

__all__ = ["plot_price", "plot_sweep"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_price(report: PriceReport, path: str | Path) -> Path:
    """The service-time histogram, and predicted GPU idle against the timeout rate."""
    import numpy as np

    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    xs = np.asarray(report.service_s)
    left.hist(xs, bins=min(40, max(5, len(xs) // 3)), color="tab:blue", alpha=0.8)
    left.axvline(
        report.timeout_s, color="tab:red", ls="--", label=f"timeout {report.timeout_s:g} s"
    )
    left.axvline(report.derived_limit_s, color="tab:green", ls=":", label="reference-derived limit")
    left.set_xlabel("service time (s)")
    left.set_ylabel("runs")
    left.set_title(f"{report.env}: {report.runs} runs")
    left.legend()

    ok, _ = model.recap(report.service_s, report.timed_out, report.timeout_s)
    rates = np.geomspace(1e-4, 0.3, 80)
    idle = [
        model.gpu_idle(
            report.busy_s,
            model.expected_step(ok, float(p), report.batch, report.busy_s, report.timeout_s),
        )
        for p in rates
    ]
    right.semilogx(rates, idle, color="tab:blue", label=f"barrier, N = {report.batch}")
    right.axvline(report.knee_rate, color="gray", ls=":", label="knee (half the steps stall)")
    if report.timeout_rate > 0:
        right.plot(
            [report.timeout_rate], [report.barrier.idle], "o", color="tab:red", label="measured"
        )
    right.set_xlabel("timeout rate")
    right.set_ylabel("predicted GPU idle")
    right.set_ylim(0, 1)
    right.legend()
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_sweep(result: SweepResult, path: str | Path) -> Path:
    """Idle per arm (measured and modelled), and step time per arm across blocks."""
    plt = _pyplot()
    arms = list(result.arms.values())
    names = [a.arm for a in arms]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    pos = range(len(arms))
    left.bar(pos, [a.idle for a in arms], color="tab:blue", alpha=0.8, label="measured")
    modelled = [
        (i, model.gpu_idle(a.busy, a.model_step))
        for i, a in enumerate(arms)
        if a.model_step == a.model_step and a.model_step > 0
    ]
    if modelled:
        left.plot(*zip(*modelled, strict=True), "D", color="tab:red", label="barrier model")
    left.set_xticks(list(pos), names, rotation=45, ha="right")
    left.set_ylabel("GPU idle")
    left.set_ylim(0, 1)
    left.legend()
    steps = [[r.step for r in result.rows if r.arm == n] for n in names]
    right.boxplot(steps)
    right.set_xticks([i + 1 for i in pos], names, rotation=45, ha="right")
    right.set_ylabel("step time (s)")
    right.set_title(f"{result.config.blocks} blocks, {result.device}")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
