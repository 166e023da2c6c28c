"""The agent sessions a service keeps, by ``sandbox_id``: opened on the service's client up to
``max_sessions``, each request of one run as a request of the service (the drain waits for it),
closed by its client, at its environment's ``lifetime`` (reaped once no request of it is in
flight; its id then answers ``SandboxExpiredError``), or at shutdown (``close_sessions``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from deepgym.client import AsyncDeepGym
from deepgym.exceptions import (
    DeepGymError,
    SandboxExpiredError,
    TransportError,
    UnknownSessionError,
)
from deepgym.models import Environment
from deepgym.session import AsyncSession
from deepgym.text import one_line

log = logging.getLogger("deepgym.server")
T = TypeVar("T")

REAP_GRACE_S = 2.0
"""How long past its lifetime a session is kept (its sandbox already ended) before the service
closes it, so that a request at the very end still answers ``SandboxExpiredError``."""
REMEMBERED_EXPIRED = 4096
"""How many reaped sessions' ids the service still answers ``SandboxExpiredError`` for."""


@dataclass
class OpenSession:
    """One agent session the service keeps: its requests in flight, its reaping."""

    session: AsyncSession
    reaper: asyncio.TimerHandle | None = None
    busy: int = 0
    expired: bool = False
    """Past its lifetime: closed once no request of it is in flight."""


class OpenSessions:
    """The sessions open now (``sessions``, by ``sandbox_id``), and the ids reaped lately.

    ``guard`` runs each call as one request of the service (``Service._abandonable``: the drain
    waits for it, and ends it when its grace is over).
    """

    def __init__(
        self,
        client: AsyncDeepGym,
        max_sessions: int,
        guard: Callable[[Awaitable[Any]], Awaitable[Any]],
    ) -> None:
        self.client = client
        self.max_sessions = max_sessions
        self._guard = guard
        self.sessions: dict[str, OpenSession] = {}
        """The agent sessions open now, by ``sandbox_id``."""
        self._opening = 0
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    async def open_session(self, env: Environment) -> str:
        """Open a session of ``env`` on the service's client; its ``sandbox_id``."""
        if len(self.sessions) + self._opening >= self.max_sessions:
            raise TransportError(
                f"{self.max_sessions} sessions are open: the service's limit",
                status_code=429,
            )
        self._opening += 1
        try:
            session: AsyncSession = await self._guard(self.client.session(env))
        finally:
            self._opening -= 1
        sid = session.sandbox_id
        entry = OpenSession(session)
        loop = asyncio.get_running_loop()
        entry.reaper = loop.call_later(env.lifetime + REAP_GRACE_S, self._reap, sid)
        self.sessions[sid] = entry
        return sid

    def _entry(self, sid: str) -> OpenSession:
        entry = self.sessions.get(sid)
        if entry is not None and not entry.expired:
            return entry
        cause = self._expired.get(sid)
        if cause is not None or entry is not None:
            raise SandboxExpiredError(cause or f"session {sid}: its sandbox's lifetime ended")
        raise UnknownSessionError(
            f"unknown session {one_line(sid, 80)!r}: closed, or never opened on this service"
        )

    async def in_session(self, sid: str, op: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """``op`` on session ``sid`` as one request (the drain waits for it); a session past
        its lifetime is closed once its last request is done."""
        entry = self._entry(sid)
        entry.busy += 1
        try:
            result: T = await self._guard(op(entry.session))
            return result
        finally:
            entry.busy -= 1
            if entry.expired and entry.busy == 0:
                self._end_later(sid)

    async def close_session(self, sid: str) -> None:
        """Close session ``sid`` (its client is done with it)."""
        entry = self.sessions.get(sid)
        if entry is None:
            if sid not in self._expired:  # one reaped at its lifetime is closed already
                self._entry(sid)  # raises: unknown
            return
        await self._drop(sid, entry)

    def _reap(self, sid: str) -> None:
        """The session's lifetime is over: close it now, or once its requests are done."""
        entry = self.sessions.get(sid)
        if entry is None:
            return
        entry.expired = True
        lifetime = entry.session.env.lifetime
        self._expired[sid] = f"session {sid}: its sandbox's lifetime of {lifetime:g} s ended"
        while len(self._expired) > REMEMBERED_EXPIRED:
            self._expired.popitem(last=False)
        if entry.busy == 0:
            self._end_later(sid)

    def _end_later(self, sid: str) -> None:
        entry = self.sessions.get(sid)
        if entry is None:
            return
        task = asyncio.ensure_future(self._drop(sid, entry))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _drop(self, sid: str, entry: OpenSession) -> None:
        if self.sessions.get(sid) is entry:
            del self.sessions[sid]
        if entry.reaper is not None:
            entry.reaper.cancel()
        try:
            await entry.session.close()
        except (DeepGymError, OSError) as exc:  # the session is gone either way
            log.warning("session %s: closing it failed: %s", sid, exc)

    async def close_sessions(self) -> None:
        """Close every session still open (at shutdown)."""
        entries = list(self.sessions.items())
        await asyncio.gather(*(self._drop(sid, e) for sid, e in entries))
        await asyncio.gather(*list(self._closing), return_exceptions=True)
