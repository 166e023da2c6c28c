"""The API in process (httpx's ASGI transport): routes, auth, limits, clear 4xx, no half-runs."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from deepgym.envs.registry import list_environments
from deepgym.exceptions import (
    DeepGymError,
    NoVerdictError,
    TransportError,
    is_infrastructure_failure,
)
from deepgym.models import RunResult
from deepgym.protocol import ERRORS, StreamEvent, WireError, error_for, error_status
from deepgym.server.app import error_response
from deepgym.server.inputs import Limits
from deepgym.store import RunStore
from tests.server.conftest import TOKEN, TOY, asgi, call, fake_app


def _events(body: bytes) -> list[StreamEvent]:
    return [StreamEvent.model_validate_json(line) for line in body.splitlines() if line.strip()]


def _app(**kw: Any) -> tuple[Any, Any]:
    return fake_app(token=TOKEN, **kw)


# --- routes -------------------------------------------------------------------------------------


def test_health_is_open_and_says_ok() -> None:
    app, _ = _app()
    r = call(app, "GET", "/health", token=None)
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_environments_lists_the_builtins() -> None:
    app, _ = _app()
    r = call(app, "GET", "/v1/environments")
    assert r.status_code == 200
    names = [e["name"] for e in r.json()["environments"]]
    assert names == list_environments()
    assert "builtin" in r.json()["suites"]


def test_run_returns_the_result() -> None:
    app, fake = _app()
    r = call(app, "POST", "/v1/run", json={"env": "two_sum", "answer": "pass"})
    assert r.status_code == 200, r.text
    result = RunResult.model_validate(r.json()["result"])
    assert result.passed and result.env_name == "two_sum" and r.json()["raised"] is None
    assert fake.calls["pass"] == 1


def test_run_carries_the_exception_run_raised() -> None:
    app, _ = _app()
    r = call(app, "POST", "/v1/run", json={"env": "two_sum", "answer": "down"})
    assert r.status_code == 200
    assert r.json()["raised"]["type"] == "SandboxError"
    assert r.json()["result"]["has_verdict"] is False
    assert r.json()["result"]["attempts"] == 2


def test_time_limit() -> None:
    app, _ = _app()
    r = call(app, "POST", "/v1/time_limit", json={"env": TOY, "time_limit": 2.5})
    assert r.json() == {"time_limit": 2.5}
    r = call(app, "POST", "/v1/time_limit", json={"env": TOY})
    assert r.json() == {"time_limit": 30.0}


def test_run_batch_streams_every_group_once(store: RunStore) -> None:
    app, _ = _app(store=store)
    answers = ["pass", "fail", "down", "pass", "pass"]
    r = call(
        app, "POST", "/v1/run_batch", json={"env": "two_sum", "answers": answers, "group_size": 2}
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    events = _events(r.content)
    assert events[0].event == "start" and events[0].total == 5 and events[0].run_id
    assert events[-1].event == "end"
    groups = {e.group: e for e in events if e.event == "group"}
    assert sorted(groups) == [0, 1, 2]
    assert [groups[g].start for g in (0, 1, 2)] == [0, 2, 4]
    flat = [r for g in (0, 1, 2) for r in groups[g].results or []]
    assert [r.score for r in flat] == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert [r.has_verdict for r in flat] == [True, True, False, True, True]
    assert [e.done for e in events if e.event == "progress"] == [1, 2, 3, 4, 5]
    # recorded as it ran
    info = store.run(events[0].run_id or "")
    assert info.kind == "batch" and info.complete and info.recorded == 5
    assert info.totals.no_verdict_count == 1 and info.totals.passed == 3


def test_eval_of_a_suite_names_its_environments(store: RunStore) -> None:
    app, fake = _app(store=store)
    outputs = {"two_sum": "pass", "fizzbuzz": "fail"}
    r = call(app, "POST", "/v1/eval", json={"suite": "builtin", "outputs": outputs})
    events = _events(r.content)
    assert events[0].env_names == list_environments()
    by_group = {e.group: (e.results or [])[0] for e in events if e.event == "group"}
    assert len(by_group) == len(list_environments())
    i = list_environments().index("fizzbuzz")
    assert by_group[i].env_name == "fizzbuzz" and by_group[i].score == 0.0
    assert fake.calls[""] == len(list_environments()) - 2  # no answer: the empty one
    info = store.run(events[0].run_id or "")
    assert info.kind == "eval" and info.source == "builtin"


# --- auth ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/environments", "/metrics"])
@pytest.mark.parametrize("token", [None, "wrong"])
def test_a_token_is_required(path: str, token: str | None) -> None:
    app, _ = _app()
    r = call(app, "GET", path, token=token)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


def test_no_token_needed_when_the_service_has_none() -> None:
    app, _ = fake_app()
    assert call(app, "GET", "/v1/environments", token=None).status_code == 200


def test_a_refused_request_runs_nothing() -> None:
    app, fake = _app()
    r = call(app, "POST", "/v1/run", token="nope", json={"env": "two_sum", "answer": "pass"})
    assert r.status_code == 401 and not fake.calls


# --- bad input: a clear 4xx, nothing half-run ---------------------------------------------------

BAD: dict[str, tuple[str, Any, int, str, str]] = {
    "malformed-json": ("/v1/run", b"{not json", 400, "bad_request", "malformed request body"),
    "missing-field": ("/v1/run", {"env": "two_sum"}, 400, "bad_request", "answer"),
    "unknown-field": (
        "/v1/run",
        {"env": "two_sum", "answer": "x", "extra": 1},
        400,
        "bad_request",
        "extra",
    ),
    "unknown-env": ("/v1/run", {"env": "two_summ", "answer": "x"}, 404, "unknown_environment", ""),
    "path-name": ("/v1/run", {"env": "/etc", "answer": "x"}, 404, "unknown_environment", "/etc"),
    "dotdot-name": (
        "/v1/run",
        {"env": "humaneval/../../x", "answer": "x"},
        404,
        "unknown_environment",
        "",
    ),
    "verifier-path": (
        "/v1/run",
        {"env": {**TOY, "verifier_path": "/etc/passwd"}, "answer": "x"},
        400,
        "bad_request",
        "env.verifier_path",
    ),
    "invalid-env": (
        "/v1/run",
        {"env": {"name": "x", "entry_point": "f"}, "answer": "x"},
        400,
        "bad_request",
        "test_cases",
    ),
    "bad-time-limit": (
        "/v1/run",
        {"env": "two_sum", "answer": "x", "time_limit": -1},
        400,
        "bad_request",
        "time_limit",
    ),
    "batch-env-count": (
        "/v1/run_batch",
        {"env": ["two_sum", "fizzbuzz"], "answers": ["a", "b", "c"]},
        400,
        "bad_request",
        "2 environments for 3 answers",
    ),
    "batch-one-unknown-env": (
        "/v1/run_batch",
        {"env": ["two_sum", "nope_env"], "answers": ["pass", "pass"]},
        404,
        "unknown_environment",
        "env[1]",
    ),
    "batch-group-size": (
        "/v1/run_batch",
        {"env": "two_sum", "answers": ["pass"], "group_size": 0},
        400,
        "bad_request",
        "group_size",
    ),
    "batch-parallel": (
        "/v1/run_batch",
        {"env": "two_sum", "answers": ["pass"], "max_parallel": 0},
        400,
        "bad_request",
        "max_parallel",
    ),
    "eval-both": (
        "/v1/eval",
        {"suite": "builtin", "envs": ["two_sum"]},
        400,
        "bad_request",
        "not both",
    ),
    "eval-unknown-suite": ("/v1/eval", {"suite": "nosuch"}, 404, "unknown_environment", "nosuch"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_a_clear_4xx_and_runs_nothing(case: str) -> None:
    path, body, status, code, words = BAD[case]
    app, fake = _app()
    kw: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
    r = call(app, "POST", path, **kw)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and words in err["message"]
    assert "\n" not in err["message"]
    assert not fake.calls and not fake.jobs


def test_unknown_environment_suggests_the_closest() -> None:
    app, _ = _app()
    r = call(app, "POST", "/v1/run", json={"env": "two_summ", "answer": "x"})
    assert "did you mean 'two_sum'" in r.json()["error"]["message"]


def test_a_name_that_is_a_directory_here_is_not_loaded(tmp_path: Path) -> None:
    app, _ = _app()
    folder = tmp_path / "sneaky"
    folder.mkdir()
    (folder / "test_cases.json").write_text("[]")
    r = call(app, "POST", "/v1/run", json={"env": str(folder), "answer": "x"})
    assert r.status_code == 404


def test_too_many_answers() -> None:
    app, fake = _app(limits=Limits(max_answers=3))
    r = call(app, "POST", "/v1/run_batch", json={"env": "two_sum", "answers": ["pass"] * 4})
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_answers"
    r = call(app, "POST", "/v1/eval", json={"suite": "builtin"})
    assert r.status_code == 413
    assert not fake.calls
    r = call(app, "POST", "/v1/run_batch", json={"env": "two_sum", "answers": ["pass"] * 3})
    assert r.status_code == 200 and fake.calls["pass"] == 3


def test_body_size_limit_by_length_and_by_stream() -> None:
    app, fake = _app(limits=Limits(max_body_bytes=1000))
    big = {"env": "two_sum", "answer": "x" * 2000}
    r = call(app, "POST", "/v1/run", json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"

    async def chunks() -> Any:  # no content-length: counted as it arrives
        for _ in range(5):
            yield b" " * 300

    r = call(app, "POST", "/v1/run", content=chunks())
    assert r.status_code == 413
    assert not fake.calls
    ok = call(app, "POST", "/v1/run", json={"env": "two_sum", "answer": "pass"})
    assert ok.status_code == 200


def test_verifier_code_is_refused_unless_allowed() -> None:
    env = {**TOY, "verifier_code": "def verify(solution, test_cases):\n    return 1.0\n"}
    env.pop("entry_point")
    body = {"env": env, "answer": "pass"}
    app, fake = _app()
    r = call(app, "POST", "/v1/run", json=body)
    assert r.status_code == 403 and r.json()["error"]["code"] == "verifier_code_refused"
    assert "--allow-verifier-code" in r.json()["error"]["message"]
    assert not fake.calls
    r = call(app, "POST", "/v1/run_batch", json={"env": [env], "answers": ["pass"]})
    assert r.status_code == 403 and not fake.calls
    allowing, fake = _app(allow_verifier_code=True)
    r = call(allowing, "POST", "/v1/run", json=body)
    assert r.status_code == 200 and fake.calls["pass"] == 1


def test_declarative_environments_by_value_need_no_permission() -> None:
    app, fake = _app()
    r = call(app, "POST", "/v1/run", json={"env": TOY, "answer": "pass"})
    assert r.status_code == 200 and r.json()["result"]["env_name"] == "toy"
    assert fake.jobs[0].env.name == "toy" and fake.jobs[0].env.verifier_code is None


# --- metrics ------------------------------------------------------------------------------------

_SAMPLE = re.compile(r'^([a-z_]+)(\{([a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*)\})? (\S+)$')


def parse_metrics(text: str) -> dict[str, float]:
    """The exposition text, strictly: every line a comment or ``name{labels} value``."""
    assert text.endswith("\n")
    out: dict[str, float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not exposition format: {line!r}"
        name = m.group(1)
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert family in types or name in types, f"{name} has no TYPE line"
        out[name + (m.group(2) or "")] = float(m.group(5))
    return out


def test_metrics_count_runs_no_verdicts_and_service_time() -> None:
    app, _ = _app()

    async def go() -> str:
        async with asgi(app) as c:
            answers = ["pass", "fail", "down", "pass"]
            await c.post("/v1/run_batch", json={"env": "two_sum", "answers": answers})
            await c.post("/v1/run", json={"env": "two_sum", "answer": "down"})
            await c.post("/v1/run", json={"env": "nope", "answer": "x"})
            return (await c.get("/metrics")).text

    m = parse_metrics(asyncio.run(go()))
    assert m['deepgym_runs_total{outcome="passed"}'] == 2
    assert m['deepgym_runs_total{outcome="failed"}'] == 1
    assert m['deepgym_runs_total{outcome="no_verdict"}'] == 2
    assert m['deepgym_no_verdict_total{error_type="sandbox_error"}'] == 2
    assert m["deepgym_service_seconds_count"] == 5
    assert m['deepgym_service_seconds_bucket{le="+Inf"}'] == 5
    buckets = [v for k, v in m.items() if k.startswith("deepgym_service_seconds_bucket")]
    assert buckets == sorted(buckets)  # cumulative
    assert m["deepgym_queue_depth"] == 0 and m["deepgym_runs_in_flight"] == 0
    assert m['deepgym_http_requests_total{route="/v1/run",code="200"}'] == 1
    assert m['deepgym_http_requests_total{route="/v1/run",code="404"}'] == 1


def test_queue_depth_counts_runs_waiting_for_a_slot() -> None:
    app, _ = fake_app(token=TOKEN, concurrency=1)
    service = app.state.service

    async def go() -> tuple[int, int]:
        async with asgi(app) as c:
            body = {"env": "two_sum", "answers": ["sleep:0.3"] * 3, "max_parallel": 3}
            task = asyncio.ensure_future(c.post("/v1/run_batch", json=body))
            await asyncio.sleep(0.15)
            seen = (service.metrics.queue_depth, service.metrics.in_flight)
            r = await task
            assert len([e for e in _events(r.content) if e.event == "group"]) == 1
            return seen

    assert asyncio.run(go()) == (2, 1)


def test_the_service_time_histogram_leaves_out_the_wait_for_a_slot() -> None:
    """Three 0.3 s runs behind a cap of one: the last waits 0.6 s for its slot, and the
    histogram's service time (``ServiceTime.run_ms``) is still about 0.3 s each."""
    app, _ = fake_app(token=TOKEN, concurrency=1)

    async def go() -> tuple[str, list[RunResult]]:
        async with asgi(app) as c:
            body = {"env": "two_sum", "answers": ["sleep:0.3"] * 3, "max_parallel": 3}
            r = await c.post("/v1/run_batch", json=body)
            got = [x for e in _events(r.content) if e.event == "group" for x in e.results or []]
            return (await c.get("/metrics")).text, got

    text, results = asyncio.run(go())
    m = parse_metrics(text)
    assert max(r.service.queue_ms for r in results) >= 500  # someone waited for the slot
    assert m["deepgym_service_seconds_sum"] < 3 * 0.3 + 0.3  # not the waits' 0.9 s more
    assert m["deepgym_service_seconds_count"] == 3


