"""``deepgym serve``'s options, refused before anything starts where they would be ignored."""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner

from deepgym import cli
from deepgym.server import launch
from deepgym.server.inputs import Limits


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--workers", "4"], "--workers"),
        (["--max-workers", "12"], "--max-workers"),
        (["--concurrency", "8"], "--concurrency"),
        (["--workers", "4", "--concurrency", "8"], "--workers, --concurrency"),
    ],
)
def test_serve_ray_refuses_the_pool_options_it_would_ignore(
    monkeypatch: pytest.MonkeyPatch, options: list[str], named: str
) -> None:
    started: list[object] = []
    monkeypatch.setattr(launch, "service_app", lambda **kw: started.append(kw))
    r = CliRunner().invoke(
        cli.cli, ["serve", "--port", "0", "--no-store", "--ray", "auto", *options]
    )
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert lines[0].startswith(f"Error: --ray would ignore {named} ("), lines[0]
    assert started == []  # nothing was built, no cluster was joined


def test_serve_ray_passes_what_it_honours(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, object]] = []

    def service_app(**kw: object) -> None:
        started.append(kw)
        raise SystemExit(0)  # stop before listening

    monkeypatch.setattr(launch, "service_app", service_app)
    r = CliRunner().invoke(
        cli.cli,
        ["serve", "--port", "0", "--no-store", "--ray", "auto", "--max-time-limit", "30"],
    )
    assert r.exit_code == 0, r.output
    (kw,) = started
    assert kw["ray_address"] == "auto" and kw["workers"] is None and kw["concurrency"] is None
    assert kw["max_workers"] is None
    assert kw["limits"].max_time_limit == 30.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"concurrency": 4}, "concurrency"),
        ({"time_limits": "policy"}, "time_limits"),
        ({"backend": "pool", "time_limits": "policy"}, "backend, time_limits"),
    ],
)
def test_an_app_on_an_engine_refuses_what_the_engine_would_ignore(
    given: dict[str, object], named: str
) -> None:
    # the Python form of serve --ray: the engine's own settings are its (sandbox, time limits)
    pytest.importorskip("fastapi")
    from deepgym.engines.ray import RayEngine
    from deepgym.exceptions import ConfigError
    from deepgym.server.app import create_app

    with pytest.raises(ConfigError, match=f"^engine= runs the answers: {named} would be ignored"):
        create_app(engine=RayEngine("127.0.0.1:1"), **given)  # type: ignore[arg-type]


def test_serve_passes_the_pools_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, object]] = []

    def service_app(**kw: object) -> None:
        started.append(kw)
        raise SystemExit(0)  # stop before listening

    monkeypatch.setattr(launch, "service_app", service_app)
    argv = ["serve", "--port", "0", "--no-store", "--workers", "2", "--max-workers", "9"]
    r = CliRunner().invoke(cli.cli, argv)
    assert r.exit_code == 0, r.output
    (kw,) = started
    assert (kw["workers"], kw["max_workers"], kw["concurrency"]) == (2, 9, None)


def test_a_pool_services_runs_at_once_follow_the_pools_cap() -> None:
    app = launch.service_app(
        sandbox="pool",
        workers=2,
        max_workers=7,
        concurrency=None,
        store=None,
        token="t",
        console_token="c",
        allow_verifier_code=False,
        limits=Limits(),
        openrlhf=False,
    )
    metered = app.state.service.client._engine.backend
    try:
        assert metered._sem is not None and metered._sem._value == 7
        assert metered.inner.size == 2 and metered.inner.max_workers == 7
    finally:
        asyncio.run(metered.close())  # its workspace (no worker was started)


def test_serve_builds_its_runtime_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    from deepgym.runtimes import RuntimeStore

    events: list[object] = []

    def build(self: RuntimeStore, name: str, say: object = None) -> None:
        events.append(("build", name))
        self.say(f"building runtime {name}")

    def service_app(**kw: object) -> None:
        events.append(("serve", kw["runtime"]))
        raise SystemExit(0)  # stop before listening

    monkeypatch.setattr(RuntimeStore, "build", build)
    monkeypatch.setattr(launch, "service_app", service_app)
    argv = ["serve", "--port", "0", "--no-store", "--runtime", "scientific"]
    r = CliRunner().invoke(cli.cli, argv)
    assert r.exit_code == 0, r.output
    assert events == [("build", "scientific"), ("serve", "scientific")]
    assert "building runtime scientific" in r.stderr  # the progress line
    r = CliRunner().invoke(cli.cli, ["serve", "--port", "0", "--no-store", "--runtime", "numpy"])
    assert r.exit_code == 2 and "'numpy' is not one of 'stdlib', 'scientific'" in r.stderr
