"""Blocking objects over async ones: an event loop in a daemon thread (a portal).

``DeepGym`` and ``RewardFunction`` are ``BlockingFace`` subclasses over their async cores, so
there is one implementation of every method (the async one) and the blocking shell only submits
coroutines to the portal. The portal starts at the first call and stops at ``close`` (or at
interpreter exit), so a blocking object works from any thread, including one whose own event
loop is running (a notebook, a trainer's async loop).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, Protocol, Self, TypeVar

T = TypeVar("T")

__all__ = ["BlockingFace", "Portal"]


class Portal:
    """An event loop in a daemon thread; blocking calls submit coroutines to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="deepgym", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def _next(self, agen: AsyncIterator[T]) -> T:
        return await agen.__anext__()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """Drive an async iterator from blocking code, one item at a time."""
        try:
            while True:
                try:
                    yield self.call(self._next(agen))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None and self.loop.is_running():
                self.call(aclose())

    def stop(self) -> None:
        """Stop the loop and its thread."""
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class _Closable(Protocol):
    async def close(self) -> None: ...


class BlockingFace:
    """A blocking object over an async one (``_core``, with an ``async close()``): each call
    runs on a portal started at the first call, which ``close`` (or exit) stops."""

    _core: _Closable

    def __init__(self) -> None:
        self._portal: Portal | None = None
        self._lock = threading.Lock()

    def _get_portal(self) -> Portal:
        with self._lock:
            if self._portal is None:
                self._portal = Portal()
                atexit.register(self.close)
            return self._portal

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._get_portal().call(coro)

    def close(self) -> None:
        """Release the async core and stop the portal thread."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is not None:
            portal.call(self._core.close())
            portal.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
