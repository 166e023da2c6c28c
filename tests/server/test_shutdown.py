"""Graceful shutdown: runs in flight finish, or come back without a verdict; none is lost."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from deepgym.client import DeepGym
from deepgym.models import BatchResult, RunResult
from deepgym.protocol import StreamEvent
from deepgym.server.runner import ThreadedServer, make_server
from deepgym.server.streams import SHUTDOWN_CAUSE
from deepgym.store import RunStore
from tests.server.conftest import TOKEN, fake_app, fake_service


def _drain_during(
    answers: list[str], grace_s: float, store: RunStore | None = None
) -> list[StreamEvent]:
    service, _ = fake_service(store=store)

    async def go() -> list[StreamEvent]:
        plan = service.check_batch("two_sum", answers, 2, 8, None)
        stream = service.open_stream(plan)
        events = []
        async for line in stream:
            ev = StreamEvent.model_validate_json(line)
            events.append(ev)
            if ev.event == "start":
                asyncio.get_running_loop().call_later(0.1, service.begin_drain, grace_s)
        await service.close()
        return events

    return asyncio.run(go())


def test_runs_that_outlast_the_grace_come_back_without_a_verdict(store: RunStore) -> None:
    answers = ["pass", "sleep:5", "sleep:0.05", "pass"]
    t0 = time.monotonic()
    events = _drain_during(answers, grace_s=0.3, store=store)
    assert time.monotonic() - t0 < 3  # the 5 s run was cancelled, not waited for
    groups = {e.group: e.results or [] for e in events if e.event == "group"}
    assert sorted(groups) == [0, 1]
    results = groups[0] + groups[1]
    assert [r.has_verdict for r in results] == [True, False, True, True]
    assert results[1].error_type == "sandbox_error" and results[1].error == SHUTDOWN_CAUSE
    assert results[1].score == 0.0 and not results[1].passed
    assert events[-1].event == "end"
    run_id = events[0].run_id or ""
    stored = store.results(run_id)
    assert sorted(stored) == [0, 1, 2, 3] and not stored[1].has_verdict


def test_runs_within_the_grace_finish() -> None:
    events = _drain_during(["sleep:0.3", "pass", "pass"], grace_s=5.0)
    results = [r for e in events if e.event == "group" for r in e.results or []]
    assert [r.passed for r in results] == [True, True, True]


def test_new_requests_are_refused_while_draining() -> None:
    app, fake = fake_app(token=TOKEN)

    async def go() -> tuple[int, int, int]:
        app.state.service.begin_drain(10.0)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://t",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as c:
            run = await c.post("/v1/run", json={"env": "two_sum", "answer": "pass"})
            batch = await c.post("/v1/run_batch", json={"env": "two_sum", "answers": ["pass"]})
            health = await c.get("/health")
            return run.status_code, batch.status_code, health.status_code

    assert asyncio.run(go()) == (503, 503, 503)
    assert not fake.calls


def test_a_real_server_stopping_mid_batch_loses_nothing() -> None:
    """uvicorn on 127.0.0.1, stopped as a signal would stop it, while a remote batch streams."""
    app, _ = fake_app(token=TOKEN, close_backend=True)
    server = ThreadedServer(app, grace_s=0.4).start()
    got: list[BatchResult] = []
    answers = ["pass", "sleep:0.1", "sleep:30", "pass", "fail", "sleep:30"]
    try:
        with DeepGym(mode="remote", url=server.url, token=TOKEN) as dg:
            worker = threading.Thread(
                target=lambda: got.append(dg.run_batch("two_sum", answers, group_size=2))
            )
            worker.start()
            deadline = time.monotonic() + 10
            while app.state.service.metrics.runs.total() < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            server.stop()
            worker.join(20)
            assert not worker.is_alive()
    finally:
        server.stop()
    (batch,) = got
    assert len(batch.results) == len(answers)
    assert [r.has_verdict for r in batch.results] == [True, True, False, True, True, False]
    assert [r.error for r in batch.results if not r.has_verdict] == [SHUTDOWN_CAUSE] * 2
    assert batch.passed == 3 and batch.no_verdict_count == 2


def test_health_says_503_while_a_real_server_drains() -> None:
    """After the stop signal, while a run is in flight, /health answers 503 (not a refused
    connection) and new work is refused; once the run is done, the server stops."""
    app, _ = fake_app(token=TOKEN, close_backend=True)
    server = ThreadedServer(app, grace_s=5.0).start()
    got: list[RunResult] = []
    try:
        with DeepGym(mode="remote", url=server.url, token=TOKEN) as dg:
            worker = threading.Thread(target=lambda: got.append(dg.run("two_sum", "sleep:1.5")))
            worker.start()
            deadline = time.monotonic() + 10
            while app.state.service.in_flight_requests < 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            server.server.should_exit = True  # what SIGTERM does
            while not app.state.service.draining and time.monotonic() < deadline:
                time.sleep(0.02)
            health = httpx.get(f"{server.url}/health", timeout=5)
            refused = httpx.post(
                f"{server.url}/v1/run",
                json={"env": "two_sum", "answer": "pass"},
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=5,
            )
            worker.join(20)
    finally:
        server.stop()
    assert (health.status_code, health.json()["status"]) == (503, "draining")
    assert refused.status_code == 503
    assert [r.passed for r in got] == [True]  # the run in flight finished within the grace
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health", timeout=5)  # stopped: the socket is closed


def test_a_quiet_stream_sends_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    import deepgym.server.streams as streams_mod

    monkeypatch.setattr(streams_mod, "HEARTBEAT_S", 0.05)
    service, _ = fake_service()

    async def go() -> list[str]:
        plan = service.check_batch("two_sum", ["sleep:0.4", "pass"], None, 8, None)
        kinds = [StreamEvent.model_validate_json(x).event async for x in service.open_stream(plan)]
        await service.close()
        return kinds

    kinds = asyncio.run(go())
    assert kinds[0] == "start" and kinds[-1] == "end"
    assert kinds.count("heartbeat") >= 3 and kinds.count("group") == 1


def test_runs_that_fail_inside_the_service_come_back_without_a_verdict() -> None:
    service, _ = fake_service()

    async def broken(*args: Any, **kwargs: Any) -> AsyncIterator[tuple[int, list[RunResult]]]:
        yield 1, [RunResult(score=1.0, passed=True, env_name="two_sum")]
        raise RuntimeError("the pool fell over")

    service.client.stream_groups = broken  # type: ignore[method-assign]

    async def go() -> list[RunResult]:
        plan = service.check_batch("two_sum", ["a", "b", "c"], 1, 8, None)
        events = [StreamEvent.model_validate_json(x) async for x in service.open_stream(plan)]
        await service.close()
        assert events[-1].event == "end" and service.in_flight_requests == 0
        by_group = {e.group: (e.results or [])[0] for e in events if e.event == "group"}
        return [by_group[g] for g in range(3)]

    results = asyncio.run(go())
    assert [r.has_verdict for r in results] == [False, True, False]
    assert results[0].error_type == "runtime_error"
    assert "RuntimeError: the pool fell over" in results[0].error


def test_the_service_runs_on_asyncios_loop_whatever_is_installed() -> None:
    """uvicorn's "auto" picks uvloop where it is installed (atroposlib and NeMo Gym bring it);
    under uvloop a killed session's sandbox answered 500 (tests/server/test_sessions_remote.py)."""
    app, _ = fake_app()
    assert make_server(app).config.loop == "asyncio"
