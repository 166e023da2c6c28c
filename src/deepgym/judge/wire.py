"""Plain-data codec for the RPC between the verifier and the solution (one JSON line a message).

Only JSON-like values, tuples, sets, frozensets, bytes, non-finite floats and big integers
cross; anything else the solution returns travels as a reference (an id into the solution's own
table). Nothing is ever unpickled from the untrusted side. ``decode(encode(x)) == x`` for every
plain value (property-tested).
"""

from __future__ import annotations

import binascii
import math

try:  # the C scanner and encoder: no ``re`` import, which matters at sandbox start-up
    import _json
except ImportError:  # pragma: no cover - other Pythons
    _json = None  # type: ignore[assignment]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_SCAN: Any = None
_ENCODE: Any = None

REF = "__ref__"
_TAGS = (
    "__tuple__",
    "__set__",
    "__frozenset__",
    "__bytes__",
    "__float__",
    "__int__",
    "__dict__",
    REF,
)
_TAG_SET = frozenset(_TAGS)
_STR = frozenset((str,))
MAX_DEPTH = 200
_BIG_INT_BITS = 10_000
"""Past this (about 3,000 digits) an int travels as hex: Python refuses to print or parse a
decimal int of more than 4,300 digits, and hex has no such limit."""


class WireError(ValueError):
    """A value that cannot cross, or a message that is not well formed."""


def _enc(x: Any, ref: Callable[[Any], int] | None, depth: int) -> Any:
    t = type(x)  # exact types first: most of what crosses is plain (a call's cost is here)
    if t is str or t is bool or x is None:
        return x
    if t is int:
        return x if x.bit_length() <= _BIG_INT_BITS else {"__int__": hex(x)}
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if t is list:
        return [_enc(v, ref, depth + 1) for v in x]
    if t is dict and _STR.issuperset(map(type, x)) and _TAG_SET.isdisjoint(x):
        return {k: _enc(v, ref, depth + 1) for k, v in x.items()}
    return _enc_other(x, ref, depth)


def _enc_other(x: Any, ref: Callable[[Any], int] | None, depth: int) -> Any:
    if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > _BIG_INT_BITS:
        return {"__int__": hex(x)}
    if x is None or isinstance(x, bool | int | str):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"__float__": repr(x)}
    if isinstance(x, list):
        return [_enc(v, ref, depth + 1) for v in x]
    if isinstance(x, tuple):
        return {"__tuple__": [_enc(v, ref, depth + 1) for v in x]}
    if isinstance(x, set | frozenset):
        tag = "__set__" if isinstance(x, set) else "__frozenset__"
        return {tag: [_enc(v, ref, depth + 1) for v in x]}
    if isinstance(x, bytes | bytearray):
        return {"__bytes__": binascii.b2a_base64(bytes(x), newline=False).decode("ascii")}
    if isinstance(x, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in x):
            return {k: _enc(v, ref, depth + 1) for k, v in x.items()}
        return {
            "__dict__": [[_enc(k, ref, depth + 1), _enc(v, ref, depth + 1)] for k, v in x.items()]
        }
    if ref is not None:
        return {REF: ref(x)}
    raise WireError(f"a {type(x).__name__} cannot cross the sandbox boundary")


def _dec(x: Any, deref: Callable[[int], Any] | None, depth: int) -> Any:
    t = type(x)  # what the scanner makes: exact types only
    if t is not list and t is not dict:
        return x
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if t is list:
        return [_dec(v, deref, depth + 1) for v in x]
    if len(x) == 1:
        ((tag, body),) = x.items()
        if tag == "__tuple__":
            return tuple(_dec(v, deref, depth + 1) for v in body)
        if tag == "__set__":
            return {_dec(v, deref, depth + 1) for v in body}
        if tag == "__frozenset__":
            return frozenset(_dec(v, deref, depth + 1) for v in body)
        if tag == "__bytes__":
            return binascii.a2b_base64(body)
        if tag == "__float__":
            return float(body)
        if tag == "__int__":
            return int(body, 16)
        if tag == "__dict__":
            return {_dec(k, deref, depth + 1): _dec(v, deref, depth + 1) for k, v in body}
        if tag == REF:
            if deref is None or not isinstance(body, int):
                raise WireError("unexpected reference")
            return deref(body)
    return {k: _dec(v, deref, depth + 1) for k, v in x.items()}


class _Context:
    """What the C scanner reads from a ``json.JSONDecoder``: strict JSON, plain containers."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict[str, str] = {}  # noqa: RUF012 - the scanner's own cache, shared on purpose

    @staticmethod
    def parse_constant(name: str) -> float:
        raise ValueError(f"{name} is not JSON")


def dumps(x: Any) -> str:
    """Compact JSON text of plain JSON data (no NaN: ``_enc`` tags non-finite floats first)."""
    global _ENCODE
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(x, separators=(",", ":"), allow_nan=False)
    if _ENCODE is None:
        _ENCODE = _json.make_encoder(
            {}, _no_default, _json.encode_basestring_ascii, None, ":", ",", False, False, False
        )
    return "".join(_ENCODE(x, 0))


def loads(text: str) -> Any:
    """Parse one JSON document; raises ``ValueError`` (or ``RecursionError``) if malformed."""
    global _SCAN
    if _json is None:  # pragma: no cover
        import json

        return json.loads(text)
    if _SCAN is None:
        _SCAN = _json.make_scanner(_Context())  # type: ignore[arg-type]
    text = text.strip(" \t\n\r")
    try:
        value, end = _SCAN(text, 0)
    except StopIteration as exc:
        raise ValueError(f"expecting a value at {exc.value}") from None
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def _no_default(x: Any) -> Any:
    raise TypeError(f"{type(x).__name__} is not JSON serializable")


def encode(x: Any, ref: Callable[[Any], int] | None = None) -> bytes:
    """One message: compact JSON, newline-terminated (JSON never holds a raw newline)."""
    return dumps(_enc(x, ref, 0)).encode("ascii") + b"\n"


def decode(line: bytes | str, deref: Callable[[int], Any] | None = None) -> Any:
    """Inverse of ``encode``; raises ``WireError`` on anything malformed."""
    try:
        text = line.decode("utf-8") if isinstance(line, bytes | bytearray) else line
        raw = loads(text)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {exc}") from exc
    try:
        return _dec(raw, deref, 0)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {exc}") from exc
