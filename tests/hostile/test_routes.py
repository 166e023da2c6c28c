"""Hostile values in every field of the service's main routes: a 4xx with a one-line message,
never a 5xx, never a hang, never a run without a verdict caused by the client's own input.

Each (route, field) pair gets ``EXAMPLES`` hostile values (``tests.hostile.common``) in place of
that one field of a valid body (or in place of the whole body), sent in process over ASGI to the
app over the fake backend, each under ``DEADLINE_S``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given

from deepgym.models import Environment
from deepgym.server.app import create_app
from tests.hostile.common import (
    DEADLINE_S,
    HOSTILE,
    SETTINGS,
    TRIED,
    HostlikeBackend,
    scripted,
    to_json,
    with_specials,
)
from tests.server.conftest import NO_DERIVED, TOKEN, TOY, asgi

RUN = {"env": "two_sum", "answer": "pass", "time_limit": 5}
BATCH = {
    "env": "two_sum",
    "answers": ["pass", "pass"],
    "group_size": 1,
    "max_parallel": 2,
    "time_limit": 5,
}
EVAL = {"envs": ["two_sum"], "outputs": {"two_sum": "pass"}, "max_parallel": 2, "time_limit": 5}
TIME_LIMIT = {"env": "two_sum", "time_limit": 5}
SESSION = "/v1/sessions/no-such-session"

Path = tuple[Any, ...]
KEY = object()
"""In a field path: the hostile value replaces the mapping's key, not its value."""

CASES: list[tuple[str, dict[str, Any], Path]] = [
    ("/v1/run", RUN, ()),
    ("/v1/run", RUN, ("env",)),
    ("/v1/run", RUN, ("answer",)),
    ("/v1/run", RUN, ("time_limit",)),
    ("/v1/run", RUN, ("unknown_field",)),
    ("/v1/run_batch", BATCH, ()),
    ("/v1/run_batch", BATCH, ("env",)),
    ("/v1/run_batch", BATCH, ("env", 0)),
    ("/v1/run_batch", BATCH, ("answers",)),
    ("/v1/run_batch", BATCH, ("answers", 1)),
    ("/v1/run_batch", BATCH, ("group_size",)),
    ("/v1/run_batch", BATCH, ("max_parallel",)),
    ("/v1/run_batch", BATCH, ("time_limit",)),
    ("/v1/eval", EVAL, ()),
    ("/v1/eval", EVAL, ("envs",)),
    ("/v1/eval", EVAL, ("envs", 0)),
    ("/v1/eval", EVAL, ("suite",)),
    ("/v1/eval", EVAL, ("outputs",)),
    ("/v1/eval", EVAL, ("outputs", "two_sum")),
    ("/v1/eval", EVAL, ("outputs", KEY)),
    ("/v1/eval", EVAL, ("max_parallel",)),
    ("/v1/eval", EVAL, ("time_limit",)),
    ("/v1/time_limit", TIME_LIMIT, ("env",)),
    ("/v1/time_limit", TIME_LIMIT, ("time_limit",)),
    ("/v1/sessions", {"env": "agent/fix_add"}, ("env",)),
    (f"{SESSION}/exec", {"command": "true", "timeout": 5}, ()),
    (f"{SESSION}/exec", {"command": "true", "timeout": 5}, ("command",)),
    (f"{SESSION}/exec", {"command": "true", "timeout": 5}, ("timeout",)),
    (f"{SESSION}/files/write", {"path": "a", "content_b64": "aGk="}, ("path",)),
    (f"{SESSION}/files/write", {"path": "a", "content_b64": "aGk="}, ("content_b64",)),
    (f"{SESSION}/files/read", {"path": "a"}, ("path",)),
    (f"{SESSION}/files/list", {"path": "."}, ("path",)),
    ("/v1/sessions/{sandbox_id}/exec", {"command": "true"}, ("sandbox_id",)),
]
CASES += [
    ("/v1/run", {"env": dict(TOY), "answer": "pass"}, ("env", field))
    for field in Environment.model_fields
]


