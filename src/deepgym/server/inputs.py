"""A request's input, checked before anything runs: the environments a client named or sent
(never a path on this host), its time limit and parallelism, against the service's ``Limits``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deepgym.envs.registry import list_environments, load_environment
from deepgym.exceptions import ConfigError, UnknownEnvironmentError, VerifierCodeRefusedError
from deepgym.models import Environment
from deepgym.protocol import EnvSpec
from deepgym.runtimes import DEFAULT as DEFAULT_RUNTIME
from deepgym.runtimes import runtime
from deepgym.text import one_line
from deepgym.validation import (
    name_str,
    optional_positive_int,
    optional_seconds,
    positive_int,
    seconds,
)

MESSAGE_CHARS = 600
"""An error message a client gets is one line of at most this many characters."""
RUNTIME_KEY = "deepgym.runtime"
"""Where a request's ASGI scope holds the runtime of a SandboxFusion route's Python answer: the
``/runtime/<name>/`` prefix of its URL, else the service's (``deepgym serve --runtime``)."""


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_body_bytes: int = 32 * 2**20
    max_answers: int = 10_000
    max_parallel: int = 256
    """A request's ``max_parallel`` is clamped to this; ``concurrency`` caps the whole service."""
    max_sessions: int = 64
    """Agent sessions open at once (each is a sandbox); one more is refused with 429."""
    max_time_limit: float = 600.0
    """The longest time a client may ask for, in seconds: a run's ``time_limit``, a command's
    ``timeout``, and an inline environment's ``timeout``, ``time_limit``, ``step_timeout`` and
    ``lifetime``; more is refused with 400 naming this maximum (``deepgym serve
    --max-time-limit``). The service's own environments keep their caps."""
    max_inflight_bytes: int | None = None
    """The bytes of request bodies (the answers) the service holds at once; one request more is
    refused with 503 and ``Retry-After``, one over it alone with 413 (``deepgym.server.admission``,
    ``deepgym serve --max-inflight-mb``). None: a share of the service's memory."""

    def __post_init__(self) -> None:
        positive_int(self.max_body_bytes, "max_body_bytes")
        optional_positive_int(self.max_inflight_bytes, "max_inflight_bytes", 2**62)
        positive_int(self.max_answers, "max_answers")
        positive_int(self.max_parallel, "max_parallel")
        positive_int(self.max_sessions, "max_sessions")
        seconds(self.max_time_limit, "max_time_limit")


_PATH_FIELDS = ("verifier_path", "repo_path", "tests_path", "checker_path", "source_dir")
_TIME_FIELDS = ("timeout", "time_limit", "step_timeout", "lifetime")
"""An inline environment's times that hold a sandbox: each at most the service's maximum."""


def _looks_like_path(name: str) -> bool:
    """A name that could reach this host's files: refused, whatever is there."""
    parts = name.replace("\\", "/").split("/")
    if not name or name.startswith(("/", "~", ".")) or ".." in parts or "\0" in name:
        return True
    try:
        return Path(name).exists()
    except (OSError, ValueError):
        return True


def parse_env(
    spec: EnvSpec,
    *,
    allow_verifier_code: bool,
    where: str = "env",
    max_time_limit: float | None = None,
) -> Environment:
    """An environment a client named or sent; never a path on this host.

    A name must be a built-in or a registered ``prefix/<id>``. By value, the fields are
    ``Environment``'s (checked by ``deepgym.validation``); verifier code is refused unless
    allowed, and each time that holds a sandbox is at most ``max_time_limit`` seconds.
    """
    if isinstance(spec, str):
        spec = name_str(spec, where)
        if spec in list_environments():
            return load_environment(spec)
        if _looks_like_path(spec):
            raise UnknownEnvironmentError(f"{where}: unknown environment {spec!r}")
        try:
            return load_environment(spec)
        except UnknownEnvironmentError as exc:
            raise UnknownEnvironmentError(f"{where}: {exc}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: an environment name or object, got {type(spec).__name__}")
    for key in _PATH_FIELDS:
        if spec.get(key) is not None:
            raise ConfigError(f"{where}.{key}: a client cannot name a path on the service")
    for key in ("verifier_code", "step_verifier_code"):
        if spec.get(key) is not None and not allow_verifier_code:
            raise VerifierCodeRefusedError(
                f"{where}.{key}: this service does not run verifier code sent by a client "
                "(start it with --allow-verifier-code to allow that)"
            )
    try:
        env = Environment.model_validate(spec)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {one_line(str(exc), MESSAGE_CHARS)}") from exc
    if max_time_limit is not None:
        for key in _TIME_FIELDS:
            value = getattr(env, key)
            if value is not None and value > max_time_limit:
                raise ConfigError(_over_max(f"{where}.{key}", value, max_time_limit))
    return env


def _over_max(what: str, value: float, maximum: float) -> str:
    return (
        f"{what} of {value:g} s is over this service's maximum of {maximum:g} s "
        "(deepgym serve --max-time-limit)"
    )


def parse_envs(
    specs: EnvSpec | list[EnvSpec],
    n: int,
    *,
    allow_verifier_code: bool,
    max_time_limit: float | None = None,
) -> list[Environment]:
    """One environment per answer: one for all, or a list of exactly ``n``."""
    if not isinstance(specs, list):
        env = parse_env(
            specs, allow_verifier_code=allow_verifier_code, max_time_limit=max_time_limit
        )
        return [env] * n
    if len(specs) != n:
        raise ConfigError(f"env: got {len(specs)} environments for {n} answers; give one or {n}")
    cache: dict[str, Environment] = {}
    out = []
    for i, spec in enumerate(specs):
        if isinstance(spec, str) and spec in cache:
            out.append(cache[spec])
            continue
        env = parse_env(
            spec,
            allow_verifier_code=allow_verifier_code,
            where=f"env[{i}]",
            max_time_limit=max_time_limit,
        )
        if isinstance(spec, str):
            cache[spec] = env
        out.append(env)
    return out


def check_time_limit(
    time_limit: float | None, limits: Limits | None = None, what: str = "time_limit"
) -> float | None:
    """A client's ``time_limit``: None, or finite seconds > 0, at most the service's maximum
    (``Limits.max_time_limit``; more is refused, naming it)."""
    value = optional_seconds(time_limit, what)
    maximum = (limits if limits is not None else Limits()).max_time_limit
    if value is not None and value > maximum:
        raise ConfigError(_over_max(what, value, maximum))
    return value


def check_parallel(max_parallel: int, limits: Limits) -> int:
    """A client's ``max_parallel``, capped by the service's limit."""
    return min(positive_int(max_parallel, "max_parallel"), limits.max_parallel)


def runtime_of(scope: Mapping[str, Any]) -> str:
    """The runtime a request's URL names (``scope[RUNTIME_KEY]``; the standard library's where it
    names none). ``ConfigError`` (400) naming the runtimes there are, for any other name."""
    return runtime(scope.get(RUNTIME_KEY, DEFAULT_RUNTIME)).name


def in_runtime(env: Environment, scope: Mapping[str, Any]) -> Environment:
    """``env`` (a SandboxFusion request's) with its Python answer in the request's runtime
    (``scope[RUNTIME_KEY]``; the standard library's where it names none); an answer in another
    language is left as it is (a runtime is packages for Python). ``ConfigError`` (400) naming
    the runtimes there are, for any other name."""
    name = runtime_of(scope)
    if env.language != "python" or env.runtime == name:
        return env
    # (only the runtime changes, and its one rule, a Python answer, holds: no new validation)
    return env.model_copy(update={"runtime": name})
