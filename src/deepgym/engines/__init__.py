"""Engines: what runs a client's calls, behind one protocol (``Engine``).

``LocalEngine`` runs sandboxes on this host; ``RemoteEngine`` sends the same calls to a
``deepgym serve`` over HTTP; ``RayEngine`` spreads them over a Ray cluster, one pool per node.
``AsyncDeepGym`` picks one by ``mode`` (or takes one as ``engine=``) and delegates every call to
it after checking the arguments once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deepgym.engines.base import Engine

if TYPE_CHECKING:
    from deepgym.engines.local import LocalEngine
    from deepgym.engines.ray import RayEngine
    from deepgym.engines.remote import RemoteEngine

__all__ = ["Engine", "LocalEngine", "RayEngine", "RemoteEngine"]

_LAZY = {
    "LocalEngine": "deepgym.engines.local",
    "RayEngine": "deepgym.engines.ray",
    "RemoteEngine": "deepgym.engines.remote",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deepgym.engines' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
