"""How an answer's value is compared with the expected one (declarative test cases)."""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

REL_TOL = 1e-6
ABS_TOL = 1e-6


def normalise(x: Any) -> Any:
    """Tuples become lists, recursively, so JSON test data can state them."""
    if isinstance(x, tuple | list):
        return [normalise(v) for v in x]
    if isinstance(x, dict):
        return {k: normalise(v) for k, v in x.items()}
    return x


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return bool(a == b)


def _number(word: str) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


def _close_words(got: list[str], want: list[str]) -> bool:
    """Words equal, or both numbers within ``REL_TOL`` / ``ABS_TOL`` of each other (a
    program's float output: ``0.3333333`` for ``1/3``); ``nan`` and ``inf`` only as words."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g == w:
            continue
        x, y = _number(g), _number(w)
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            return False
        if not math.isclose(x, y, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return False
    return True


def _same_type_equal(a: Any, b: Any) -> bool:
    """Equality that does not let ``True`` stand for ``1`` or ``1.0`` for ``1``."""
    if type(a) is not type(b) and not (isinstance(a, int | float) and isinstance(b, int | float)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_type_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_type_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _key(x: Any) -> str:
    return repr(x)


def equal(actual: Any, expected: Any, how: str) -> bool:
    """True when ``actual`` matches ``expected`` under the comparison ``how``."""
    a, e = normalise(actual), normalise(expected)
    text = isinstance(a, str) and isinstance(e, str)
    if text and how in ("tokens", "float") and a.strip() == e.strip():
        return True  # the same words: a program's output need not be split (0.27 ms for 44 KB)
    if how == "float":
        if text:  # a program's output: word by word
            return _close_words(a.split(), e.split())
        return _close(a, e)
    if how == "unordered":
        if not isinstance(a, list) or not isinstance(e, list):
            return _same_type_equal(a, e)
        return sorted(map(_key, a)) == sorted(map(_key, e))
    if how == "tokens":
        return str(a).split() == str(e).split()
    return _same_type_equal(a, e)
