"""Sandbox backends: one small protocol, explicit selection, never a silent fallback.

``make_backend(name, workers=..., max_workers=...)`` is the one place a backend is chosen by
name (``pool``, ``strict``, ``unsafe``); a client takes the result, or any other ``Backend``, as
``backend=``.

The backends are built from shared parts, held by composition: ``policy`` (the bwrap mount and
namespace rules of every sandbox role, as a table), ``host`` (this host's bwrap, Python and
system folders), ``workspace`` (a backend's private folder and staged environments), ``spec``
(what the judge is told of a job), ``evidence`` (what a run left, read into a ``RawRun``),
``cgroups`` (per-run limits and CPU accounting), ``served`` (the host's side of a run's solution
processes), ``fresh`` (one run as fresh processes), ``programs`` and ``headers`` (compiled
answers' programs, and the precompiled headers their builds use) and ``sizing`` (how big a
pool is).
``strict`` and ``unsafe`` are ``fresh`` runs with their own ``Launch``; ``pool`` keeps warm
workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deepgym.exceptions import ConfigError

if TYPE_CHECKING:
    from deepgym.sandbox.base import Backend

SANDBOXES = ("pool", "strict", "unsafe")
"""The backends ``make_backend`` knows, by name (``pool`` is the default)."""


def make_backend(
    name: str = "pool", *, workers: int | None = None, max_workers: int | None = None
) -> Backend:
    """A new backend of the named kind; ``workers`` sizes a pool (default: two per core) and
    ``max_workers`` caps how far it grows while runs wait (``PoolBackend``); both are ignored by
    the others, which start processes per run."""
    if name not in SANDBOXES:
        raise ConfigError(f"sandbox must be one of {SANDBOXES}, got {name!r}")
    if name == "pool":
        from deepgym.sandbox.pool import PoolBackend

        return PoolBackend(workers, max_workers=max_workers)
    if name == "strict":
        from deepgym.sandbox.strict import StrictBackend

        return StrictBackend()
    from deepgym.sandbox.unsafe import UnsafeBackend

    return UnsafeBackend()
