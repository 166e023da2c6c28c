"""The service's log, with no token in it.

A token is a password: whoever reads it from a log file, a terminal's scrollback or a log
shipper can call the API or open the console. Clients send theirs in the ``Authorization``
header, or as ``?token=`` in the URL where their framework can send nothing else (OpenRLHF,
verl's SandboxFusion client, the console's link), and uvicorn's access log writes each request's
path with its query. So every line the service logs passes ``redact`` first:

- the value of a ``token`` (or ``access_token``) query parameter (``?token=...``,
  ``&token=...``), and a token in a path (``/t/<token>/run_code``), becomes ``REDACTED``, as
  does the credential after ``Bearer`` or ``Basic`` (an ``Authorization`` header, wherever one
  is written);
- ``log_config`` is uvicorn's own logging configuration with ``RedactTokens`` on both of its
  handlers (the access log and the error log: uvicorn's and deepgym's lines alike) and on the
  ``deepgym.server`` logger.

The rule is by shape, not by value, so a wrong token a client sent, or another service's, is
hidden as well as the service's own.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

__all__ = ["REDACTED", "RedactTokens", "log_config", "redact"]

REDACTED = "REDACTED"
"""What a token is written as."""
_QUERY = re.compile(r"(?i)([?&;](?:access_)?token=)[^&;#\s\"']*")
_PATH = re.compile(r"(/t/)[^/\s?#\"']+(?=/)")
"""A token in a path: the SandboxFusion routes' ``/t/<token>/run_code`` (``server.app``)."""
_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/-]{8,}=*")
"""A credential as an ``Authorization`` header carries it (RFC 9110's token68, eight characters
or more, so that prose such as "Bearer token required" stays as it is)."""


def redact(text: str) -> str:
    """``text`` with every token in it (a ``token`` query value, a Bearer or Basic credential)
    replaced by ``REDACTED``."""
    text = _QUERY.sub(rf"\g<1>{REDACTED}", text)
    text = _PATH.sub(rf"\g<1>{REDACTED}", text)
    return _SCHEME.sub(rf"\g<1>\g<2>{REDACTED}", text)


def _redacted(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class RedactTokens(logging.Filter):
    """A filter that rewrites a record's message, its arguments and its traceback text with
    ``redact`` (it drops no record). uvicorn's access formatter reads the request line from the
    arguments, so they stay a tuple of the same shape."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; keep it."""
        record.msg = _redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redacted(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = RedactTokens()


def _the_filter() -> RedactTokens:
    """The one ``RedactTokens``: a logger configured again keeps one, not one per server."""
    return _FILTER


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration (``uvicorn.config.LOGGING_CONFIG``) with ``RedactTokens``
    on its handlers and on the ``deepgym.server`` logger: pass it as ``uvicorn.Config``'s
    ``log_config``."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_tokens"] = {"()": _the_filter}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact_tokens")
    config["loggers"].setdefault("deepgym.server", {})["filters"] = ["redact_tokens"]
    return config