def test_a_client_that_sends_json_lines_gets_json_errors() -> None:
    app, _ = _app()
    r = call(app, "POST", "/v1/run_batch", content=json.dumps({"answers": []}))
    assert r.status_code == 400 and "env" in r.json()["error"]["message"]


# --- the OpenRLHF route, mounted ----------------------------------------------------------------


def test_openrlhf_route_is_mounted_behind_the_token() -> None:
    app, fake = _app(openrlhf=True)
    query = ["Write f.\n```python\ndef f():\n    return 1\n```"]
    body = {"query": query, "prompts": ["Write f.\n"], "labels": ["two_sum"]}
    denied = call(app, "POST", "/openrlhf/get_reward", token=None, json=body)
    assert denied.status_code == 401 and not fake.calls
    ok = call(app, "POST", "/openrlhf/get_reward", json=body)
    assert ok.status_code == 200, ok.text
    assert ok.json()["rewards"] == [1.0]
    by_query = call(app, "POST", f"/openrlhf/get_reward?token={TOKEN}", token=None, json=body)
    assert by_query.status_code == 200
    wrong = call(app, "POST", "/openrlhf/get_reward?token=nope", token=None, json=body)
    assert wrong.status_code == 401
    assert call(app, "GET", f"/v1/environments?token={TOKEN}", token=None).status_code == 401


