"""Remote mode against a real uvicorn server on 127.0.0.1: the same results as local mode.

Over the fake backend first (every method, both clients), then ``deepgym serve`` itself in a
subprocess with real sandboxes.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from deepgym import DeepGym, load_environment
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import SandboxError, TransportError, is_misconfiguration
from deepgym.models import RunResult
from deepgym.server.runner import ThreadedServer
from deepgym.store import RunStore
from tests.fakes import FakeBackend
from tests.procs import stop
from tests.server.conftest import TOKEN, TOY_ENV, fake_app, fake_client

SAME = {"service": True, "execution_time_ms": True}


def same(a: list[RunResult], b: list[RunResult]) -> None:
    assert [r.model_dump(exclude=SAME) for r in a] == [r.model_dump(exclude=SAME) for r in b]


ANSWERS = ["pass", "fail", "down", "flaky", "sleep:0.05", "pass", "fail"]


def test_remote_gives_the_results_local_gives(
    served: tuple[ThreadedServer, FakeBackend], store: RunStore
) -> None:
    server, _ = served
    local, _ = fake_client()

    async def both() -> None:
        remote = AsyncDeepGym(mode="remote", url=server.url, token=TOKEN)
        try:
            for dg in (local, remote):
                assert await dg.time_limit(TOY_ENV) == 30.0
            a = await local.run_batch("two_sum", ANSWERS, group_size=3)
            b = await remote.run_batch("two_sum", ANSWERS, group_size=3)
            same(a.results, b.results)
            assert a.totals == b.totals
            envs = ["two_sum", TOY_ENV, "fizzbuzz", "two_sum", TOY_ENV, "fizzbuzz", "two_sum"]
            a = await local.run_batch(envs, ANSWERS, group_size=2)
            b = await remote.run_batch(envs, ANSWERS, group_size=2)
            same(a.results, b.results)
            ea = await local.eval(["two_sum", "fizzbuzz", TOY_ENV], {"two_sum": "fail"})
            eb = await remote.eval(["two_sum", "fizzbuzz", TOY_ENV], {"two_sum": "fail"})
            same(ea.results, eb.results)
            assert ea.env_names == eb.env_names
            sa = [g async for g in local.stream_groups("two_sum", ANSWERS, group_size=2)]
            sb = [g async for g in remote.stream_groups("two_sum", ANSWERS, group_size=2)]
            da, db = dict(sa), dict(sb)
            assert sorted(da) == sorted(db) == [0, 1, 2, 3]
            for g in da:
                same(da[g], db[g])
            ra_ = await local.run("two_sum", "pass")
            rb_ = await remote.run("two_sum", "pass")
            same([ra_], [rb_])
            for dg in (local, remote):
                with pytest.raises(SandboxError) as info:
                    await dg.run("two_sum", "down")
                assert info.value.result.attempts == 2
        finally:
            await remote.close()
            await local.close()

    asyncio.run(both())
    kinds = sorted(r.kind for r in store.runs())
    assert kinds == ["batch", "batch", "batch", "eval"]  # every batch and eval was recorded


def test_blocking_remote_client_against_the_server(
    served: tuple[ThreadedServer, FakeBackend],
) -> None:
    server, fake = served
    with DeepGym(mode="remote", url=server.url, token=TOKEN) as dg:
        groups = list(
            dg.stream_groups(TOY_ENV, ["sleep:0.3", "pass", "pass", "pass"], group_size=2)
        )
        assert [g for g, _ in groups] == [1, 0]  # the straggler's group comes last
        batch = dg.run_batch("two_sum", ["pass"] * 20, group_size=4, max_parallel=4)
        assert batch.passed == 20 and len(batch.results) == 20
    assert fake.calls["pass"] == 23


def test_a_wrong_token_is_an_infrastructure_failure_that_a_batch_raises(
    served: tuple[ThreadedServer, FakeBackend],
) -> None:
    server, fake = served
    with DeepGym(mode="remote", url=server.url, token="wrong") as dg:
        with pytest.raises(TransportError) as info:
            dg.run("two_sum", "pass")
        assert info.value.status_code == 401
        with pytest.raises(TransportError, match="check the client's token") as info:
            dg.run_batch("two_sum", ["pass", "pass"])  # not two rewards of None, silently
        assert info.value.status_code == 401 and is_misconfiguration(info.value)
    assert not fake.calls


def test_a_server_that_is_gone_raises_from_a_batch() -> None:
    app, _ = fake_app(close_backend=True)
    server = ThreadedServer(app).start()
    url = server.url
    server.stop()
    with DeepGym(mode="remote", url=url) as dg:
        with pytest.raises(TransportError, match="is the service running") as info:
            dg.run_batch("two_sum", ["pass"] * 3)
        assert info.value.unreachable
        with pytest.raises(TransportError):
            dg.run("two_sum", "pass")


# --- deepgym serve, for real ---------------------------------------------------------------------


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    store = tmp_path / "serve.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym", "serve", "--port", "0", "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DEEPGYM_TOKEN": ""},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        console = proc.stdout.readline()
        m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", first)
        assert m, (first, proc.stderr.read() if proc.poll() is not None else "")
        assert console.startswith(f"console: {m.group(1)}/console?token=")
        yield proc, m.group(1), console.split(" ", 1)[1].strip()
    finally:
        stop(proc)


@pytest.mark.sandbox
def test_deepgym_serve_scores_like_local_mode_and_stops_cleanly(
    serve_process: tuple[subprocess.Popen[str], str, str],
) -> None:
    proc, url, console = serve_process
    assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"
    env = load_environment("two_sum")
    answers = [env.reference_solution or "", "def two_sum(nums, target):\n    return None\n"]
    with DeepGym(mode="remote", url=url) as remote, DeepGym() as local:
        a = local.run_batch(env, answers)
        b = remote.run_batch(env, answers)
        assert [r.score for r in b.results] == [1.0, 0.0]
        same(
            [r.model_copy(update={"evidence": None}) for r in a.results],
            [r.model_copy(update={"evidence": None}) for r in b.results],
        )
        assert b.results[0].isolation == "pool"
    page = httpx.get(console, timeout=10, follow_redirects=True)
    assert page.status_code == 200 and "batch" in page.text
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def test_serve_refuses_to_listen_off_loopback_without_a_token() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "deepgym", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DEEPGYM_TOKEN": ""},
    )
    assert out.returncode == 2
    assert out.stderr.strip().startswith("Error: --host 0.0.0.0 is reachable from other machines")
    assert "Traceback" not in out.stderr


def test_small_requests_do_not_wait_on_delayed_acks(
    served: tuple[ThreadedServer, FakeBackend],
) -> None:
    """Without TCP_NODELAY on accepted sockets each request stalls ~40 ms on a delayed ACK."""
    import statistics
    import time

    server, _ = served
    times = []
    with httpx.Client(base_url=server.url) as c:
        for _ in range(15):
            t = time.perf_counter()
            assert c.get("/health").status_code == 200
            times.append(time.perf_counter() - t)
    assert statistics.median(times) < 0.02, times


def test_deepgym_console_serves_the_store_behind_its_token(tmp_path: Path) -> None:
    with RunStore(tmp_path / "c.sqlite") as s:
        run_id = s.create_run("batch", "two_sum", ["two_sum"], ["x"])
        s.record(run_id, 0, RunResult(score=1.0, passed=True, env_name="two_sum"))
        s.finish(run_id)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deepgym",
            "console",
            "--port",
            "0",
            "--store",
            tmp_path / "c.sqlite",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.match(r"deepgym console: (http://127\.0\.0\.1:\d+)/console\?token=(\S+)$", first)
        assert m, first
        base, token = m.groups()
        assert httpx.get(f"{base}/console", timeout=10).status_code == 401
        # The printed URL as curl gets it (no redirect followed, no cookie kept): the page.
        plain = httpx.get(f"{base}/console?token={token}", timeout=10)
        assert plain.status_code == 200 and run_id in plain.text
        with httpx.Client(base_url=base, timeout=10, follow_redirects=True) as c:
            page = c.get(f"/console?token={token}")
            assert page.status_code == 200 and run_id in page.text
            assert c.get(f"/console/runs/{run_id}").status_code == 200
            assert c.post("/v1/run", json={"env": "two_sum", "answer": "x"}).status_code == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
