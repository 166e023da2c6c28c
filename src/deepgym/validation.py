"""Input checks shared by every public entry point: one strictness, one message shape.

Each check returns the value (normalised) or raises ``ConfigError`` naming the parameter. A
``bool`` is never accepted as a number (``True`` is an ``int`` to Python, never a count or a
time here), and a time is finite: a NaN or an infinity is a client's mistake, refused before
anything runs.
"""

from __future__ import annotations

import math
from typing import Any

from deepgym.exceptions import ConfigError

__all__ = [
    "at_least",
    "non_negative_int",
    "optional_positive_int",
    "optional_seconds",
    "positive_int",
    "probability",
    "seconds",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(value: Any, name: str) -> int:
    """``value`` if it is an int >= 1."""
    if not _is_int(value) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def optional_positive_int(value: Any, name: str) -> int | None:
    """``value`` if it is None or an int >= 1."""
    if value is None:
        return None
    if not _is_int(value) or value < 1:
        raise ConfigError(f"{name} must be a positive int or None, got {value!r}")
    return int(value)


def at_least(value: Any, name: str, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum``."""
    if not _is_int(value) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def non_negative_int(value: Any, name: str) -> int:
    """``value`` if it is an int >= 0."""
    return at_least(value, name, 0)


def probability(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1]."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def seconds(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """``value`` as float seconds, if it is a finite number > 0 (>= 0 with ``allow_zero``)."""
    kind = "a finite number of seconds >= 0" if allow_zero else "a positive number of seconds"
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(f"{name} must be {kind}, got {value!r}")
    try:
        out = float(value)
    except OverflowError:  # an int past float's range
        raise ConfigError(f"{name} must be {kind}, got {value!r}") from None
    if not math.isfinite(out) or out < 0 or (out == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {kind}, got {value!r}")
    return out


def optional_seconds(value: Any, name: str) -> float | None:
    """``value`` as float seconds, or None (no limit, or the default)."""
    return None if value is None else seconds(value, name)
