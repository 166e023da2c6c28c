"""Input checks shared by every public entry point: one strictness, one message shape.

Each check returns the value (normalised) or raises ``ConfigError`` naming the parameter, in one
line. What crosses a boundary (a Python argument, an HTTP body, a CLI option, an environment's
``metadata.json``, an inline environment on the service) is checked here, before anything runs:

- A ``bool`` is never accepted as a number (``True`` is an ``int`` to Python, never a count or a
  time here).
- A number is finite and bounded: a NaN, an infinity or a value past its documented maximum is a
  client's mistake (an infinite time limit overflows the rounding that sets the CPU rlimit; a
  count of ``10**30`` overflows the cgroup file it is written to), never a failure of ours.
- A string is a ``str`` of bounded length that encodes to UTF-8 (a lone surrogate, which JSON's
  ``\\ud800`` decodes to, cannot be written to a file, a socket or the run store); a name has no
  control characters.
- Nested data (test cases) is bounded in depth, so encoding it never exhausts the stack.

The maxima (``MAX_*``) are generous for any real task and small enough that every consumer
(``math.ceil``, ``setrlimit``, a cgroup file, a deadline on the monotonic clock) can take them.
The ``*_field`` helpers wrap a check for a pydantic model (``BeforeValidator``): the model runs
the same check, and pydantic reports its message with the field's location.
"""

from __future__ import annotations

import ipaddress
import math
import unicodedata
from collections.abc import Callable
from typing import Any

from pydantic import BeforeValidator

from deepgym.exceptions import ConfigError
from deepgym.text import clip

__all__ = [
    "MAX_CASES",
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_FILE_MB",
    "MAX_KEPT_OUTPUT_KB",
    "MAX_MEMORY_MB",
    "MAX_NAME_CHARS",
    "MAX_PATH_CHARS",
    "MAX_PROCESSES",
    "MAX_SECONDS",
    "MAX_TEXT_CHARS",
    "at_least",
    "bounded_int",
    "depth_at_most",
    "int_field",
    "is_loopback",
    "name_field",
    "name_str",
    "non_negative_int",
    "number",
    "optional_positive_int",
    "optional_seconds",
    "optional_seconds_field",
    "optional_text_field",
    "positive_int",
    "positive_number",
    "probability",
    "seconds",
    "seconds_field",
    "text",
    "text_field",
]

MAX_SECONDS = 7 * 24 * 3600.0
"""The longest time any parameter may name: one week (a time limit, a timeout, a lifetime)."""
MAX_COUNT = 10**9
"""The largest count a parameter may name (workers, answers in parallel, a group's size)."""
MAX_PROCESSES = 1 << 22
"""An environment's ``max_processes`` at most: Linux's own ceiling on pids (``pid_max``)."""
MAX_MEMORY_MB = 1 << 20
"""An environment's ``memory_mb`` at most: one TiB."""
MAX_FILE_MB = 1 << 20
"""An environment's ``max_file_mb`` at most: one TiB."""
MAX_KEPT_OUTPUT_KB = 16 * 1024
"""An environment's ``kept_output_kb`` at most: 16 MiB, the most a report carries in all."""
MAX_NAME_CHARS = 256
"""A name (an environment's, a suite's, an entry point, a tag) at most."""
MAX_PATH_CHARS = 4096
"""A path inside a session's sandbox at most (Linux's ``PATH_MAX``)."""
MAX_TEXT_CHARS = 64 * 2**20
"""A text (an answer, a task, verifier code, a command) at most: 64 Mi characters."""
MAX_CASES = 100_000
"""An environment's ``test_cases`` at most."""
MAX_DEPTH = 64
"""How deeply a test case's data may nest (lists in lists, objects in objects)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def bounded_int(value: Any, name: str, minimum: int, maximum: int) -> int:
    """``value`` if it is an int in ``[minimum, maximum]``."""
    if not _is_int(value) or not minimum <= value <= maximum:
        raise ConfigError(f"{name} must be an int from {minimum} to {maximum}, got {_show(value)}")
    return int(value)


def positive_int(value: Any, name: str, maximum: int = MAX_COUNT) -> int:
    """``value`` if it is an int >= 1 (and at most ``maximum``)."""
    if not _is_int(value) or not 1 <= value <= maximum:
        raise ConfigError(f"{name} must be a positive int (at most {maximum}), got {_show(value)}")
    return int(value)


def optional_positive_int(value: Any, name: str, maximum: int = MAX_COUNT) -> int | None:
    """``value`` if it is None or an int >= 1 (and at most ``maximum``)."""
    if value is None:
        return None
    if not _is_int(value) or not 1 <= value <= maximum:
        raise ConfigError(
            f"{name} must be a positive int (at most {maximum}) or None, got {_show(value)}"
        )
    return int(value)


def at_least(value: Any, name: str, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum`` (and at most ``MAX_COUNT``)."""
    if not _is_int(value) or not minimum <= value <= max(MAX_COUNT, minimum):
        raise ConfigError(f"{name} must be an int >= {minimum}, got {_show(value)}")
    return int(value)


def non_negative_int(value: Any, name: str) -> int:
    """``value`` if it is an int >= 0."""
    return at_least(value, name, 0)


def probability(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1]."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be a probability in [0, 1], got {_show(value)}")
    return float(value)


