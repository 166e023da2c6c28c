"""Fixtures for the service's tests: a client over an in-memory backend, its app, a real server.

``FakeBackend`` (``tests.fakes``) picks each outcome from the answer's text: "pass", "fail",
"down" (the sandbox never starts: no verdict), "flaky" and "sleep:<s>".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepgym.client import AsyncDeepGym
from deepgym.models import Environment
from deepgym.scheduling import TimeLimitPolicy
from deepgym.server.app import create_app
from deepgym.server.runner import ThreadedServer
from deepgym.server.service import Service
from deepgym.store import RunStore
from tests.fakes import FakeBackend

TOKEN = "test-token-1234"
CONSOLE_TOKEN = "console-token-5678"

TOY: dict[str, Any] = {
    "name": "toy",
    "entry_point": "f",
    "test_cases": [{"args": [], "expected": 1}],
    "timeout": 30.0,
}
TOY_ENV = Environment(**TOY)


NO_DERIVED = TimeLimitPolicy(factor=None)
"""Time limits are the environments' caps: no reference runs to count in the fake's calls."""


def fake_client() -> tuple[AsyncDeepGym, FakeBackend]:
    fake = FakeBackend()
    return AsyncDeepGym(time_limits=NO_DERIVED, backend=fake), fake


def fake_service(**kw: Any) -> tuple[Service, FakeBackend]:
    """A service over the fake backend (keyword arguments: ``Service``'s)."""
    fake = FakeBackend()
    return Service(fake, time_limits=NO_DERIVED, **kw), fake


def fake_app(**kw: Any) -> tuple[Any, FakeBackend]:
    """The app over the fake backend (keyword arguments: ``create_app``'s)."""
    fake = FakeBackend()
    return create_app(fake, time_limits=NO_DERIVED, **kw), fake


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.sqlite") as s:
        yield s


def asgi(app: Any, token: str | None = TOKEN) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers=headers
    )


def call(app: Any, method: str, path: str, token: str | None = TOKEN, **kw: Any) -> httpx.Response:
    """One request to the app, in process."""

    async def go() -> httpx.Response:
        async with asgi(app, token) as c:
            return await c.request(method, path, **kw)

    return asyncio.run(go())


@pytest.fixture
def served(store: RunStore) -> Iterator[tuple[ThreadedServer, FakeBackend]]:
    """A real uvicorn server on 127.0.0.1 (ephemeral port) over the fake backend."""
    app, fake = fake_app(store=store, token=TOKEN, console_token=CONSOLE_TOKEN, close_backend=True)
    with ThreadedServer(app, grace_s=0.5) as server:
        yield server, fake