def _with(body: Any, path: Path, value: Any) -> Any:
    """A copy of ``body`` with ``value`` at ``path`` (the whole body for ``()``)."""
    if not path:
        return value
    out = json.loads(json.dumps(body))
    if path[0] == "env" and len(path) == 2 and isinstance(path[1], int):  # a list of envs
        out["env"] = [out["env"]] * len(out["answers"])
    node = out
    for key in path[:-1]:
        node = node[key]
    last = path[-1]
    if last is KEY:
        node.pop("two_sum")
        if isinstance(value, str):
            node[value] = "pass"
        else:
            return {**out, "outputs": f"__raw__{to_json(value)}"}
        return out
    node[last] = value
    return out


def _encode(body: Any) -> str:
    """JSON text; an ``outputs`` whose key is not a string is written raw (invalid JSON)."""
    if isinstance(body, dict) and str(body.get("outputs", "")).startswith("__raw__"):
        raw = body["outputs"][len("__raw__") :]
        rest = {k: v for k, v in body.items() if k != "outputs"}
        return to_json(rest)[:-1] + f', "outputs": {{{raw}: "pass"}}}}'
    return to_json(body)


@pytest.fixture(scope="module")
def app() -> Iterator[Any]:
    yield create_app(HostlikeBackend(), time_limits=NO_DERIVED, token=TOKEN)


def _send(app: Any, path: str, content: str) -> tuple[int, str]:
    async def go() -> tuple[int, str]:
        async with asgi(app) as c:
            r = await c.post(path, content=content.encode("utf-8", "surrogatepass"))
            return r.status_code, r.text

    return asyncio.run(asyncio.wait_for(go(), DEADLINE_S))


def _check(status: int, text: str, body: Any, route: str) -> None:
    assert status < 500, f"{status}: {text[:300]}"
    if status >= 400:
        error = json.loads(text)
        # Ours: {"error": {"code", "message"}}; the router's own 404 and 405: {"detail": "..."}.
        message = error["error"]["message"] if "error" in error else error["detail"]
        assert message and "\n" not in message and len(message) <= 700, message[:300]
        return
    assert status == 200
    answers = _answers(body)
    if any(scripted(a) for a in answers):
        return  # the fake backend reads it as a script ("down": no sandbox), not as an answer
    if route == "/v1/run":
        reply = json.loads(text)
        assert reply.get("raised") is None and reply["result"]["has_verdict"], text[:300]
    elif route in ("/v1/run_batch", "/v1/eval"):
        events = [json.loads(line) for line in text.splitlines() if line.strip()]
        assert events[-1]["event"] == "end", text[-300:]
        results = [r for e in events if e["event"] == "group" for r in e["results"]]
        assert all(r["has_verdict"] for r in results), text[:500]
    elif route == "/v1/time_limit":
        assert json.loads(text)["time_limit"] > 0


def _answers(body: Any) -> list[Any]:
    if not isinstance(body, dict):
        return []
    out = [body.get("answer"), *(body.get("answers") or [])]
    outputs = body.get("outputs")
    if isinstance(outputs, dict):
        out += list(outputs.values())
    return out


@pytest.mark.parametrize(("route", "base", "field"), CASES, ids=lambda v: str(v)[:40])
def test_a_hostile_field_is_refused_or_judged(
    app: Any, route: str, base: dict[str, Any], field: Path
) -> None:
    @SETTINGS
    @with_specials
    @given(value=HOSTILE)
    def one(value: Any) -> None:
        TRIED["http"] += 1
        path = route
        body: Any = _with(base, field, value)
        if field == ("sandbox_id",):
            sid = (value if isinstance(value, str) else to_json(value))[:2000]  # a URL's length
            path = route.replace("{sandbox_id}", quote(sid.encode("utf-8", "surrogatepass")))
            body = base
        status, text = _send(app, path, _encode(body))
        _check(status, text, body, route)

    one()
