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
    positive_number,
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


# -- bounds: every number finite and under its documented maximum, every string sendable ------


def test_numbers_have_documented_maxima() -> None:
    from deepgym.validation import MAX_COUNT, MAX_SECONDS, bounded_int, number

    assert seconds(MAX_SECONDS, "t") == MAX_SECONDS
    with pytest.raises(ConfigError, match=r"t must be a positive number of seconds \(at most"):
        seconds(MAX_SECONDS * 2, "t")
    with pytest.raises(ConfigError, match="at most 5"):
        seconds(6, "t", maximum=5)
    assert positive_int(MAX_COUNT, "n") == MAX_COUNT
    with pytest.raises(ConfigError, match="an int past 10"):
        positive_int(10**400, "n")  # its repr alone would raise: the message says it in words
    assert bounded_int(7, "p", 1, 7) == 7
    for bad in (0, 8, True, 7.0, None):
        with pytest.raises(ConfigError, match="p must be an int from 1 to 7"):
            bounded_int(bad, "p", 1, 7)
    assert number(0.5, "x", 0, 1) == 0.5
    for bad in (math.nan, math.inf, -0.1, False, 10**400, "0.5"):
        with pytest.raises(ConfigError, match="x must be a number from 0 to 1"):
            number(bad, "x", 0, 1)


def test_text_and_names() -> None:
    from deepgym.validation import MAX_NAME_CHARS, depth_at_most, name_str, text

    assert text("é🙂", "s") == "é🙂"
    with pytest.raises(ConfigError, match="lone surrogate at index 2"):
        text("ab\ud800", "s")
    with pytest.raises(ConfigError, match="s is 11 characters long: the limit is 10"):
        text("x" * 11, "s", 10)
    with pytest.raises(ConfigError, match="s must be a str, got int"):
        text(3, "s")
    assert name_str("humaneval/3", "env") == "humaneval/3"
    for bad, why in [
        ("", "non-empty"),
        ("a\nb", "control character at index 1"),
        ("x" * 257, "the limit is 256"),
    ]:
        with pytest.raises(ConfigError, match=why):
            name_str(bad, "env")
    assert len(name_str("x" * MAX_NAME_CHARS, "env")) == MAX_NAME_CHARS
    deep: list[object] = []
    for _ in range(100_000):  # past the stack, were it checked by recursion
        deep = [deep]
    with pytest.raises(ConfigError, match="cases nests deeper than 64 levels"):
        depth_at_most(deep, "cases")
    assert depth_at_most({"a": [[1]]}, "cases") == {"a": [[1]]}


def test_a_message_shows_a_hostile_value_in_a_line() -> None:
    for bad in ("x\n" * 10**6, [[[]]] * 10**5, {"a": 1}):
        with pytest.raises(ConfigError) as info:
            seconds(bad, "t")
        assert "\n" not in str(info.value) and len(str(info.value)) < 200


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1", None, 10**400])
def test_positive_number_refuses_what_is_not_a_finite_positive_number(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^x must be a positive number"):
        positive_number(bad, "x")
    assert positive_number(2, "x") == 2.0 and positive_number(0.5, "x") == 0.5


def test_hand_checks_now_go_through_validation() -> None:
    from deepgym.images.distribution import _Session
    from deepgym.images.reference import parse_reference
    from deepgym.scheduling import TimeLimitPolicy

    ref = parse_reference("127.0.0.1:5000/a:b")
    for timeout in (float("nan"), 0, True):
        with pytest.raises(ConfigError, match=r"^timeout must be"):
            _Session(ref, insecure=None, timeout=timeout, retries=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^retries must be"):
        _Session(ref, insecure=None, timeout=1.0, retries=-1)
    with pytest.raises(ConfigError, match=r"^time limit factor must be a positive number"):
        TimeLimitPolicy(factor=True)  # type: ignore[arg-type]


def test_is_loopback_is_one_rule_for_the_service_and_the_registry_client() -> None:
    from deepgym.images.reference import parse_reference
    from deepgym.server.launch import is_loopback as service_rule
    from deepgym.validation import is_loopback

    assert service_rule is is_loopback
    for host in ("localhost", "127.0.0.1", "127.8.9.1", "::1", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "10.0.0.1", "example.com", "localhost.example.com", "", "[::2]"):
        assert not is_loopback(host), host
    assert parse_reference("localhost:5000/a").is_loopback
    assert not parse_reference("example.com:5000/a").is_loopback