# --- the store is a record, never a reason to fail a run ---------------------------------------


def test_a_failing_store_does_not_fail_the_batch(store: RunStore) -> None:
    import sqlite3

    app, _ = _app(store=store)
    store._db.close()  # every write now raises sqlite3.ProgrammingError
    with pytest.raises(sqlite3.Error):
        store.runs()
    r = call(app, "POST", "/v1/run_batch", json={"env": "two_sum", "answers": ["pass", "fail"]})
    assert r.status_code == 200
    results = [x for e in _events(r.content) if e.event == "group" for x in e.results or []]
    assert [x.score for x in results] == [1.0, 0.0]


# --- errors: one table both ways ----------------------------------------------------------------


def _raised(entry: WireError) -> DeepGymError:
    """An exception of the entry's own class, as the service would raise it."""
    if entry.by_status:
        return TransportError("refused", status_code=entry.status)
    return entry.cls("refused")


@pytest.mark.parametrize("entry", ERRORS, ids=lambda e: f"{e.status}-{e.code}")
def test_every_error_comes_back_to_the_client_as_its_own_class(entry: WireError) -> None:
    reply = error_response(_raised(entry))
    assert (reply.status_code, json.loads(reply.body)["error"]["code"]) == (
        entry.status,
        entry.code,
    )
    back = error_for(reply.status_code, bytes(reply.body))
    assert type(back) is entry.cls
    assert "refused" in str(back)
    if entry.by_status:
        assert isinstance(back, TransportError) and back.status_code == entry.status


def test_the_error_table_has_one_entry_per_reply() -> None:
    assert len({(e.status, e.code) for e in ERRORS}) == len(ERRORS)
    assert len({e.code for e in ERRORS}) == len(ERRORS)


def test_an_error_off_the_table_is_an_internal_500_and_ours_on_the_client() -> None:
    reply = error_response(NoVerdictError("no number"))
    assert reply.status_code == 500
    assert json.loads(reply.body)["error"] == {
        "code": "internal",
        "message": "NoVerdictError: no number",
    }
    back = error_for(500, bytes(reply.body))
    assert type(back) is TransportError and back.status_code == 500
    assert is_infrastructure_failure(back)
    # A transport failure with a status of no entry is internal too, not shutting_down.
    assert error_status(TransportError("odd", status_code=502)) == (500, "internal")
