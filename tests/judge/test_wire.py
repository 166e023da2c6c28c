"""The judge's plain-data codec: ``decode(encode(x)) == x``; garbage only raises WireError."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deepgym.judge import wire

TAG_KEYS = [
    "__tuple__",
    "__set__",
    "__frozenset__",
    "__bytes__",
    "__float__",
    "__int__",
    "__dict__",
]
TAG_KEYS += ["__ref__"]

floats = st.floats(allow_nan=True, allow_infinity=True)
# Huge ints are built, not drawn: hypothesis cannot print a decimal int past 4,300 digits.
huge_ints = st.tuples(st.integers(3000, 6000), st.integers(-5, 5), st.booleans()).map(
    lambda t: (-1 if t[2] else 1) * (10 ** t[0] + t[1])
)
ints = st.integers() | huge_ints
texts = st.text(max_size=12) | st.sampled_from(TAG_KEYS)
scalars = st.none() | st.booleans() | ints | floats | texts | st.binary(max_size=12)
hashables = st.recursive(
    scalars,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)
plain = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
        | st.dictionaries(texts, inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=4)
    ),
    max_leaves=12,
)


def canon(x: Any) -> Any:
    """A hashable, exact form of ``x``: types kept, floats by ``repr`` (so NaN equals NaN, and
    ``-0.0`` differs from ``0.0``), containers by content."""
    if x is None or isinstance(x, bool | str | bytes):
        return (type(x).__name__, x)
    if isinstance(x, int):
        return ("int", x)
    if isinstance(x, float):
        return ("float", repr(x))
    if isinstance(x, list | tuple):
        return (type(x).__name__, tuple(canon(v) for v in x))
    if isinstance(x, set | frozenset):
        return (type(x).__name__, frozenset(canon(v) for v in x))
    if isinstance(x, dict):
        return ("dict", frozenset((canon(k), canon(v)) for k, v in x.items()))
    raise AssertionError(f"not a plain value: {x!r}")


@given(plain)
@example(float("nan"))
@example([float("inf"), float("-inf"), -0.0])
@example(10**5000)
@example(-(2**20000))
@example({"__tuple__": [1]})
@example({(1, 2): "a", frozenset({3}): b"\x00", None: 1.5, float("nan"): True})
@example({float("nan"), 1})
def test_round_trip(x: Any) -> None:
    data = wire.encode(x)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert canon(wire.decode(data)) == canon(x)


@given(plain)
def test_decode_accepts_str_and_bytes(x: Any) -> None:
    data = wire.encode(x)
    assert canon(wire.decode(data.decode("ascii"))) == canon(wire.decode(data))


def test_canon_tells_apart_what_must_not_be_confused() -> None:
    # The comparison itself could hide a broken round trip; check it can fail.
    assert canon((1, 2)) != canon([1, 2])
    assert canon({1}) != canon(frozenset({1}))
    assert canon(True) != canon(1)
    assert canon(1) != canon(1.0)
    assert canon(0.0) != canon(-0.0)
    assert canon(b"a") != canon("a")
    assert canon(float("nan")) == canon(float("nan"))


def test_references_go_through_the_callbacks() -> None:
    class Opaque:
        pass

    table: list[Any] = []

    def ref(obj: Any) -> int:
        table.append(obj)
        return len(table) - 1

    obj = Opaque()
    data = wire.encode({"x": [obj, 1]}, ref)
    assert wire.decode(data, deref=lambda i: ("ref", i)) == {"x": [("ref", 0), 1]}
    with pytest.raises(wire.WireError, match="reference"):
        wire.decode(data)  # no deref on this side: a reference is refused
    with pytest.raises(wire.WireError, match="cannot cross"):
        wire.encode(Opaque())


def test_nesting_is_bounded() -> None:
    deep: Any = []
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.WireError):
        wire.encode(deep)
    with pytest.raises(wire.WireError):
        wire.decode(b"[" * 100_000 + b"]" * 100_000)


json_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(TAG_KEYS) | st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=8,
)


@given(st.binary(max_size=200) | json_junk.map(lambda v: json.dumps(v).encode()))
@example(b'{"__bytes__": "!!"}')
@example(b'{"__bytes__": 5}')
@example(b'{"__bytes__": "\\u00e9"}')
@example(b'{"__float__": "abc"}')
@example(b'{"__tuple__": 5}')
@example(b'{"__set__": [[1]]}')
@example(b'{"__dict__": [[[1], 2]]}')
@example(b'{"__dict__": [[1]]}')
@example(b'{"__ref__": "x"}')
@example(b"1" * 5000)
@example(b"NaN")
@example(b"\xff\xfe\x00")
@example(b"[1] [2]")
def test_garbage_raises_only_wire_error(data: bytes) -> None:
    try:
        wire.decode(data)
    except wire.WireError:
        return  # the one way decode may fail


def test_wire_error_is_a_value_error() -> None:
    # The judge runs without deepgym installed, so WireError cannot share deepgym's root; callers
    # that catch ValueError still catch it.
    assert issubclass(wire.WireError, ValueError)


def test_non_finite_floats_are_tagged_not_bare_json() -> None:
    data = wire.encode([float("nan"), float("inf")])
    assert b"NaN" not in data and b"Infinity" not in data
    out = wire.decode(data)
    assert math.isnan(out[0]) and out[1] == math.inf
