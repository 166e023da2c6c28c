"""Every exception deepgym raises, under one root.

::

    DeepGymError
    ├── ConfigError (also ValueError)        bad input: an argument, a file, a test case
    │   ├── UnknownEnvironmentError (also KeyError)
    │   └── VerifierCodeRefusedError         a service refused verifier code sent by a client
    ├── SandboxError                         the sandbox could not run or finish the job
    │   ├── SandboxUnavailableError          the isolation mechanism is missing on this host
    │   ├── SandboxDiedError                 the sandbox died before the answer was in play
    │   └── SandboxExpiredError              a provider retired the sandbox at its lifetime's end
    ├── DeepGymTimeoutError (also TimeoutError)  time ran out before the answer was in play
    ├── VerifierError                        the verifier printed no result
    ├── InvalidScoreError (also ValueError)  a score that is NaN, infinite or outside [0, 1]
    ├── NoVerdictError                       a run without a verdict, where a number is required
    ├── ImageError                           a bad image, from any source, or one not fetched
    │   └── RegistryError (also TransportError)  an OCI registry was down or answered an error
    └── TransportError                       a remote service or provider could not be reached
        ├── UnknownSessionError              the service has no session of that id (any more)
        ├── GenerationError                  a model server gave no sample (no verdict, never 0)
        └── RegistryError                    (the same class, drawn under both parents)

Foreign errors are translated once, at the boundary, with ``raise ... from exc``.
``is_infrastructure_failure`` says which failures are ours for certain (contract, "Infrastructure
or policy").
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "DeepGymError",
    "DeepGymTimeoutError",
    "GenerationError",
    "ImageError",
    "InvalidScoreError",
    "NoVerdictError",
    "RegistryError",
    "SandboxDiedError",
    "SandboxError",
    "SandboxExpiredError",
    "SandboxUnavailableError",
    "TransportError",
    "UnknownEnvironmentError",
    "UnknownSessionError",
    "VerifierCodeRefusedError",
    "VerifierError",
    "is_infrastructure_failure",
    "is_misconfiguration",
]


class DeepGymError(Exception):
    """Root of every exception deepgym raises."""


class ConfigError(DeepGymError, ValueError):
    """Bad input: the message names the offending argument, field or file."""


class UnknownEnvironmentError(ConfigError, KeyError):
    """No environment of that name; the message suggests the closest known one."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class VerifierCodeRefusedError(ConfigError):
    """A service refused verifier code sent by a client (``deepgym serve`` allows it only when
    started with ``--allow-verifier-code``: the code runs with the verifier's access)."""


class SandboxError(DeepGymError):
    """The sandbox could not run or finish the job; there is no verdict."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class SandboxUnavailableError(SandboxError):
    """The isolation this backend needs cannot run on this host (never a silent fallback)."""


class SandboxDiedError(SandboxError):
    """The sandbox died before the answer came into play."""


class SandboxExpiredError(SandboxError):
    """A provider retired the sandbox at the end of its lifetime."""


class DeepGymTimeoutError(DeepGymError, TimeoutError):
    """Time ran out before the answer came into play; there is no verdict."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class VerifierError(DeepGymError):
    """The verifier printed no result; there is no verdict."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class InvalidScoreError(DeepGymError, ValueError):
    """A score that is NaN, infinite or outside [0, 1]: never reward."""


class NoVerdictError(DeepGymError):
    """A run had no verdict where the caller needs a number (verl's ``compute_score``)."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class TransportError(DeepGymError, ConnectionError):
    """A remote service or provider could not be reached, or answered 5xx / 429 / 401 / 403.

    ``unreachable``: no connection could be made at all (a wrong URL, a service that is down).
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.unreachable = unreachable


class UnknownSessionError(TransportError):
    """The service has no open session of that id: closed, never opened there, or forgotten
    (the service restarted). The session is lost as if the service had stopped: ours, never the
    agent's (HTTP 404 ``unknown_session``)."""


class GenerationError(TransportError):
    """A model server gave no sample for a prompt, after its retries (``deepgym.eval.model``):
    that sample has no verdict, the server's failure, never the answer's.

    ``cause`` says why, in one word of ``deepgym.eval.model.GENERATION_CAUSES``.
    """

    def __init__(self, message: str, *, cause: str = "connection") -> None:
        super().__init__(message)
        self.cause = cause


class ImageError(DeepGymError):
    """An image could not be fetched, read, verified, unpacked or stored: the one error for a bad
    image, whatever its source (a registry, a tarball, a layout folder, the image store): a
    digest or size that does not match, a manifest, index or config that breaks the format, no
    entry for the platform, a layer the unpacker refuses (``deepgym.images.oci``). Never the
    answer's fault, so a run that needed it has no verdict. What the caller asked for (a name or
    digest the store lacks, a platform string) is ``ConfigError``."""


class RegistryError(ImageError, TransportError):
    """An OCI registry could not be reached, timed out, refused the credentials, or answered an
    error status after the retries; ``status_code`` and ``unreachable`` as ``TransportError``."""


_REFUSED_STATUS = frozenset({401, 403})


def is_misconfiguration(exc: BaseException) -> bool:
    """True when ``exc`` would fail every run alike, whatever the answer: a service that refused
    the credentials (401, 403) or could not be reached, an unknown environment or other bad input,
    a sandbox this host cannot run. A batch that meets one raises it rather than return every
    result without a verdict: in training, every reward would silently be ``None``."""
    if isinstance(exc, TransportError):
        return exc.unreachable or exc.status_code in _REFUSED_STATUS
    return isinstance(exc, ConfigError | SandboxUnavailableError)


_INFRA_STATUS = frozenset({401, 403, 429})


def is_infrastructure_failure(exc: BaseException) -> bool:
    """True when ``exc`` is a failure that is ours for certain, never the policy's.

    Infrastructure: a connection or transport error, a provider call timing out, a provider HTTP
    5xx or 429, the provider refusing our credentials (401, 403), the provider evicting the sandbox
    or retiring it at its lifetime's end (``SandboxExpiredError``), and a sandbox that could not
    start, an image that could not be fetched or verified (``ImageError``). Anything else,
    ``SandboxDiedError`` included, is not known to be ours.
    """
    if isinstance(exc, SandboxDiedError):
        return False
    if isinstance(exc, SandboxExpiredError | SandboxUnavailableError | ImageError):
        return True
    if isinstance(exc, TransportError):
        code = exc.status_code
        return code is None or code >= 500 or code in _INFRA_STATUS
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    status = getattr(exc, "status_code", None)
    if status is None:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    if isinstance(status, int) and (status >= 500 or status in _INFRA_STATUS):
        return True
    name = type(exc).__name__
    return name in {
        "ConnectError",
        "ReadTimeout",
        "ConnectTimeout",
        "PoolTimeout",
        "RemoteProtocolError",
    }
