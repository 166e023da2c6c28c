"""Pieces the adapters share: the masked-rate alarm and the reward functions set up by name.

``MaskedRate`` watches the share of samples that got no verdict. A policy that learns to trigger
failures that get masked escapes their penalty, so more than ``limit`` masked samples in a block of
``block`` logs a warning: a provider outage, or a policy that found such a failure.

``warn_unscored`` is how an adapter's catch-all handler reports a sample it could not score: the
environment and the cause, logged once per distinct pair (a broken environment fails every
sample the same way; one line says so, thousands would bury it).

``shared_client`` is the process-wide blocking client of the adapters whose framework makes an
environment object per sample (SkyRL, Atropos's workers): one per sandbox mode, never one per
sample. ``require_verdict`` is how an adapter whose framework leaves out a sample that raised
(verl's v1 trainer, verifiers) turns a result without a verdict into ``NoVerdictError``.

``default_reward_function`` is the process-wide ``RewardFunction`` behind the adapters' module-level
functions (loaded by dotted path, so they take no constructor arguments). It reads its settings
from the environment: ``DEEPGYM_ENV`` (the environment when no dataset column names one),
``DEEPGYM_SANDBOX``, ``DEEPGYM_MAX_PARALLEL`` and ``DEEPGYM_REWARD_TIMEOUT`` (seconds).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from deepgym.client import DeepGym
from deepgym.exceptions import ConfigError, NoVerdictError
from deepgym.models import RunResult
from deepgym.reward_function import AsyncRewardFunction, RewardFunction
from deepgym.types import EnvLike
from deepgym.validation import non_negative_int, positive_int

__all__ = [
    "MaskedRate",
    "close_shared_clients",
    "default_async_reward_function",
    "default_reward_function",
    "label_env",
    "require_verdict",
    "reward_settings",
    "shared_client",
    "warn_unscored",
]

log = logging.getLogger("deepgym.integrations")


class MaskedRate:
    """Counts samples without a verdict; warns when a block of ``block`` has more than ``limit``."""

    def __init__(
        self,
        name: str = "deepgym",
        *,
        block: int = 100,
        limit: int = 5,
        logger: logging.Logger | None = None,
    ) -> None:
        positive_int(block, "block")
        non_negative_int(limit, "limit")
        self.name = name
        self.block = block
        self.limit = limit
        self.logger = logger or log
        self.total = 0
        self.masked = 0
        self.alerts = 0
        self._in_block = 0
        self._masked_in_block = 0
        self._lock = threading.Lock()

    def add(self, masked: bool) -> bool:
        """Count one sample (``masked``: it got no verdict). True when this sample closed a block
        that had too many masked samples (and a warning was logged)."""
        with self._lock:
            self.total += 1
            self._in_block += 1
            if masked:
                self.masked += 1
                self._masked_in_block += 1
            if self._in_block < self.block:
                return False
            count, self._in_block, self._masked_in_block = self._masked_in_block, 0, 0
            if count <= self.limit:
                return False
            self.alerts += 1
        self.logger.warning(
            "%s: %d of the last %d samples got no verdict (more than %d): a provider outage, or "
            "a policy that found a failure that gets masked",
            self.name,
            count,
            self.block,
            self.limit,
        )
        return True

    def update(self, masked: Iterable[bool]) -> int:
        """Count many samples; the number of blocks that raised the alarm."""
        return sum(self.add(bool(m)) for m in masked)

    @property
    def rate(self) -> float:
        """Share of all samples counted so far that got no verdict."""
        return self.masked / self.total if self.total else 0.0


_UNSCORED_KEEP = 1024
_unscored: dict[tuple[str, str, str], None] = {}
_unscored_lock = threading.Lock()


def warn_unscored(adapter: str, env: object, exc: BaseException) -> bool:
    """Log why a sample of ``env`` got no verdict (``exc``), once per adapter, environment and
    cause; True when this call logged. The sample itself is still left out, never scored 0."""
    cause = f"{type(exc).__name__}: {exc}"
    key = (adapter, str(env), cause)
    with _unscored_lock:
        if key in _unscored:
            return False
        _unscored[key] = None
        if len(_unscored) > _UNSCORED_KEEP:
            del _unscored[next(iter(_unscored))]
    log.warning(
        "%s: a sample of environment %s got no verdict: %s (logged once per cause)",
        adapter,
        env if env is not None else "(unknown)",
        cause,
    )
    return True


def reward_settings() -> dict[str, object]:
    """The ``RewardFunction`` settings that the ``DEEPGYM_*`` environment variables give."""
    out: dict[str, object] = {}
    if env := os.environ.get("DEEPGYM_ENV"):
        out["env"] = env
    if sandbox := os.environ.get("DEEPGYM_SANDBOX"):
        out["sandbox"] = sandbox
    for var, key, kind in (
        ("DEEPGYM_MAX_PARALLEL", "max_parallel", int),
        ("DEEPGYM_REWARD_TIMEOUT", "timeout", float),
    ):
        raw = os.environ.get(var)
        if raw:
            try:
                out[key] = kind(raw)
            except ValueError as exc:
                raise ConfigError(f"{var} must be a number, got {raw!r}") from exc
    return out


def require_verdict(result: RunResult) -> RunResult:
    """``result`` when it has a verdict; else ``NoVerdictError`` carrying it (its score means
    nothing about the answer)."""
    if not result.has_verdict:
        raise NoVerdictError(
            f"no verdict ({result.error_type}): {result.error[:300]}", result=result
        )
    return result


_lock = threading.Lock()
_clients: dict[str, DeepGym] = {}


def shared_client(sandbox: str | None = None) -> DeepGym:
    """The process-wide blocking client for ``sandbox`` (default ``DEEPGYM_SANDBOX``, else
    ``pool``), made on first use and closed at exit."""
    mode = sandbox or os.environ.get("DEEPGYM_SANDBOX") or "pool"
    with _lock:
        client = _clients.get(mode)
        if client is None:
            client = _clients[mode] = DeepGym(sandbox=mode)
        return client


def close_shared_clients() -> None:
    """Close every ``shared_client`` (they are also closed at exit); the next call makes anew."""
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


_sync: RewardFunction | None = None
_async: AsyncRewardFunction | None = None


def default_reward_function() -> RewardFunction:
    """The process-wide ``RewardFunction`` set by ``reward_settings()``, made on first use."""
    global _sync
    with _lock:
        if _sync is None:
            _sync = RewardFunction(**reward_settings())  # type: ignore[arg-type]
        return _sync


def default_async_reward_function() -> AsyncRewardFunction:
    """The process-wide ``AsyncRewardFunction`` configured by ``reward_settings()``."""
    global _async
    with _lock:
        if _async is None:
            _async = AsyncRewardFunction(**reward_settings())  # type: ignore[arg-type]
        return _async


def label_env(label: Any) -> EnvLike | None:
    """The environment a sample's label names: the label itself (a name), or its ``env`` /
    ``env_name`` (an object, or its JSON); None when it names none."""
    if isinstance(label, str):
        stripped = label.strip()
        if stripped.startswith("{"):
            try:
                label = json.loads(stripped)
            except ValueError:
                return stripped or None
        else:
            return stripped or None
    if isinstance(label, Mapping):
        for key in ("env", "env_name"):
            value = label.get(key)
            if isinstance(value, str) and value:
                return value
    return None
