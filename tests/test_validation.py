"""The input checks every entry point shares: one strictness (a bool is never a number)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError
from deepgym.validation import (
    non_negative_int,
    optional_positive_int,
    optional_seconds,
    positive_int,
    seconds,
)


@pytest.mark.parametrize("bad", [0, -3, True, False, 1.0, "1", None, 2**0.5])
def test_positive_int_refuses_what_is_not_a_count(bad: object) -> None:
    with pytest.raises(ConfigError, match="n must be a positive int"):
        positive_int(bad, "n")


def test_ints_pass_through() -> None:
    assert positive_int(3, "n") == 3
    assert optional_positive_int(None, "n") is None
    assert non_negative_int(0, "n") == 0
    with pytest.raises(ConfigError, match=">= 0"):
        non_negative_int(-1, "n")
    with pytest.raises(ConfigError, match="or None"):
        optional_positive_int(True, "n")


@pytest.mark.parametrize("bad", [0, -1.5, math.inf, -math.inf, math.nan, True, "2", None, 10**400])
def test_seconds_are_finite_and_positive(bad: object) -> None:
    with pytest.raises(ConfigError, match="t must be a"):
        seconds(bad, "t")


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers() | st.booleans())
def test_seconds_is_total(value: object) -> None:
    try:
        out = seconds(value, "t")
    except ConfigError:
        return
    assert isinstance(out, float) and math.isfinite(out) and out > 0
    assert optional_seconds(value, "t") == out
