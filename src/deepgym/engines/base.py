"""The engine protocol: what runs a client's calls once the client has checked them.

``AsyncDeepGym`` is a facade: it validates every argument once (``deepgym.validation``), then
delegates to one engine, chosen by ``mode`` or given as ``engine=``:

- ``LocalEngine`` (``mode="local"``): sandboxes on this host, through a ``Backend``;
- ``RemoteEngine`` (``mode="remote"``): the same calls over HTTP to ``deepgym serve``;
- ``RayEngine`` (``mode="ray"``): a Ray cluster, one pool per node (``deepgym.engines.ray``).

Every engine returns the same ``RunResult``, ``BatchResult`` and ``EvalResult`` for the same
answers, and follows the contract's failure rules: ``run`` raises the contract's no-verdict
exceptions; ``run_batch``, ``stream_groups`` and ``eval`` never raise for one run (a failure is a
result without a verdict). Engines may assume their arguments were checked: outputs are a
sequence of ``str``, ``max_parallel`` a positive int, ``time_limit`` None or finite seconds,
``group_size`` None or a positive int. A test holds every engine's signatures to this protocol.

Agent sessions are not part of the protocol (an engine of one's own need not have them): an engine
that has them defines ``async open_session(env: Environment)``, returning a provider session
(``deepgym.session.ProviderSession``: ``LocalSession``, ``RemoteSession``), which
``AsyncDeepGym.session`` looks for.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from deepgym.models import BatchResult, EvalResult, RunResult
from deepgym.types import EnvLike, Envs, Group, ProgressFn

__all__ = ["Engine"]


@runtime_checkable
class Engine(Protocol):
    """What runs a client's calls: sandboxes on this host, a ``deepgym serve`` over HTTP, or a
    Ray cluster's nodes."""

    mode: str
    """The client mode this engine serves (``"local"``, ``"remote"``, ``"ray"``)."""

    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """The effective time limit of a run of ``env``."""
        ...

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer; raise the contract's no-verdict exceptions."""
        ...

    async def run_batch(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        group_size: int | None = None,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """Score many answers, in the order of ``outputs``; never raise for one run."""
        ...

    def stream_groups(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        group_size: int,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> AsyncGenerator[Group, None]:
        """Yield each group of ``group_size`` answers the moment it is complete."""
        ...

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """Score one answer per environment of a suite or a list."""
        ...

    async def sandbox_stats(self) -> dict[str, Any]:
        """The engine's sandboxes in figures (empty where it has none of its own)."""
        ...

    async def close(self) -> None:
        """Release what the engine holds (sandboxes, connections)."""
        ...
