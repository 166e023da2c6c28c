"""Pre-registered predictions: parsing, validation, and held/refuted on synthetic data."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from deepgym.exceptions import ConfigError
from deepgym.latency.analysis import StepRow, metrics
from deepgym.latency.arms import DEFAULT_ARMS, parse_arm
from deepgym.latency.predictions import (
    default_path,
    evaluate,
    load_predictions,
    parse_predictions,
    verdict_rows,
)

GOOD = """
[[prediction]]
id = "idle"
statement = "Idle is about half."
metric = "idle.stall:1"
expected = [0.4, 0.6]
falsifier = "idle outside [0.4, 0.6]"

[[prediction]]
id = "ratio"
statement = "Pipelining shortens the step."
metric = "step_ratio.pipe:1/stall:1"
expected = [0, 0.9]
falsifier = "ratio above 0.9"

[[prediction]]
id = "missing"
statement = "A metric nobody measures."
metric = "nothing.here"
expected = [0, 1]
falsifier = "-"
"""


def test_parse_and_evaluate_held_refuted_and_no_data() -> None:
    preds = parse_predictions(GOOD)
    assert [p.id for p in preds] == ["idle", "ratio", "missing"]
    assert (preds[0].low, preds[0].high) == (0.4, 0.6)
    verdicts = evaluate(preds, {"idle.stall:1": 0.55, "step_ratio.pipe:1/stall:1": 0.95})
    assert [v.status for v in verdicts] == ["held", "refuted", "no data"]
    assert [v.value for v in verdicts] == [0.55, 0.95, None]
    rows = verdict_rows(verdicts)
    assert rows[0] == ["idle", "idle.stall:1", "[0.4, 0.6]", "0.55", "HELD"]
    assert rows[1][-1] == "REFUTED" and rows[2][-2:] == ["-", "NO DATA"]


@pytest.mark.parametrize(("value", "status"), [(0.4, "held"), (0.6, "held"), (0.3999, "refuted")])
def test_the_range_is_inclusive(value: float, status: str) -> None:
    (v,) = evaluate(parse_predictions(GOOD)[:1], {"idle.stall:1": value})
    assert v.status == status


def test_a_nan_metric_is_not_a_verdict() -> None:
    (v,) = evaluate(parse_predictions(GOOD)[:1], {"idle.stall:1": math.nan})
    assert v.status == "no data"


def _one(**fields: object) -> str:
    base: dict[str, object] = {
        "id": '"a"',
        "statement": '"s"',
        "metric": '"m"',
        "expected": "[0, 1]",
        "falsifier": '"f"',
    }
    base.update(fields)
    body = "\n".join(f"{k} = {v}" for k, v in base.items() if v is not None)
    return f"[[prediction]]\n{body}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not = [toml", "malformed TOML"),
        ("title = 'x'", "expected one or more"),
        (_one(falsifier=None), r"prediction\[0\] is missing falsifier"),
        (_one(expected="[1, 0]"), r"prediction\[0\]\.expected"),
        (_one(expected="[0]"), r"prediction\[0\]\.expected"),
        (_one(expected='["a", 1]'), r"prediction\[0\]\.expected"),
        (_one(expected="[0, inf]"), r"prediction\[0\]\.expected"),
        (_one(metric='""'), r"prediction\[0\]\.metric"),
        (_one(colour='"red"'), "unknown field"),
        (_one() + _one(), "appears twice"),
    ],
)
def test_malformed_files_name_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_predictions(text)


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_predictions(tmp_path / "none.toml")
    path = tmp_path / "p.toml"
    path.write_text(GOOD)
    assert len(load_predictions(path)) == 3


def _rows_for_every_arm() -> list[StepRow]:
    rows = []
    for i, name in enumerate(DEFAULT_ARMS):
        arm = parse_arm(name)
        rows.append(
            StepRow(
                block=0,
                position=i,
                arm=name,
                mode="pipelined" if arm.pipelined else "barrier",
                reward=arm.reward,
                step=2.0,
                generation=0.5,
                reward_wait=1.0,
                training=0.5,
                busy=1.0,
                idle=0.5,
                timeouts=1,
                no_verdict=1,
                tokens="t",
                model_step=2.0 if arm.reward == "dial" else math.nan,
            )
        )
    return rows


def test_the_shipped_file_loads_and_every_metric_it_names_is_measured() -> None:
    preds = load_predictions()
    assert default_path().name == "predictions.toml"
    assert len(preds) >= 12
    measured = set(metrics(_rows_for_every_arm(), 128))
    measured |= {"profile.outside_share.const:2", "profile.outside_share.pipe:1"}
    assert sorted({p.metric for p in preds} - measured) == []
    for p in preds:
        assert p.falsifier.strip() and p.statement.strip()
