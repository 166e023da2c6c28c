"""The remote client over ``httpx.MockTransport``: every branch of the protocol and its failures.

A transport failure is a result without a verdict in a batch (the groups that arrived are kept)
and a ``TransportError`` in ``run``; bad input raises what local mode raises, before anything runs.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepgym import (
    DeepGym,
    Environment,
    is_infrastructure_failure,
    is_misconfiguration,
    load_environment,
)
from deepgym.client import AsyncDeepGym
from deepgym.engines.remote import RemoteEngine, env_spec
from deepgym.exceptions import (
    ConfigError,
    DeepGymTimeoutError,
    SandboxDiedError,
    SandboxError,
    TransportError,
    UnknownEnvironmentError,
    VerifierCodeRefusedError,
    VerifierError,
)
from deepgym.models import RunResult

URL = "http://127.0.0.1:9"
Handler = Callable[[httpx.Request], Any]


def result(score: float = 1.0, env: str = "two_sum", **kw: Any) -> RunResult:
    if kw.get("has_verdict") is False:
        return RunResult.no_verdict(kw.pop("error_type", "sandbox_error"), "x", env_name=env)
    return RunResult(score=score, passed=score == 1.0, env_name=env, **kw)


def line(**event: Any) -> bytes:
    if "results" in event:
        event["results"] = [r.model_dump(mode="json") for r in event["results"]]
    return json.dumps(event).encode() + b"\n"


def client(handler: Handler, token: str | None = "tok") -> AsyncDeepGym:
    return AsyncDeepGym(engine=RemoteEngine(URL, token, transport=httpx.MockTransport(handler)))


def run(dg: AsyncDeepGym, coro_fn: Callable[[AsyncDeepGym], Any]) -> Any:
    async def go() -> Any:
        try:
            return await coro_fn(dg)
        finally:
            await dg.close()

    return asyncio.run(go())


def stream(*chunks: bytes, fail: Exception | None = None) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for c in chunks:
            yield c
        if fail is not None:
            raise fail

    return httpx.Response(200, content=body(), headers={"content-type": "application/x-ndjson"})


# --- construction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"mode": "remote"}, "needs url"),
        ({"mode": "local", "url": URL}, "url and token are for mode='remote'"),
        ({"mode": "remote", "url": "ftp://x"}, "http:// or https://"),
        ({"mode": "remote", "url": URL, "workers": 2}, "set them on deepgym serve"),
        ({"mode": "remote", "url": URL, "token": ""}, "token"),
        ({"mode": "cloud"}, "mode must be one of"),
    ],
)
def test_bad_construction(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        AsyncDeepGym(**kw)
    with pytest.raises(ConfigError, match=words):
        DeepGym(**kw)


@pytest.mark.parametrize(
    "code",
    [
        f"import deepgym\ndg = deepgym.AsyncDeepGym(mode='remote', url={URL!r})",
        "import deepgym.cli, deepgym.server, deepgym.store, deepgym.protocol",
    ],
    ids=["remote-client", "cli-and-store"],
)
def test_no_server_and_no_httpx_until_used(code: str) -> None:
    probe = (
        f"import sys\n{code}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('httpx', 'fastapi', 'uvicorn', 'starlette')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# --- run ----------------------------------------------------------------------------------------


def test_run_sends_the_token_and_returns_the_result() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"result": result().model_dump(mode="json")})

    r = run(client(handler), lambda dg: dg.run("two_sum", "answer", time_limit=3.0))
    assert r.passed and r.env_name == "two_sum"
    (req,) = seen
    assert req.url.path == "/v1/run" and req.headers["authorization"] == "Bearer tok"
    assert json.loads(req.content) == {"env": "two_sum", "answer": "answer", "time_limit": 3.0}


def test_no_token_no_header() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "authorization" not in request.headers
        return httpx.Response(200, json={"result": result().model_dump(mode="json")})

    assert run(client(handler, token=None), lambda dg: dg.run("two_sum", "a")).passed


@pytest.mark.parametrize(
    "cls", [SandboxError, SandboxDiedError, DeepGymTimeoutError, VerifierError]
)
def test_run_raises_what_the_service_raised(cls: type[Exception]) -> None:
    nv = result(has_verdict=False)

    def handler(request: httpx.Request) -> httpx.Response:
        body = {
            "result": nv.model_dump(mode="json"),
            "raised": {"type": cls.__name__, "message": "it broke"},
        }
        return httpx.Response(200, json=body)

    with pytest.raises(cls, match="it broke") as info:
        run(client(handler), lambda dg: dg.run("two_sum", "a"))
    assert type(info.value) is cls
    assert info.value.result == nv  # type: ignore[attr-defined]


ERRORS = [
    (404, "unknown_environment", UnknownEnvironmentError, False),
    (403, "verifier_code_refused", VerifierCodeRefusedError, False),
    (400, "bad_request", ConfigError, False),
    (413, "too_many_answers", ConfigError, False),
    (413, "too_large", ConfigError, False),
    (401, "unauthorized", TransportError, True),
    (403, "forbidden", TransportError, True),
    (429, "busy", TransportError, True),
    (500, "internal", TransportError, True),
    (500, "sandbox_error", SandboxError, False),  # a session's sandbox: the class local mode has
    (503, "shutting_down", TransportError, True),
    (502, "", TransportError, True),
]


@pytest.mark.parametrize(("status", "code", "cls", "infra"), ERRORS)
def test_error_replies_map_to_local_errors_or_transport(
    status: int, code: str, cls: type[Exception], infra: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if not code:
            return httpx.Response(status, text="<html>bad gateway</html>")
        return httpx.Response(status, json={"error": {"code": code, "message": f"m {code}"}})

    with pytest.raises(cls) as info:
        run(client(handler), lambda dg: dg.run("two_sum", "a"))
    assert type(info.value) is cls
    assert is_infrastructure_failure(info.value) is infra
    if isinstance(info.value, TransportError):
        assert info.value.status_code == status


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        httpx.RemoteProtocolError("garbage"),
    ],
)
def test_run_transport_failure_is_an_infrastructure_error(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(TransportError) as info:
        run(client(handler), lambda dg: dg.run("two_sum", "a"))
    assert info.value.__cause__ is exc
    assert is_infrastructure_failure(info.value)


@pytest.mark.parametrize(
    "reply",
    [
        b"not json",
        b'{"result": {"score": 7}}',
        b"{}",
        b'{"raised": {"type": "OSError", "message": "x"}}',
    ],
)
def test_run_malformed_reply_is_a_transport_error(reply: bytes) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=reply)

    with pytest.raises(TransportError):
        run(client(handler), lambda dg: dg.run("two_sum", "a"))


def test_run_checks_the_answer_before_sending() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing should be sent")

    with pytest.raises(ConfigError, match="model_output"):
        run(client(handler), lambda dg: dg.run("two_sum", 3))


def test_time_limit() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/time_limit"
        return httpx.Response(200, json={"time_limit": 1.5})

    assert run(client(handler), lambda dg: dg.time_limit("two_sum")) == 1.5

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"limit": 1})

    with pytest.raises(TransportError):
        run(client(broken), lambda dg: dg.time_limit("two_sum"))


# --- batches ------------------------------------------------------------------------------------


def test_batch_assembles_groups_in_answer_order_and_reports_progress() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["group_size"] == 2 and body["answers"] == ["a", "b", "c"]
        return stream(
            line(event="start", total=3, run_id="r1"),
            line(event="progress", done=1, total=3),
            line(event="group", group=1, start=2, results=[result(0.0)]),
            line(event="heartbeat"),
            line(event="progress", done=3, total=3),
            line(event="group", group=0, start=0, results=[result(1.0), result(0.5)]),
            line(event="end", execution_time_ms=5.0),
        )

    seen: list[tuple[int, int]] = []
    batch = run(
        client(handler),
        lambda dg: dg.run_batch(
            "two_sum", ["a", "b", "c"], group_size=2, progress=lambda d, t: seen.append((d, t))
        ),
    )
    assert [r.score for r in batch.results] == [1.0, 0.5, 0.0]
    assert seen == [(1, 3), (3, 3)]


BROKEN_STREAMS: dict[str, Callable[[], httpx.Response]] = {
    "cut-mid-stream": lambda: stream(
        line(event="start", total=4),
        line(event="group", group=0, start=0, results=[result(), result()]),
        fail=httpx.ReadError("connection reset"),
    ),
    "ends-without-end": lambda: stream(
        line(event="start", total=4),
        line(event="group", group=0, start=0, results=[result(), result()]),
    ),
    "malformed-line": lambda: stream(
        line(event="start", total=4),
        line(event="group", group=0, start=0, results=[result(), result()]),
        b'{"event": "group", "group": 1, "results": [{"score": 9}]}\n',
    ),
    "duplicate-group": lambda: stream(
        line(event="start", total=4),
        line(event="group", group=0, start=0, results=[result(), result()]),
        line(event="group", group=0, start=0, results=[result(), result()]),
    ),
    "wrong-count": lambda: stream(
        line(event="start", total=4),
        line(event="group", group=0, start=0, results=[result(), result()]),
        line(event="group", group=1, start=2, results=[result()]),
    ),
    "unknown-group": lambda: stream(
        line(event="start", total=4),
        line(event="group", group=0, start=0, results=[result(), result()]),
        line(event="group", group=7, start=2, results=[result(), result()]),
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_STREAMS))
def test_a_broken_stream_keeps_what_arrived_and_loses_nothing(case: str) -> None:
    batch = run(
        client(lambda request: BROKEN_STREAMS[case]()),
        lambda dg: dg.run_batch("two_sum", ["a", "b", "c", "d"], group_size=2),
    )
    assert len(batch.results) == 4
    assert [r.has_verdict for r in batch.results] == [True, True, False, False]
    lost = batch.results[2]
    assert lost.error_type == "sandbox_error" and lost.error.startswith("TransportError")
    assert lost.env_name == "two_sum" and lost.score == 0.0
    assert batch.no_verdict_count == 2 and batch.passed == 2


@pytest.mark.parametrize(
    "fail",
    [
        lambda request: httpx.Response(
            503, json={"error": {"code": "shutting_down", "message": "x"}}
        ),
        lambda request: httpx.Response(500, text="boom"),
        lambda request: httpx.Response(429, json={"error": {"code": "busy", "message": "x"}}),
        lambda request: (_ for _ in ()).throw(httpx.ReadTimeout("slow")),
        lambda request: stream(line(event="start", total=99)),
    ],
    ids=["503", "500", "429", "read-timeout", "wrong-total"],
)
def test_a_batch_that_never_started_is_all_no_verdict(fail: Handler) -> None:
    # A service that is there but failing (busy, restarting, broken): no verdict, per run.
    batch = run(
        client(fail),
        lambda dg: dg.run_batch(["two_sum", "fizzbuzz"], ["a", "b"]),
    )
    assert [r.has_verdict for r in batch.results] == [False, False]
    assert [r.env_name for r in batch.results] == ["two_sum", "fizzbuzz"]


@pytest.mark.parametrize(
    ("fail", "words"),
    [
        (
            lambda request: (_ for _ in ()).throw(httpx.ConnectError("refused")),
            "is the service running at that url?",
        ),
        (
            lambda request: (_ for _ in ()).throw(httpx.ConnectTimeout("no route")),
            "is the service running at that url?",
        ),
        (
            lambda request: httpx.Response(
                401, json={"error": {"code": "unauthorized", "message": "bad token"}}
            ),
            "answered 401: bad token (check the client's token",
        ),
        (
            lambda request: httpx.Response(
                403, json={"error": {"code": "forbidden", "message": "no"}}
            ),
            "answered 403",
        ),
    ],
    ids=["refused", "connect-timeout", "401", "403"],
)
@pytest.mark.parametrize("method", ["run_batch", "eval", "stream_groups"])
def test_a_misconfigured_client_raises_instead_of_a_batch_without_verdicts(
    fail: Handler, words: str, method: str
) -> None:
    # A wrong url or token fails every run alike: in training every reward would be None.
    async def call(dg: AsyncDeepGym) -> Any:
        if method == "run_batch":
            return await dg.run_batch(["two_sum", "fizzbuzz"], ["a", "b"])
        if method == "eval":
            return await dg.eval(["two_sum"], {"two_sum": "a"})
        return [g async for g in dg.stream_groups("two_sum", ["a", "b"], group_size=2)]

    with pytest.raises(TransportError) as info:
        run(client(fail), call)
    assert words in str(info.value)
    assert is_misconfiguration(info.value)


def test_a_failure_after_groups_arrived_keeps_them_and_does_not_raise() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return stream(
            line(event="start", total=2),
            line(event="group", group=0, start=0, results=[result()]),
            fail=httpx.ConnectError("refused"),
        )

    batch = run(client(handler), lambda dg: dg.run_batch("two_sum", ["a", "b"], group_size=1))
    assert [r.has_verdict for r in batch.results] == [True, False]


def test_bad_batch_input_raises_before_sending() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing should be sent")

    dg = client(handler)
    with pytest.raises(ConfigError, match="not one str"):
        run(dg, lambda dg: dg.run_batch("two_sum", "abc"))
    with pytest.raises(ConfigError, match="group_size"):
        run(client(handler), lambda dg: dg.run_batch("two_sum", ["a"], group_size=0))
    with pytest.raises(ConfigError, match="2 environments for 3 answers"):
        run(client(handler), lambda dg: dg.run_batch(["two_sum", "x"], ["a", "b", "c"]))
    with pytest.raises(ConfigError, match=r"outputs\[1\]"):
        run(client(handler), lambda dg: dg.run_batch("two_sum", ["a", 1]))


def test_a_batch_refused_as_bad_input_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "unknown_environment", "message": "unknown environment 'x'"}}
        return httpx.Response(404, json=body)

    with pytest.raises(UnknownEnvironmentError):
        run(client(handler), lambda dg: dg.run_batch("x", ["a"]))


def test_stream_groups_yields_as_groups_arrive_then_the_lost_ones() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return stream(
            line(event="start", total=6),
            line(event="group", group=2, start=4, results=[result(), result()]),
            line(event="group", group=0, start=0, results=[result(), result()]),
            fail=httpx.ReadError("reset"),
        )

    async def collect(dg: AsyncDeepGym) -> list[tuple[int, list[bool]]]:
        return [
            (g, [r.has_verdict for r in rs])
            async for g, rs in dg.stream_groups("two_sum", ["a"] * 6, group_size=2)
        ]

    got = run(client(handler), collect)
    assert got == [(2, [True, True]), (0, [True, True]), (1, [False, False])]


def test_leaving_a_stream_early_closes_it() -> None:
    closed: list[bool] = []

    def handler(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            try:
                yield line(event="start", total=4)
                yield line(event="group", group=0, start=0, results=[result(), result()])
                await asyncio.sleep(30)
                yield b""
            finally:
                closed.append(True)

        return httpx.Response(200, content=body())

    async def first(dg: AsyncDeepGym) -> int:
        async for g, _ in dg.stream_groups("two_sum", ["a"] * 4, group_size=2):
            return g
        raise AssertionError("no group")

    assert run(client(handler), first) == 0
    assert closed == [True]


# --- eval ---------------------------------------------------------------------------------------


def test_eval_of_a_list() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["envs"] == ["two_sum", "fizzbuzz"] and body["outputs"] == {"two_sum": "a"}
        return stream(
            line(event="start", total=2),
            line(event="group", group=1, start=1, results=[result(0.0, "fizzbuzz")]),
            fail=httpx.ReadError("reset"),
        )

    ev = run(client(handler), lambda dg: dg.eval(["two_sum", "fizzbuzz"], {"two_sum": "a"}))
    assert ev.env_names == ["two_sum", "fizzbuzz"]
    assert [r.has_verdict for r in ev.results] == [False, True]
    assert ev.no_verdict_count == 1 and ev.judged_count == 1


def test_eval_of_a_suite_takes_its_names_from_the_service() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["suite"] == "builtin"
        return stream(
            line(event="start", total=2, env_names=["a", "b"]),
            line(event="group", group=0, start=0, results=[result(1.0, "a")]),
            fail=httpx.ReadError("reset"),
        )

    ev = run(client(handler), lambda dg: dg.eval("builtin", {}))
    assert ev.env_names == ["a", "b"]
    assert [r.has_verdict for r in ev.results] == [True, False]
    assert ev.results[1].env_name == "b"


def test_eval_of_a_suite_that_never_started_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    with pytest.raises(TransportError, match="refused"):
        run(client(handler), lambda dg: dg.eval("builtin", {}))


def test_eval_checks_its_outputs() -> None:
    with pytest.raises(ConfigError, match="outputs"):
        run(client(lambda r: None), lambda dg: dg.eval("builtin", ["a"]))


# --- environments on the wire -------------------------------------------------------------------


def test_env_spec(tmp_path: Path) -> None:
    assert env_spec("two_sum") == "two_sum"
    assert env_spec(load_environment("two_sum")) == "two_sum"
    assert env_spec("humaneval/3") == "humaneval/3"  # the service resolves it
    changed = load_environment("two_sum").model_copy(update={"timeout": 3.0})
    spec = env_spec(changed)
    assert isinstance(spec, dict) and spec["timeout"] == 3.0 and "source_dir" not in spec
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "verifier.py").write_text("def verify(solution, test_cases):\n    return 1.0\n")
    spec = env_spec(folder)
    assert isinstance(spec, dict) and spec["name"] == "mine"
    assert spec["verifier_code"].startswith("def verify") and "verifier_path" not in spec
    assert env_spec(str(folder)) == spec
    patch = Environment(
        name="p",
        kind="patch",
        repo_path=tmp_path,
        verifier_code="def verify(solution, test_cases):\n    return 1.0\n",
    )
    with pytest.raises(ConfigError, match="repository"):
        env_spec(patch)
    with pytest.raises(ConfigError, match="env must be"):
        env_spec(3)  # type: ignore[arg-type]


# --- the blocking client ------------------------------------------------------------------------


def test_blocking_client_runs_and_streams_over_the_portal() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/run":
            return httpx.Response(200, json={"result": result().model_dump(mode="json")})
        if json.loads(request.content)["group_size"] is None:
            return stream(
                line(event="start", total=2),
                line(event="group", group=0, start=0, results=[result(0.0), result()]),
                line(event="end"),
            )
        return stream(
            line(event="start", total=2),
            line(event="group", group=1, start=1, results=[result()]),
            line(event="group", group=0, start=0, results=[result(0.0)]),
            line(event="end"),
        )

    engine = RemoteEngine(URL, "tok", transport=httpx.MockTransport(handler))
    with DeepGym(engine=engine) as dg:
        assert dg.run("two_sum", "a").passed
        assert [g for g, _ in dg.stream_groups("two_sum", ["a", "b"], group_size=1)] == [1, 0]
        assert dg.run_batch("two_sum", ["a", "b"]).passed == 1


def test_a_remote_only_client_loads_no_sandbox_module() -> None:
    # The wire's constants live in deepgym.protocol: the client never loads this host's sandbox.
    probe = (
        "import json, sys\nimport deepgym.engines.remote\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('deepgym'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert "deepgym.engines.remote" in loaded
    assert [m for m in loaded if m == "deepgym.sandbox" or m.startswith("deepgym.sandbox.")] == []
