"""Plain-data codec for the RPC between the verifier and the solution (one JSON line a message).

Only JSON-like values, tuples, sets, frozensets, bytes, non-finite floats and big integers
cross; anything else the solution returns travels as a reference (an id into the solution's own
table). Nothing is ever unpickled from the untrusted side. ``decode(encode(x)) == x`` for every
plain value (property-tested).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

REF = "__ref__"
_TAGS = ("__tuple__", "__set__", "__frozenset__", "__bytes__", "__float__", "__dict__", REF)
MAX_DEPTH = 200


class WireError(ValueError):
    """A value that cannot cross, or a message that is not well formed."""


def _enc(x: Any, ref: Callable[[Any], int] | None, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
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
        return {"__bytes__": base64.b64encode(bytes(x)).decode("ascii")}
    if isinstance(x, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in x):
            return {k: _enc(v, ref, depth + 1) for k, v in x.items()}
        return {"__dict__": [[_enc(k, ref, depth + 1), _enc(v, ref, depth + 1)] for k, v in x.items()]}
    if ref is not None:
        return {REF: ref(x)}
    raise WireError(f"a {type(x).__name__} cannot cross the sandbox boundary")


def _dec(x: Any, deref: Callable[[int], Any] | None, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if isinstance(x, list):
        return [_dec(v, deref, depth + 1) for v in x]
    if not isinstance(x, dict):
        return x
    if len(x) == 1:
        ((tag, body),) = x.items()
        if tag == "__tuple__":
            return tuple(_dec(v, deref, depth + 1) for v in body)
        if tag == "__set__":
            return {_dec(v, deref, depth + 1) for v in body}
        if tag == "__frozenset__":
            return frozenset(_dec(v, deref, depth + 1) for v in body)
        if tag == "__bytes__":
            return base64.b64decode(body)
        if tag == "__float__":
            return float(body)
        if tag == "__dict__":
            return {_dec(k, deref, depth + 1): _dec(v, deref, depth + 1) for k, v in body}
        if tag == REF:
            if deref is None or not isinstance(body, int):
                raise WireError("unexpected reference")
            return deref(body)
    return {k: _dec(v, deref, depth + 1) for k, v in x.items()}


def encode(x: Any, ref: Callable[[Any], int] | None = None) -> bytes:
    """One message: compact JSON, newline-terminated (JSON never holds a raw newline)."""
    return json.dumps(_enc(x, ref, 0), separators=(",", ":")).encode("utf-8") + b"\n"


def decode(line: bytes | str, deref: Callable[[int], Any] | None = None) -> Any:
    """Inverse of ``encode``; raises ``WireError`` on anything malformed."""
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {exc}") from exc
    try:
        return _dec(raw, deref, 0)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"malformed message: {exc}") from exc
