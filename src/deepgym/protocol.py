"""The HTTP protocol between ``deepgym serve`` and the remote client (pure: pydantic, no I/O).

Both sides import this module, so the wire has one definition:

- Request bodies: ``RunRequest``, ``BatchRequest``, ``EvalRequest``, ``TimeLimitRequest``. An
  environment travels by name (``"two_sum"``, ``"humaneval/3"``) or by value (an object with
  ``Environment``'s fields, never a path on the server).
- ``/v1/run`` answers ``RunReply``: the result, and the exception ``dg.run`` raised (its class name
  from ``RAISABLE``), so the remote client raises what local mode raises.
- ``/v1/run_batch`` and ``/v1/eval`` answer NDJSON, one event a line: ``start`` (the input was
  valid and the runs began), ``progress``, ``group`` (one complete group's results), ``heartbeat``
  (nothing new for a while), ``end``. A stream that stops before ``end`` lost only the groups it
  did not send: the client turns each of those runs into a result without a verdict.
- Agent sessions: ``POST /v1/sessions`` (``SessionOpenRequest``) opens one and answers its
  ``sandbox_id``; ``/v1/sessions/{sandbox_id}/exec`` (``SessionExecRequest``, answers
  ``SessionExecReply``), ``/files/write``, ``/files/read``, ``/files/list`` and ``/score``
  (``SessionScoreReply``) act in it, and ``DELETE /v1/sessions/{sandbox_id}`` closes it.
- An error is ``{"error": {"code": ..., "message": ...}}`` with a 4xx or 5xx status. ``ERRORS``
  is the one table from an exception to its status and code: the service answers with
  ``error_status`` and the client raises with ``error_for``, so an entry's class comes back as
  itself (bad input, a session's sandbox that died, expired or failed otherwise, a session the
  service no longer has: ``UnknownSessionError``, a ``TransportError``). Refusals made before
  any route (``unauthorized``, ``too_large``, ``overloaded``) and anything else the service
  raised (``internal``) come back as ``ConfigError`` (a 4xx that names the input) or
  ``TransportError`` (credentials, overload, the service failing). Overload is a 503:
  ``shutting_down`` while the service drains, ``overloaded`` (with ``Retry-After``) while it
  holds as many bytes of requests as it admits at once.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    DeepGymTimeoutError,
    SandboxDiedError,
    SandboxError,
    SandboxExpiredError,
    SandboxUnavailableError,
    TransportError,
    UnknownEnvironmentError,
    UnknownSessionError,
    VerifierCodeRefusedError,
    VerifierError,
)
from deepgym.models import ExecResult, RunResult
from deepgym.validation import (
    MAX_COUNT,
    MAX_PATH_CHARS,
    int_field,
    name_field,
    optional_seconds_field,
    text_field,
)

__all__ = [
    "ERRORS",
    "RAISABLE",
    "REPLY_GRACE_S",
    "BatchRequest",
    "ErrorCode",
    "EvalRequest",
    "Raised",
    "RunReply",
    "RunRequest",
    "SessionExecReply",
    "SessionExecRequest",
    "SessionListRequest",
    "SessionOpenReply",
    "SessionOpenRequest",
    "SessionReadRequest",
    "SessionScoreReply",
    "SessionStepReply",
    "SessionWriteRequest",
    "StreamEvent",
    "TimeLimitRequest",
    "WireError",
    "encode_event",
    "error_body",
    "error_for",
    "error_status",
    "parse_event",
    "raised_error",
]

REPLY_GRACE_S = 15.0
"""How long past a session request's own time (a command's timeout, the verifier's) its answer
may take before it counts as lost: the session's supervisor on the service's host waits this
long, and the remote client waits for it on top of its own slack."""

EnvSpec = str | dict[str, Any]
"""An environment by name, or by value (``Environment``'s fields)."""

ErrorCode = Literal[
    "bad_request",
    "unknown_environment",
    "too_large",
    "too_many_answers",
    "verifier_code_refused",
    "unauthorized",
    "shutting_down",
    "overloaded",
    "internal",
    "unknown_session",
    "too_many_sessions",
    "sandbox_died",
    "sandbox_expired",
    "sandbox_error",
]

_Raisable = type[SandboxError] | type[DeepGymTimeoutError] | type[VerifierError]

RAISABLE: dict[str, _Raisable] = {
    cls.__name__: cls
    for cls in (
        SandboxError,
        SandboxDiedError,
        SandboxExpiredError,
        SandboxUnavailableError,
        DeepGymTimeoutError,
        VerifierError,
    )
}
"""The exceptions ``dg.run`` raises for a run without a verdict, by class name."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


_ENV_DOC = (
    "An environment: a built-in's name (`two_sum`, `humaneval/3`), or an object with "
    "`Environment`'s fields (verifier code only where the service allows it)."
)


class RunRequest(_Request):
    """``POST /v1/run``: one answer to one environment."""

    env: EnvSpec = Field(description=_ENV_DOC)
    answer: Annotated[str, text_field("answer")]
    """The model's answer: code, a script, or a diff, as the environment's kind expects."""
    time_limit: Annotated[float | None, optional_seconds_field("time_limit")] = None
    """The run's time limit in seconds; null: the service derives it from the reference."""


class TimeLimitRequest(_Request):
    """``POST /v1/time_limit``: the time limit the service would use for an environment."""

    env: EnvSpec = Field(description=_ENV_DOC)
    time_limit: Annotated[float | None, optional_seconds_field("time_limit")] = None
    """A limit to check instead of deriving one, in seconds."""


class BatchRequest(_Request):
    """``POST /v1/run_batch``: many answers, streamed back group by group."""

    env: EnvSpec | list[EnvSpec] = Field(
        description="One environment for every answer, or one per answer (each as in `env` of "
        "`/v1/run`)."
    )
    answers: list[Annotated[str, text_field("answers[]")]]
    """The answers, scored in this order; results come back with their index."""
    group_size: Annotated[int | None, int_field("group_size", 1, MAX_COUNT, optional=True)] = None
    """Answers per group (a GRPO group): each group is streamed the moment it is complete."""
    max_parallel: Annotated[int, int_field("max_parallel", 1, MAX_COUNT)] = 8
    """Runs of this request at once (the service's own cap applies as well)."""
    time_limit: Annotated[float | None, optional_seconds_field("time_limit")] = None
    """Every run's time limit in seconds; null: derived per environment."""


class EvalRequest(_Request):
    """``POST /v1/eval``: one answer per environment of a suite or a list."""

    envs: list[EnvSpec] | None = None
    """The environments (give this or `suite`)."""
    suite: Annotated[str | None, name_field("suite", optional=True)] = None
    """A suite's name: `builtin` or `humaneval` (give this or `envs`)."""
    outputs: dict[
        Annotated[str, name_field("outputs key")], Annotated[str, text_field("outputs[]")]
    ] = Field(default_factory=dict)
    """The answer to each environment, by name; a missing one is the empty answer."""
    max_parallel: Annotated[int, int_field("max_parallel", 1, MAX_COUNT)] = 8
    """Runs at once (the service's own cap applies as well)."""
    time_limit: Annotated[float | None, optional_seconds_field("time_limit")] = None
    """Every run's time limit in seconds; null: derived per environment."""


class SessionOpenRequest(_Request):
    """``POST /v1/sessions``: open an agent session (a sandbox of its own) of a session
    environment."""

    env: EnvSpec = Field(
        description="A `kind: session` environment: an example's name (`agent/fix_add`), or an "
        "object with `Environment`'s fields (verifier code only where the service allows it; a "
        "repository or hidden tests folder cannot travel)."
    )


class SessionOpenReply(BaseModel):
    """The session opened: its id, in every later route's path."""

    sandbox_id: str


class SessionExecRequest(_Request):
    """``POST /v1/sessions/{sandbox_id}/exec``: run a command in the session's persistent
    shell."""

    command: Annotated[str, text_field("command")]
    """A bash command; the working dir, variables and files carry over to the next one."""
    timeout: Annotated[float | None, optional_seconds_field("timeout")] = None
    """Seconds before the command is killed with its process group (it comes back
    `timed_out`); null: the environment's `step_timeout`."""


SessionExecReply = ExecResult
"""``/v1/sessions/{sandbox_id}/exec``'s reply: the ``ExecResult`` itself."""


class SessionWriteRequest(_Request):
    """``POST /v1/sessions/{sandbox_id}/files/write``: write a file under the work dir."""

    path: Annotated[str, text_field("path", MAX_PATH_CHARS)]
    """The file's path, relative to the work dir."""
    content_b64: Annotated[str, text_field("content_b64")]
    """The file's bytes, base64-encoded."""


class SessionReadRequest(_Request):
    """``POST /v1/sessions/{sandbox_id}/files/read``: read a file under the work dir (answers
    `content`, its text)."""

    path: Annotated[str, text_field("path", MAX_PATH_CHARS)]
    """The file's path, relative to the work dir."""


class SessionListRequest(_Request):
    """``POST /v1/sessions/{sandbox_id}/files/list``: the files under a folder of the work dir
    (answers `files`, their paths)."""

    path: Annotated[str, text_field("path", MAX_PATH_CHARS)] = "."
    """The folder, relative to the work dir."""


class SessionScoreReply(BaseModel):
    """The final verifier's result over the agent's work, or, where the session itself failed,
    ``deepgym.session.failure_result``'s (a verdict or plainly none)."""

    result: RunResult
    diff: str = ""
    """The work dir's changes from its seed, as a unified diff (empty where none was taken)."""


class SessionStepReply(BaseModel):
    """The per-step verifier's result over the work dir as it is now; null where the
    environment has no per-step verifier."""

    result: RunResult | None = None


class Raised(BaseModel):
    """The exception ``run`` raised on the service, by type name and message."""

    type: str
    message: str


class RunReply(BaseModel):
    """``/v1/run``: the result, or the no-verdict exception ``dg.run`` raised (with its result)."""

    result: RunResult | None = None
    raised: Raised | None = None


class StreamEvent(BaseModel):
    """One NDJSON line of a batch or eval stream (fields it does not know are ignored, so a
    newer service can add some)."""

    model_config = ConfigDict(extra="ignore")

    event: Literal["start", "progress", "group", "heartbeat", "end"]
    run_id: str | None = None
    total: int | None = None
    env_names: list[str] | None = None
    done: int | None = None
    group: int | None = None
    start: int | None = None
    results: list[RunResult] | None = None
    execution_time_ms: float | None = None


def encode_event(event: StreamEvent) -> bytes:
    """One NDJSON line."""
    return event.model_dump_json(exclude_none=True).encode() + b"\n"


def parse_event(line: bytes | str) -> StreamEvent:
    """One NDJSON line; a malformed one is a ``TransportError`` (the service broke the protocol)."""
    try:
        return StreamEvent.model_validate_json(line)
    except ValidationError as exc:
        raise TransportError(f"malformed stream line from the service: {exc}") from exc


class WireError(NamedTuple):
    """One exception on the wire: its class, the HTTP status and the error code."""

    cls: type[DeepGymError]
    status: int
    code: ErrorCode
    by_status: bool = False
    """A ``TransportError`` the service raises with this ``status_code`` (only that one)."""

    def matches(self, exc: DeepGymError) -> bool:
        """Whether the service answers ``exc`` with this entry."""
        if not isinstance(exc, self.cls):
            return False
        return not self.by_status or getattr(exc, "status_code", None) == self.status

    def rebuild(self, message: str) -> DeepGymError:
        """The exception the client raises for this entry's reply."""
        if self.by_status:
            return _transport(self.status, message)
        if self.cls is UnknownSessionError:
            # The service handed this id out and no longer has it (it restarted, or it forgot a
            # session long expired): the session is lost, ours, as if the service had stopped.
            return UnknownSessionError(f"the service has lost the session: {message}")
        return self.cls(message)


ERRORS: tuple[WireError, ...] = (
    WireError(UnknownEnvironmentError, 404, "unknown_environment"),
    WireError(VerifierCodeRefusedError, 403, "verifier_code_refused"),
    WireError(ConfigError, 400, "bad_request"),
    WireError(SandboxDiedError, 409, "sandbox_died"),
    WireError(SandboxExpiredError, 410, "sandbox_expired"),
    WireError(SandboxError, 500, "sandbox_error"),  # a session's sandbox failed otherwise
    WireError(UnknownSessionError, 404, "unknown_session"),
    WireError(TransportError, 503, "shutting_down", by_status=True),
    WireError(TransportError, 429, "too_many_sessions", by_status=True),
)
"""Every exception the service answers with its own status and code, a subclass before its
base (the first entry that matches wins); anything else is a 500 ``internal``."""

_BY_REPLY: dict[tuple[int, str], WireError] = {(e.status, e.code): e for e in ERRORS}


def error_status(exc: DeepGymError) -> tuple[int, ErrorCode]:
    """The status and error code the service answers ``exc`` with (``ERRORS``)."""
    for entry in ERRORS:
        if entry.matches(exc):
            return entry.status, entry.code
    return 500, "internal"


def _transport(status: int, message: str) -> TransportError:
    hint = " (check the client's token: the service's --token)" if status in (401, 403) else ""
    return TransportError(f"the service answered {status}: {message}{hint}", status_code=status)


def error_body(code: ErrorCode, message: str) -> dict[str, Any]:
    """An error reply's JSON: its code and a one-line message."""
    return {"error": {"code": code, "message": message}}


def _error_fields(body: bytes) -> tuple[str, str]:
    try:
        data = json.loads(body)
        err = data["error"]
        return str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return "", body[:200].decode("utf-8", "replace")


def error_for(status: int, body: bytes) -> DeepGymError:
    """The exception for an error reply: an ``ERRORS`` entry's class for its status and code;
    else ``ConfigError`` for a 4xx that names the input, ``TransportError`` otherwise.

    401, 403 (other than a refused verifier), 429 and 5xx are the service's or the credentials'
    failure, never the answer's (``is_infrastructure_failure`` is true for them), and so is a
    session the service no longer has (404 ``unknown_session``).
    """
    code, message = _error_fields(body)
    entry = _BY_REPLY.get((status, code))
    if entry is not None:
        return entry.rebuild(message)
    if status in (400, 413, 422) and code:
        return ConfigError(message)
    return _transport(status, message)


def raised_error(raised: Raised, result: RunResult | None) -> DeepGymError:
    """The exception the service's ``dg.run`` raised, rebuilt on this side."""
    cls = RAISABLE.get(raised.type)
    if cls is None:
        raise TransportError(f"the service raised an unknown exception {raised.type!r}")
    return cls(raised.message, result=result)
