"""Regressions for the service's hardening: what a client sends it can never turn into a 5xx, a
hang, a run without a verdict, a path on the host, or a worker held past the service's maximum.

Each test names the finding it holds: (1) infinite and huge numbers, (2) the OpenRLHF route that
loaded a client-named folder, (3) no ceiling on a client's time, (4) staging folders left by a
killed process (``tests/sandbox/test_workspace.py``), (5) ``Task was destroyed but it is
pending!`` after the service died mid-batch. The route table at the end classifies every route.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Mount

from deepgym.client import AsyncDeepGym
from deepgym.exceptions import ConfigError
from deepgym.models import Environment
from deepgym.sandbox.base import Job, RawRun
from deepgym.server.app import create_app
from deepgym.server.inputs import Limits
from deepgym.validation import MAX_PROCESSES
from tests.fakes import FakeBackend
from tests.server.conftest import NO_DERIVED, TOKEN, TOY, call, fake_app

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 10.0
"""Every request here is answered within this (a stream that heartbeats for ever fails)."""


def post(app: Any, path: str, raw: str, **kw: Any) -> Any:
    """POST a raw JSON body (``1e999`` is valid JSON, read as infinity), under a deadline."""

    async def go() -> Any:
        from tests.server.conftest import asgi

        async with asgi(app) as c:
            return await c.post(path, content=raw.encode(), **kw)

    return asyncio.run(asyncio.wait_for(go(), DEADLINE_S))


def refused(r: Any, status: int = 400) -> str:
    """The one-line message of a refusal with ``status``."""
    assert r.status_code == status, r.text[:500]
    message: str = r.json()["error"]["message"]
    assert message and "\n" not in message
    return message


# -- (1) infinity and huge numbers ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/run", "/v1/run_batch", "/v1/eval", "/v1/time_limit"])
@pytest.mark.parametrize("value", ["1e999", "-1e999", "1e308", "0", "true", "1" + "0" * 40])
def test_an_infinite_or_huge_time_limit_is_a_400_on_every_route(path: str, value: str) -> None:
    app, fake = fake_app(token=TOKEN)
    body = {
        "/v1/run": '{"env": "two_sum", "answer": "pass", "time_limit": %s}',
        "/v1/run_batch": '{"env": "two_sum", "answers": ["pass"], "time_limit": %s}',
        "/v1/eval": '{"envs": ["two_sum"], "outputs": {"two_sum": "pass"}, "time_limit": %s}',
        "/v1/time_limit": '{"env": "two_sum", "time_limit": %s}',
    }[path]
    message = refused(post(app, path, body % value))
    assert "time_limit" in message
    assert not fake.calls  # refused before anything ran


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timeout", "1e999"),
        ("timeout", "1e308"),
        ("time_limit", "1e308"),
        ("case_timeout", "1e999"),
        ("max_processes", str(10**30)),
        ("max_processes", str(MAX_PROCESSES + 1)),
        ("memory_mb", str(10**30)),
        ("max_file_mb", "true"),
        ("seed", str(10**30)),
    ],
)
def test_an_inline_environment_with_a_hostile_number_is_a_400(field: str, value: str) -> None:
    app, fake = fake_app(token=TOKEN)
    env = json.dumps(TOY)[:-1] + f', "{field}": {value}}}'
    message = refused(post(app, "/v1/run", f'{{"env": {env}, "answer": "pass"}}'))
    assert field in message
    assert not fake.calls


def test_the_library_refuses_an_infinite_time_limit_before_anything_runs() -> None:
    fake = FakeBackend()

    async def go() -> None:
        async with AsyncDeepGym(time_limits=NO_DERIVED, backend=fake) as dg:
            for call_ in (
                dg.run_one("two_sum", "pass", time_limit=float("inf")),
                dg.run_batch("two_sum", ["pass"], time_limit=1e308),
                dg.eval(["two_sum"], {"two_sum": "pass"}, time_limit=float("nan")),
            ):
                with pytest.raises(ConfigError, match="time_limit"):
                    await call_
            with pytest.raises(ValueError, match="max_processes must be an int from 1 to"):
                Environment(**{**TOY, "max_processes": 10**30})  # pydantic's ValidationError

    asyncio.run(asyncio.wait_for(go(), DEADLINE_S))
    assert not fake.calls


class _Broken(FakeBackend):
    """A backend whose run fails with an error no layer expects (a bug of ours)."""

    async def run(self, job: Job) -> RawRun:
        if job.answer == "boom":
            raise OverflowError("cannot convert float infinity to integer")
        return await super().run(job)


def test_an_unexpected_error_ends_the_stream_instead_of_hanging_it() -> None:
    """The run's error escaped the batch's never-raise wrapper; its group never completed and
    ``stream_groups`` waited on it for ever. Now the stream raises it."""

    async def go() -> list[int]:
        seen = []
        async with AsyncDeepGym(time_limits=NO_DERIVED, backend=_Broken()) as dg:
            with pytest.raises(OverflowError):
                async for g, _ in dg.stream_groups("two_sum", ["pass", "boom"], group_size=1):
                    seen.append(g)
        return seen

    assert asyncio.run(asyncio.wait_for(go(), DEADLINE_S)) in ([0], [])


def test_the_service_streams_an_unexpected_error_as_no_verdict_and_ends() -> None:
    app = create_app(_Broken(), time_limits=NO_DERIVED, token=TOKEN)
    r = post(app, "/v1/run_batch", '{"env": "two_sum", "answers": ["pass", "boom"]}')
    assert r.status_code == 200
    events = [json.loads(line) for line in r.text.splitlines()]
    assert events[-1]["event"] == "end"
    results = [x for e in events if e["event"] == "group" for x in e["results"]]
    assert len(results) == 2 and not results[1]["has_verdict"]  # ours: an infrastructure failure


# -- (2) the OpenRLHF route never loads a folder a client names ----------------------------------


@pytest.fixture
def always_one(tmp_path: Path) -> Path:
    """A folder whose verifier scores every answer 1.0 (a client's own verifier)."""
    d = tmp_path / "always_one"
    d.mkdir()
    (d / "verifier.py").write_text("def verify(solution_path, test_cases=None):\n    return 1.0\n")
    (d / "metadata.json").write_text('{"name": "always_one"}')
    return d


def _reward_body(label: Any) -> dict[str, Any]:
    return {"query": ["```python\nwrong\n```"], "prompts": [""], "labels": [label]}


@pytest.mark.parametrize("form", ["plain", "object", "json"])
def test_an_openrlhf_label_naming_a_folder_is_refused(always_one: Path, form: str) -> None:
    app, fake = fake_app(token=TOKEN, openrlhf=True)
    label: Any = {
        "plain": str(always_one),
        "object": {"env": str(always_one)},
        "json": json.dumps({"env_name": str(always_one)}),
    }[form]
    r = call(app, "POST", "/openrlhf/get_reward", json=_reward_body(label))
    assert r.status_code == 400, r.text
    assert "labels[0]" in r.json()["error"]
    assert not fake.calls  # its verifier never ran


def test_an_openrlhf_label_naming_a_built_in_is_scored() -> None:
    app, fake = fake_app(token=TOKEN, openrlhf=True)
    r = call(app, "POST", "/openrlhf/get_reward", json=_reward_body("two_sum"))
    assert r.status_code == 200 and len(r.json()["rewards"]) == 1
    assert fake.calls


# -- (3) a ceiling on a client's time ------------------------------------------------------------


def test_a_time_limit_over_the_service_maximum_is_refused_naming_it() -> None:
    app, fake = fake_app(token=TOKEN, limits=Limits(max_time_limit=5.0))
    message = refused(post(app, "/v1/run", '{"env": "two_sum", "answer": "p", "time_limit": 6}'))
    assert "maximum of 5 s" in message and "--max-time-limit" in message
    ok = post(app, "/v1/run", '{"env": "two_sum", "answer": "pass", "time_limit": 5}')
    assert ok.status_code == 200
    for field in ("timeout", "time_limit", "lifetime", "step_timeout"):
        short = {"timeout": 4, "step_timeout": 4, "lifetime": 4}
        env = json.dumps({**TOY, **short, field: 7})
        message = refused(post(app, "/v1/run", f'{{"env": {env}, "answer": "pass"}}'))
        assert f"env.{field} of 7 s" in message
    batch = '{"env": "two_sum", "answers": ["pass"], "time_limit": 600}'
    assert "maximum of 5 s" in refused(post(app, "/v1/run_batch", batch))
    exec_ = '{"command": "true", "timeout": 60}'
    assert "timeout" in refused(post(app, "/v1/sessions/nope/exec", exec_))
    assert fake.calls == {"pass": 1}


def test_the_default_maximum_admits_every_built_in() -> None:
    from deepgym.envs.registry import list_session_environments, load_environment, load_suite

    envs = load_suite("builtin") + [load_environment(n) for n in list_session_environments()]
    top = Limits().max_time_limit
    assert all(e.timeout <= top and e.lifetime <= top for e in envs)


def test_the_library_holds_a_time_limit_to_the_environments_cap() -> None:
    """The library clamps (a batch may span environments of different caps); the result says
    the limit its run had."""
    fake = FakeBackend()
    capped = Environment(**{**TOY, "timeout": 3.0})

    async def go() -> tuple[float, float]:
        async with AsyncDeepGym(time_limits=NO_DERIVED, backend=fake) as dg:
            result = await dg.run_one(capped, "pass", time_limit=1000.0)
            assert result.has_verdict
            return await dg.time_limit(capped, 1000.0), result.time_limit_s or 0.0

    limit, applied = asyncio.run(go())
    assert limit == applied == 3.0
    assert [j.timeout for j in fake.jobs] == [3.0]


def test_serve_has_a_max_time_limit_option() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "deepgym", "serve", "--no-store", "--max-time-limit", "nan"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0 and "--max-time-limit" in out.stderr
    help_ = subprocess.run(
        [sys.executable, "-m", "deepgym", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--max-time-limit" in help_.stdout and "600" in help_.stdout


# -- (5) no noise when the service dies mid-batch ------------------------------------------------

_SERVICE = """
import sys
sys.path.insert(0, {repo!r})
from deepgym.server.runner import bind, make_server
from tests.server.conftest import TOKEN, fake_app
app, _ = fake_app(token=TOKEN)
sock = bind("127.0.0.1", 0)
print(sock.getsockname()[1], flush=True)
make_server(app).run(sockets=[sock])
"""

_CLIENT = """
import os, signal, subprocess, sys
sys.path.insert(0, {repo!r})
from deepgym.client import DeepGym
service = subprocess.Popen([sys.executable, "-c", {service!r}], stdout=subprocess.PIPE, text=True)
port = int(service.stdout.readline())
import httpx, time
for _ in range(300):  # until it listens
    try:
        if httpx.get(f"http://127.0.0.1:{{port}}/health").status_code == 200:
            break
    except httpx.HTTPError:
        time.sleep(0.1)
dg = DeepGym("remote", url=f"http://127.0.0.1:{{port}}", token="{token}")
answers = ["pass", "sleep:30", "sleep:30"]
for g, rs in dg.stream_groups("two_sum", answers, group_size=1):
    print(g, rs[0].has_verdict, flush=True)
    if g == 0:  # SIGKILL: the service dies mid-batch, as a crash or the OOM killer ends it
        os.kill(service.pid, signal.SIGKILL)
    if g == 1:
        break  # the caller stops early, with the rest of the stream still open
service.wait()
"""


def test_a_service_killed_mid_batch_leaves_the_client_quiet() -> None:
    service = _SERVICE.format(repo=str(REPO))
    script = _CLIENT.format(repo=str(REPO), service=service, token=TOKEN)
    out = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "True", "1", "False"]
    assert "Task was destroyed" not in out.stderr
    assert "was never awaited" not in out.stderr


def test_a_portal_whose_loop_died_is_drained_before_it_closes() -> None:
    """The loop's thread died with an async generator suspended and a task pending in it:
    closing the loop as it was left them to the garbage collector, which printed ``Task was
    destroyed but it is pending!``."""
    script = textwrap.dedent(
        """
        import asyncio, gc, time
        from deepgym.blocking import Portal

        async def agen():
            t = asyncio.ensure_future(asyncio.sleep(100))
            try:
                yield 1
                await t
            finally:
                t.cancel()

        def die():
            raise SystemExit

        portal = Portal()
        items = portal.iterate(agen())
        print(next(items))
        portal.loop.call_soon_threadsafe(die)
        portal.thread.join(5)
        portal.stop()
        del items
        gc.collect()
        print(portal.loop.is_closed())
        """
    )
    out = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True"]
    assert "Task was destroyed" not in out.stderr, out.stderr


# -- every route, classified ---------------------------------------------------------------------

NO_ENV = "takes no environment from the client"
CLIENT_ENV = "takes a client's environment: names only (no host path), verifier code by flag"
OPENRLHF_LABELS = "takes a client's labels: names only (no host path), behind --openrlhf"
FUSION_CODE = (
    "takes code, a language and its own stdin or tests (SandboxFusion's shape): a one-off "
    "script environment built here, no host path, no verifier code (tests/server/test_fusion.py)"
)

DATASETS = (
    "takes a registered suite's name (``list_suites``) and a problem's id: never a path "
    "(test_dataset_routes_load_no_host_path)"
)

ROUTES: dict[tuple[str, str], str] = {
    ("GET", "/health"): NO_ENV,
    ("GET", "/metrics"): NO_ENV,
    ("GET", "/openapi.json"): NO_ENV,
    ("GET", "/v1/environments"): NO_ENV,
    ("POST", "/v1/run"): CLIENT_ENV,
    ("POST", "/v1/run_batch"): CLIENT_ENV,
    ("POST", "/v1/eval"): CLIENT_ENV,
    ("POST", "/v1/time_limit"): CLIENT_ENV,
    ("POST", "/v1/sessions"): CLIENT_ENV,
    ("POST", "/v1/sessions/{sandbox_id}/exec"): NO_ENV,
    ("POST", "/v1/sessions/{sandbox_id}/files/write"): NO_ENV,
    ("POST", "/v1/sessions/{sandbox_id}/files/read"): NO_ENV,
    ("POST", "/v1/sessions/{sandbox_id}/files/list"): NO_ENV,
    ("POST", "/v1/sessions/{sandbox_id}/score"): NO_ENV,
    ("POST", "/v1/sessions/{sandbox_id}/step_reward"): NO_ENV,
    ("DELETE", "/v1/sessions/{sandbox_id}"): NO_ENV,
    ("GET", "/console"): NO_ENV,
    ("GET", "/console/environments"): NO_ENV,
    ("GET", "/console/episodes"): NO_ENV,
    ("GET", "/console/episodes/{episode_id}"): NO_ENV,
    ("GET", "/console/runs/{run_id}"): NO_ENV,
    ("GET", "/console/qa"): NO_ENV,
    ("GET", "/console/qa/{report_id}"): NO_ENV,
    ("GET", "/openrlhf/health"): NO_ENV,
    ("GET", "/openrlhf/docs"): NO_ENV,
    ("GET", "/openrlhf/docs/oauth2-redirect"): NO_ENV,
    ("GET", "/openrlhf/openapi.json"): NO_ENV,
    ("GET", "/openrlhf/redoc"): NO_ENV,
    ("POST", "/openrlhf/get_reward"): OPENRLHF_LABELS,
    ("POST", "/run_code"): FUSION_CODE,
    ("POST", "/submit"): FUSION_CODE,
    ("GET", "/v1/ping"): NO_ENV,
    ("GET", "/list_datasets"): NO_ENV,
    ("POST", "/list_ids"): DATASETS,
    ("POST", "/get_prompts"): DATASETS,
    ("POST", "/get_prompt_by_id"): DATASETS,
    ("POST", "/seed_session"): CLIENT_ENV,
    ("POST", "/verify"): CLIENT_ENV,
    ("POST", "/aggregate_metrics"): NO_ENV,
}
"""Every route of the app, classified. A route added without a line here fails the test."""


def _served(routes: Any, prefix: str = "") -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for route in routes:
        if isinstance(route, Mount):
            out |= _served(route.routes, prefix + route.path)
            continue
        for method in getattr(route, "methods", None) or ():
            if method != "HEAD":
                out.add((method, prefix + route.path))
    return out


def _every_route_app(**kw: Any) -> tuple[Any, FakeBackend]:
    from tests.server.conftest import CONSOLE_TOKEN

    return fake_app(token=TOKEN, console_token=CONSOLE_TOKEN, openrlhf=True, **kw)


def test_every_route_is_classified() -> None:
    app, _ = _every_route_app()
    served = _served(app.routes)
    assert served == set(ROUTES), (
        f"unclassified: {sorted(served - set(ROUTES))}; gone: {sorted(set(ROUTES) - served)}"
    )


def test_dataset_routes_load_no_host_path(always_one: Path) -> None:
    """A dataset named by a host folder of environments (``load_suite`` would load one) or a
    path out of the suites is a 400: only registered suites are served."""
    app, _ = _every_route_app()
    routes = {p for (m, p), c in ROUTES.items() if c == DATASETS}
    for dataset in (str(always_one), "../" * 8 + "etc", "humaneval/../../etc"):
        for path in routes:
            body = {"dataset": dataset, "id": 0, "config": {}}
            r = call(app, "POST", path, json=body)
            assert r.status_code == 400, (path, dataset, r.text)
            assert "is not served here" in r.text, (path, dataset, r.text)
        body = {"dataset": dataset, "id": 0, "completion": "", "config": {}}
        r = call(app, "POST", "/submit", json=body)
        assert r.status_code == 400, (dataset, r.text)


def _bodies(env: Any) -> dict[str, dict[str, Any]]:
    """A body for each route that takes a client's environment, with ``env`` as it."""
    return {
        "/v1/run": {"env": env, "answer": "pass"},
        "/v1/run_batch": {"env": env, "answers": ["pass"]},
        "/v1/eval": {"envs": [env], "outputs": {}},
        "/v1/time_limit": {"env": env},
        "/v1/sessions": {"env": env},
        "/seed_session": {"responses_create_params": {}, "verifier_metadata": {"env": env}},
        "/verify": {
            "responses_create_params": {},
            "verifier_metadata": {"env": env},
            "response": {"output": []},
        },
    }


def test_client_env_routes_refuse_host_paths_and_verifier_code(always_one: Path) -> None:
    app, fake = _every_route_app()
    client_env = {p for (m, p), c in ROUTES.items() if c == CLIENT_ENV}
    assert client_env == set(_bodies("x"))
    code = {"name": "mine", "verifier_code": "def verify(*a):\n    return 1.0\n"}
    session_code = {**code, "kind": "session"}
    for hostile, status in [
        (str(always_one), 404),
        ("../" * 8 + "etc", 404),
        ({"name": "x", "verifier_path": str(always_one / "verifier.py")}, 400),
        ({"name": "x", "kind": "patch", "repo_path": str(always_one), "verifier_code": "x"}, 400),
        (
            {
                "name": "x",
                "kind": "script",
                "test_cases": [{"stdin": "", "expected_stdout": ""}],
                "checker_path": str(always_one / "verifier.py"),
            },
            400,
        ),
        (code, 403),
    ]:
        for path, body in _bodies(hostile).items():
            r = call(app, "POST", path, json=body)
            assert r.status_code == status, (path, hostile, r.text)
    for path, body in _bodies(session_code).items():
        assert call(app, "POST", path, json=body).status_code == 403, path
    labels = [str(always_one), {"env": "/etc"}, "~/x"]
    for label in labels:
        r = call(app, "POST", "/openrlhf/get_reward", json=_reward_body(label))
        assert r.status_code == 400, (label, r.text)
    assert not fake.calls


def test_verifier_code_runs_only_behind_the_flag() -> None:
    app, fake = fake_app(token=TOKEN, allow_verifier_code=True)
    env = {"name": "mine", "verifier_code": "def verify(*a):\n    return 1.0\n"}
    r = call(app, "POST", "/v1/run", json={"env": env, "answer": "pass"})
    assert r.status_code == 200 and fake.calls == {"pass": 1}
    r = call(app, "POST", "/v1/run", json={"env": {**env, "verifier_path": "/x"}, "answer": "p"})
    assert r.status_code == 400  # a path, even behind the flag