def number(value: Any, name: str, minimum: float, maximum: float) -> float:
    """``value`` as a float, if it is a finite number in ``[minimum, maximum]``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        out = float(value) if ok else math.nan
    except OverflowError:  # an int past float's range
        out = math.nan
    if not math.isfinite(out) or not minimum <= out <= maximum:
        raise ConfigError(
            f"{name} must be a number from {minimum:g} to {maximum:g}, got {_show(value)}"
        )
    return out


def positive_number(value: Any, name: str, maximum: float = 1e12) -> float:
    """``value`` as a float, if it is a finite number > 0 (and at most ``maximum``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        out = float(value) if ok else math.nan
    except OverflowError:  # an int past float's range
        out = math.nan
    if not math.isfinite(out) or not 0 < out <= maximum:
        raise ConfigError(
            f"{name} must be a positive number (at most {maximum:g}), got {_show(value)}"
        )
    return out


def seconds(
    value: Any, name: str, *, allow_zero: bool = False, maximum: float = MAX_SECONDS
) -> float:
    """``value`` as float seconds, if it is a finite number > 0 (>= 0 with ``allow_zero``) and
    at most ``maximum``."""
    kind = "a finite number of seconds >= 0" if allow_zero else "a positive number of seconds"
    kind += f" (at most {maximum:g})"
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(f"{name} must be {kind}, got {_show(value)}")
    try:
        out = float(value)
    except OverflowError:  # an int past float's range
        raise ConfigError(f"{name} must be {kind}, got {_show(value)}") from None
    if not math.isfinite(out) or out < 0 or (out == 0 and not allow_zero) or out > maximum:
        raise ConfigError(f"{name} must be {kind}, got {_show(value)}")
    return out


def optional_seconds(value: Any, name: str, *, maximum: float = MAX_SECONDS) -> float | None:
    """``value`` as float seconds, or None (no limit, or the default)."""
    return None if value is None else seconds(value, name, maximum=maximum)


def text(value: Any, name: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """``value`` if it is a ``str`` of at most ``max_chars`` characters that encodes to UTF-8."""
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a str, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ConfigError(f"{name} is {len(value)} characters long: the limit is {max_chars}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{name} is not valid unicode (a lone surrogate at index {exc.start})"
        ) from None
    return value


def name_str(value: Any, what: str, max_chars: int = MAX_NAME_CHARS) -> str:
    """``value`` if it is a non-empty ``text`` of at most ``max_chars`` characters with no
    control characters (a name ends up in messages, logs, file names and the run store)."""
    out = text(value, what, max_chars)
    if not out:
        raise ConfigError(f"{what} must be a non-empty str")
    for i, ch in enumerate(out):
        if unicodedata.category(ch) in ("Cc", "Cs"):
            raise ConfigError(f"{what} has a control character at index {i}: {ch!r}")
    return out


def depth_at_most(value: Any, what: str, maximum: int = MAX_DEPTH) -> Any:
    """``value`` if its lists and dicts nest no deeper than ``maximum`` (checked without
    recursion, so a hostile depth cannot exhaust the stack here either)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list | tuple | dict):
            if depth >= maximum:
                raise ConfigError(f"{what} nests deeper than {maximum} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach: ``localhost``, 127.0.0.0/8, ``::1``
    (bare or in brackets; a host name other than ``localhost`` is never taken for one)."""
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _show(value: Any) -> str:
    """A value for a message, in a line: a scalar's repr (cut: a megabyte string stays short),
    a container's type (its repr may be huge, or nested past the stack)."""
    if value is None or isinstance(value, bool | float | str | bytes):
        shown = repr(value[:60] if isinstance(value, str | bytes) else value)
    elif _is_int(value):
        shown = repr(value) if abs(value) < 10**30 else "an int past 10**30"
    else:
        shown = f"a {type(value).__name__}"
    return clip(shown, 60)


# -- the same checks for pydantic models ------------------------------------------------------


def _field(check: Callable[[Any], Any]) -> BeforeValidator:
    return BeforeValidator(check)


def seconds_field(what: str, maximum: float = MAX_SECONDS) -> BeforeValidator:
    """A model field of seconds (``seconds``)."""
    return _field(lambda v: seconds(v, what, maximum=maximum))


def optional_seconds_field(what: str, maximum: float = MAX_SECONDS) -> BeforeValidator:
    """A model field of seconds or None (``optional_seconds``)."""
    return _field(lambda v: optional_seconds(v, what, maximum=maximum))


def int_field(what: str, minimum: int, maximum: int, *, optional: bool = False) -> BeforeValidator:
    """A model field of an int in ``[minimum, maximum]`` (None allowed with ``optional``)."""

    def check(v: Any) -> int | None:
        if v is None and optional:
            return None
        return bounded_int(v, what, minimum, maximum)

    return _field(check)


def text_field(what: str, max_chars: int = MAX_TEXT_CHARS) -> BeforeValidator:
    """A model field of text (``text``)."""
    return _field(lambda v: text(v, what, max_chars))


def optional_text_field(what: str, max_chars: int = MAX_TEXT_CHARS) -> BeforeValidator:
    """A model field of text or None."""
    return _field(lambda v: None if v is None else text(v, what, max_chars))


def name_field(what: str, *, optional: bool = False) -> BeforeValidator:
    """A model field holding a name (``name``; None allowed with ``optional``)."""
    return _field(lambda v: None if v is None and optional else name_str(v, what))
