"""From raw timing rows to per-arm statistics and metrics (pure), against the seed's numbers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from deepgym.exceptions import ConfigError
from deepgym.latency.analysis import StepRow, json_safe, metrics, read_rows, summarize, write_rows


def _row(arm: str, step: float, gen: float = 12.3, train: float = 12.2, **kw: object) -> StepRow:
    fields: dict[str, object] = {
        "block": 0,
        "position": 0,
        "arm": arm,
        "mode": "pipelined" if arm.startswith("pipe") or arm.endswith("-pipe") else "barrier",
        "reward": "sandbox" if arm.startswith("sandbox") else "dial",
        "step": step,
        "generation": gen,
        "reward_wait": step - gen - train,
        "training": train,
        "busy": gen + train,
        "idle": 1 - (gen + train) / step,
        "timeouts": 0,
        "no_verdict": 0,
        "tokens": "abc",
        "model_step": step,
    }
    fields.update(kw)
    return StepRow(**fields)  # type: ignore[arg-type]


def test_the_seeds_barrier_arms() -> None:
    rows = [_row("const:2", 26.5), _row("stall:1", 54.5, timeouts=1)]
    m = metrics(rows, 128)
    assert f"{m['idle.const:2']:.1%}" == "7.5%"
    assert f"{m['idle.stall:1']:.1%}" == "55.0%"
    assert m["idle_gap.stall:1-const:2"] == pytest.approx(30 / 54.5 - 2 / 26.5)
    # Measured clean and stalled steps with the exact P(stall): the seed's 54.5 -> 52.4 -> 46.8
    # -> 39.8 s.
    assert m["model_step_ratio.rate:0.02/rate:0.05"] == pytest.approx(52.3909 / 54.4606, abs=1e-4)
    assert m["model_step_ratio.rate:0.005/rate:0.01"] == pytest.approx(39.7595 / 46.7650, abs=1e-4)
    assert m["stall_share.stall:1"] == 1.0 and m["stall_share.const:2"] == 0.0
    assert m["model_error.max_abs"] == 0.0


def test_pipelining_metrics_use_the_tail_after_generation() -> None:
    # The seed's derivation: a stalled step of 54.7 s; pipelined, 11.4375 s less.
    rows = [_row("stall:1", 54.7), _row("pipe:1", 54.7 - 11.4375)]
    m = metrics(rows, 128)
    assert m["step_ratio.pipe:1/stall:1"] == pytest.approx(43.2625 / 54.7)
    assert m["hidden_training_share.pipe:1"] == pytest.approx(11.4375 / 12.2)
    # A slow generation in one arm moves the raw ratio, not the tail-based one.
    rows[1] = _row("pipe:1", 54.7 - 11.4375 + 2.0, gen=14.3)
    m2 = metrics(rows, 128)
    assert m2["step_ratio.pipe:1/stall:1"] == pytest.approx(
        (13.3 + 43.2625 - 12.3) / (13.3 + 54.7 - 12.3)
    )
    assert m2["raw_step_ratio.pipe:1/stall:1"] == pytest.approx((43.2625 + 2.0) / 54.7)


def test_drift_is_the_cv_across_arm_means() -> None:
    rows = [
        _row("const:2", 26.5, gen=10.0, train=10.0),
        _row("const:10", 34.5, gen=12.0, train=10.0),
        _row("pipe:1", 40.0, gen=11.0, train=30.0),  # a pipelined arm: training drift left out
    ]
    m = metrics(rows, 128)
    assert m["drift.generation_cv"] == pytest.approx(math.sqrt(2 / 3) / 11.0)
    assert m["drift.training_cv"] == 0.0
    assert m["drift.training_cv_all"] > 0.4


def test_distinct_outputs_and_time_weighted_idle() -> None:
    rows = [
        _row("const:2", 10.0, gen=2.0, train=3.0, tokens="a"),
        _row("const:2", 30.0, gen=2.0, train=3.0, tokens="b"),
    ]
    m = metrics(rows, 128)
    assert m["generation.distinct_outputs"] == 2.0
    assert m["idle.const:2"] == pytest.approx(1 - 10 / 40)  # not the mean of 0.5 and 0.833


def test_sandbox_busy_is_compared_with_every_barrier_dial_arm() -> None:
    rows = [
        _row("const:2", 26.5, gen=10.0, train=10.0),
        _row("stall:1", 54.5, gen=12.0, train=12.0),
        _row("sandbox", 40.0, gen=11.0, train=13.2, model_step=math.nan),
    ]
    m = metrics(rows, 128)
    assert m["busy_ratio.sandbox/dial"] == pytest.approx(24.2 / 22.0)
    assert "model_error.sandbox" not in m


def test_missing_arms_give_no_metric() -> None:
    m = metrics([_row("const:2", 26.5)], 128)
    assert "idle_gap.stall:1-const:2" not in m
    assert "drift.generation_cv" not in m  # one arm: no spread to measure


def test_summary_and_csv_round_trip(tmp_path: Path) -> None:
    rows = [_row("const:2", 26.5), _row("stall:1", 54.5, timeouts=1, model_step=math.nan)]
    back = read_rows(write_rows(tmp_path / "s.csv", rows))
    assert back[0] == rows[0]
    assert back[1].arm == "stall:1" and math.isnan(back[1].model_step)
    stats = summarize(back)
    assert list(stats) == ["const:2", "stall:1"]
    assert stats["stall:1"].stall_share == 1.0
    (tmp_path / "bad.csv").write_text("block,arm\nx,y\n")
    with pytest.raises(ConfigError, match=r"bad\.csv:2"):
        read_rows(tmp_path / "bad.csv")


def test_json_safe() -> None:
    assert json_safe({"a": [1.0, math.nan, (math.inf, "x")]}) == {"a": [1.0, None, [None, "x"]]}
