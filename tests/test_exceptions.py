"""One root, no shadowed builtins, and which failures are infrastructure for certain."""

from __future__ import annotations

import builtins
import inspect
from types import SimpleNamespace

import pytest

from deepgym import exceptions
from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    DeepGymTimeoutError,
    InvalidScoreError,
    NoVerdictError,
    SandboxDiedError,
    SandboxError,
    SandboxExpiredError,
    SandboxUnavailableError,
    TransportError,
    UnknownEnvironmentError,
    UnknownSessionError,
    VerifierError,
    is_infrastructure_failure,
    is_misconfiguration,
)

CLASSES = [
    obj
    for name, obj in vars(exceptions).items()
    if inspect.isclass(obj)
    and issubclass(obj, BaseException)
    and obj.__module__ == exceptions.__name__
]


def test_there_is_one_root() -> None:
    assert len(CLASSES) > 5
    for cls in CLASSES:
        assert issubclass(cls, DeepGymError), cls
        assert cls.__name__ in exceptions.__all__, cls
    assert DeepGymError.__bases__ == (Exception,)


def test_the_docstring_draws_every_class() -> None:
    doc = exceptions.__doc__ or ""
    for cls in CLASSES:
        assert cls.__name__ in doc, cls


def test_the_timeout_error_is_also_the_builtin() -> None:
    assert issubclass(DeepGymTimeoutError, DeepGymError)
    assert issubclass(DeepGymTimeoutError, TimeoutError)
    with pytest.raises(TimeoutError):
        raise DeepGymTimeoutError("the time limit ran out")
    assert DeepGymTimeoutError.__name__ != "TimeoutError"  # never shadow a builtin name
    for cls in CLASSES:
        assert not hasattr(builtins, cls.__name__), cls


def test_bad_input_is_also_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
    assert issubclass(InvalidScoreError, ValueError)
    assert issubclass(UnknownEnvironmentError, ConfigError)
    assert issubclass(UnknownEnvironmentError, KeyError)
    # KeyError would quote the message; ours reads as written.
    assert str(UnknownEnvironmentError("unknown environment 'x'")) == "unknown environment 'x'"


def test_no_verdict_errors_carry_their_result() -> None:
    marker = object()
    for cls in (SandboxError, SandboxDiedError, DeepGymTimeoutError, VerifierError, NoVerdictError):
        exc = cls("boom", result=marker)
        assert exc.result is marker and str(exc) == "boom"
    assert SandboxError("boom").result is None


class _HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status_code = status


class _ResponseError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.response = SimpleNamespace(status_code=status)


class ConnectError(Exception):
    """Named like httpx's, which deepgym does not import to recognise it."""


@pytest.mark.parametrize(
    ("exc", "infra"),
    [
        (ConnectionError("refused"), True),
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (DeepGymTimeoutError("late"), True),
        (TransportError("down"), True),
        (TransportError("down", status_code=500), True),
        (TransportError("down", status_code=503), True),
        (TransportError("slow down", status_code=429), True),
        (TransportError("who are you", status_code=401), True),
        (TransportError("forbidden", status_code=403), True),
        (TransportError("not found", status_code=404), False),
        (TransportError("bad request", status_code=400), False),
        (UnknownSessionError("no such session"), True),
        (SandboxExpiredError("retired"), True),
        (SandboxUnavailableError("no bwrap"), True),
        (SandboxDiedError("died"), False),
        (SandboxError("failed"), False),
        (VerifierError("no result"), False),
        (ValueError("bad"), False),
        (RuntimeError("bad"), False),
        (KeyboardInterrupt(), False),
        (_HttpError(502), True),
        (_HttpError(429), True),
        (_HttpError(404), False),
        (_ResponseError(500), True),
        (_ResponseError(403), True),
        (_ResponseError(422), False),
        (ConnectError(), True),
    ],
    ids=lambda v: (
        type(v).__name__ + str(getattr(v, "status_code", ""))
        if isinstance(v, BaseException)
        else str(v)
    ),
)
def test_is_infrastructure_failure(exc: BaseException, infra: bool) -> None:
    assert is_infrastructure_failure(exc) is infra


def test_transport_error_is_a_connection_error() -> None:
    assert issubclass(TransportError, ConnectionError)
    assert TransportError("x", status_code=502).status_code == 502


def test_a_session_the_service_lost_is_ours_but_no_misconfiguration() -> None:
    # A lost session fails that session alone: no batch is refused for it.
    lost = UnknownSessionError("the service has lost the session")
    assert isinstance(lost, TransportError) and lost.status_code is None
    assert is_infrastructure_failure(lost)
    assert not is_misconfiguration(lost)
