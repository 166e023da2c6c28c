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
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, Protocol, Self, TypeVar

T = TypeVar("T")

__all__ = ["BlockingFace", "Portal"]


CANCEL_WAIT_S = 10.0
"""How long an interrupted call waits for its work to stop (its sandboxes ended) before the
interrupt goes on regardless."""


LIVENESS_S = 1.0
"""How often a waiting call checks that the portal's loop thread is still alive (one whose
loop died, say from a callback that raised ``KeyboardInterrupt`` in it, would never answer)."""


class _Tracked:
    """The task a portal call runs in, once it has started."""

    task: asyncio.Task[Any] | None = None


class Portal:
    """An event loop in a daemon thread; blocking calls submit coroutines to it.

    A call interrupted in the calling thread (Ctrl-C's ``KeyboardInterrupt``, a signal handler's
    exception) cancels its coroutine and waits, up to ``CANCEL_WAIT_S``, until it has stopped,
    so what it started (runs, sandboxes, streams) ends before the interrupt goes on. ``stop``
    cancels whatever is left and closes the loop's async generators: nothing is destroyed while
    pending.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="deepgym", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        # A callback that raised KeyboardInterrupt or SystemExit in the loop ends the thread;
        # waiting calls notice and raise.
        with contextlib.suppress(BaseException):
            self.loop.run_forever()

    @staticmethod
    async def _tracked(coro: Coroutine[Any, Any, T], box: _Tracked) -> T:
        box.task = asyncio.current_task()
        return await coro

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal's loop and wait for its result."""
        if not self.thread.is_alive():
            coro.close()
            raise RuntimeError("deepgym's event loop thread has stopped")
        box = _Tracked()
        fut = asyncio.run_coroutine_threadsafe(self._tracked(coro, box), self.loop)
        try:
            # Wait on completion, not on ``result(timeout=)``: the call's own error may be a
            # TimeoutError (DeepGymTimeoutError is one), which must not read as "not done yet".
            while not concurrent.futures.wait([fut], timeout=LIVENESS_S).done:
                if not self.thread.is_alive():  # its loop died: nothing will answer
                    fut.cancel()
                    raise RuntimeError("deepgym's event loop thread has stopped")
            return fut.result()
        except BaseException:
            if not fut.done():  # interrupted here, not failed there: stop the work first
                fut.cancel()
                self._settle(box)
            raise

    async def _finished(self, box: _Tracked) -> None:
        if box.task is not None:
            await asyncio.wait([box.task])

    def _settle(self, box: _Tracked) -> None:
        """Wait until a cancelled call's task has ended (its ``finally`` blocks run)."""
        if not self.loop.is_running():
            return
        waiter = asyncio.run_coroutine_threadsafe(self._finished(box), self.loop)
        with contextlib.suppress(concurrent.futures.TimeoutError):
            waiter.result(timeout=CANCEL_WAIT_S)

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
            running = getattr(agen, "ag_running", False)  # a cancel that did not settle in time
            if aclose is not None and self.loop.is_running() and not running:
                self.call(aclose())

    async def _drain(self) -> None:
        """Cancel every task still on the loop, wait for them, close its async generators. A task
        already being cancelled is left to finish its clean-up (a second cancel would cut it
        short: a sandbox killed but not reaped)."""
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for task in tasks:
            if not task.cancelling():
                task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=CANCEL_WAIT_S / 2)
            for task in pending:  # one that went on after its cancel: cancel it again
                task.cancel()
            if pending:  # bounded: a task that ignores two cancels is not waited for
                await asyncio.wait(pending, timeout=CANCEL_WAIT_S / 2)
            for task in tasks:  # retrieve their outcomes (nothing is logged as never retrieved)
                if task.done() and not task.cancelled():
                    task.exception()
        await self.loop.shutdown_asyncgens()

    def stop(self) -> None:
        """End what is left on the loop, then stop the loop and its thread.

        A loop whose thread died (a callback raised ``KeyboardInterrupt`` or ``SystemExit`` in
        it) is drained here, in the caller's thread, before it is closed: closing it with tasks
        or async generators still pending would leave them to the garbage collector, which
        prints ``Task was destroyed but it is pending!`` for each.
        """
        if self.loop.is_running():
            drained = asyncio.run_coroutine_threadsafe(self._drain(), self.loop)
            with contextlib.suppress(Exception):
                drained.result(timeout=CANCEL_WAIT_S)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if self.loop.is_running() or self.loop.is_closed():
            return
        if not self.thread.is_alive():
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self._drain())
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
            try:
                if portal.thread.is_alive():
                    portal.call(self._core.close())
            finally:
                portal.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
