"""Pre-registered predictions: written before a run, marked held or refuted by its data.

A predictions file is TOML with one ``[[prediction]]`` table per claim::

    [[prediction]]
    id = "barrier-idle"
    statement = "One timeout per batch at a 2 s median takes GPU idle to about 55%."
    metric = "idle.stall:1"          # a name the sweep measures (see deepgym.latency.sweep)
    expected = [0.47, 0.62]          # inclusive range the measured value must fall in
    falsifier = "mean idle of the stall:1 arm outside [47%, 62%]"

The verdict is mechanical: ``held`` if the metric is in the range, ``refuted`` if it is not,
``no data`` if the run did not measure it (never a silent pass). The default file ships in the
package (``predictions.toml``): the seed's claims, scaled to the machine the sweep runs on.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from deepgym.exceptions import ConfigError

__all__ = [
    "Finding",
    "Prediction",
    "default_path",
    "evaluate",
    "load_predictions",
    "parse_predictions",
    "verdict_rows",
]

Status = Literal["held", "refuted", "no data"]
_FIELDS = ("id", "statement", "metric", "expected", "falsifier")


@dataclass(frozen=True)
class Prediction:
    """One registered claim: what is expected of which metric, and what would refute it."""

    id: str
    statement: str
    metric: str
    low: float
    high: float
    falsifier: str


@dataclass(frozen=True)
class Finding:
    """A prediction marked against measured data: held, refuted, or no data (a sweep's
    finding, not the verdict contract's verdict)."""

    prediction: Prediction
    value: float | None
    status: Status


def default_path() -> Path:
    """The predictions file that ships with deepgym."""
    return Path(str(resources.files("deepgym.latency").joinpath("predictions.toml")))


def _prediction(i: int, item: Any) -> Prediction:
    where = f"prediction[{i}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where} must be a table")
    missing = [k for k in _FIELDS if k not in item]
    if missing:
        raise ConfigError(f"{where} is missing {', '.join(missing)}")
    unknown = sorted(set(item) - set(_FIELDS))
    if unknown:
        raise ConfigError(f"{where} has unknown field(s) {', '.join(unknown)}")
    for key in ("id", "statement", "metric", "falsifier"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise ConfigError(f"{where}.{key} must be a non-empty string")
    rng = item["expected"]
    if (
        not isinstance(rng, list)
        or len(rng) != 2
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in rng)
        or not all(math.isfinite(x) for x in rng)
        or rng[0] > rng[1]
    ):
        raise ConfigError(f"{where}.expected must be [low, high] with finite low <= high")
    return Prediction(
        item["id"],
        item["statement"],
        item["metric"],
        float(rng[0]),
        float(rng[1]),
        item["falsifier"],
    )


def parse_predictions(text: str, source: str = "<predictions>") -> list[Prediction]:
    """Predictions from TOML text; a malformed file names the offending field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: malformed TOML ({exc})") from None
    items = data.get("prediction")
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{source}: expected one or more [[prediction]] tables")
    out = [_prediction(i, item) for i, item in enumerate(items)]
    seen: set[str] = set()
    for p in out:
        if p.id in seen:
            raise ConfigError(f"{source}: prediction id {p.id!r} appears twice")
        seen.add(p.id)
    return out


def load_predictions(path: str | Path | None = None) -> list[Prediction]:
    """The predictions in ``path`` (the shipped default when None)."""
    p = default_path() if path is None else Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"predictions file {p}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ConfigError(f"predictions file {p}: {exc}") from None
    return parse_predictions(text, str(p))


def evaluate(predictions: Sequence[Prediction], metrics: Mapping[str, float]) -> list[Finding]:
    """Mark each prediction: held if its metric lies in its range, refuted if not, no data if
    the metric was not measured (or is not a finite number)."""
    out = []
    for p in predictions:
        value = metrics.get(p.metric)
        if value is None or not math.isfinite(value):
            out.append(Finding(p, None, "no data"))
        else:
            out.append(Finding(p, float(value), "held" if p.low <= value <= p.high else "refuted"))
    return out


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def verdict_rows(verdicts: Sequence[Finding]) -> list[list[str]]:
    """``[id, metric, expected, measured, verdict]`` per prediction, for a table."""
    return [
        [
            v.prediction.id,
            v.prediction.metric,
            f"[{_fmt(v.prediction.low)}, {_fmt(v.prediction.high)}]",
            "-" if v.value is None else _fmt(v.value),
            v.status.upper(),
        ]
        for v in verdicts
    ]
