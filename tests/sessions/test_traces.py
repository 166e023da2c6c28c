"""Episode traces: recorded in the run store as they happen, exported as one JSON trajectory,
listed and shown by ``deepgym episodes``, and replayed step by step in the console."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from deepgym import DeepGym, cli
from deepgym.models import Environment
from deepgym.session import Action, Observation
from deepgym.store import RunStore
from tests.sessions.conftest import FIX

pytestmark = pytest.mark.sandbox

PLAN = [
    {"tool": "bash", "command": "cat calc.py"},
    {"tool": "bash", "command": "sleep 5", "timeout": None},
    {"tool": "bash", "command": FIX},
    {"tool": "write_file", "path": "NOTES.md", "content": "fixed add\n"},
    {"tool": "done"},
]


def _agent(obs: Observation) -> Action:
    step = dict(PLAN[obs.step])
    step.pop("timeout", None)
    return Action.of(step)


@pytest.fixture
def recorded(tmp_path: Path, dg: DeepGym, make_env: Any) -> tuple[Path, str]:
    path = tmp_path / "runs.sqlite"
    env: Environment = make_env(step_timeout=0.5)
    with RunStore(path) as store:
        episode = dg.run_episode(env, _agent, store=store)
    assert episode.result.passed and episode.episode_id is not None
    return path, episode.episode_id


def test_the_trace_is_in_the_store(recorded: tuple[Path, str]) -> None:
    path, episode_id = recorded
    with RunStore(path) as store:
        (row,) = store.episodes()
        data = store.episode(episode_id)
    assert row["id"] == episode_id and row["steps"] == 5 and row["score"] == 1.0
    steps = data["steps"]
    assert [s["action"]["tool"] for s in steps] == ["bash", "bash", "bash", "write_file", "done"]
    assert "a - b" in steps[0]["output"]["stdout"] and steps[0]["exit_code"] == 0
    assert steps[1]["timed_out"] and steps[1]["exit_code"] == 137
    assert steps[1]["output"]["stdout_bytes"] == 0
    assert "-    return a - b\n+    return a + b\n" in data["diff"]
    assert "+++ b/NOTES.md" in data["diff"]
    assert data["result"]["score"] == 1.0 and data["sandbox_id"].startswith("local-")


def test_deepgym_episodes_lists_shows_and_exports(recorded: tuple[Path, str]) -> None:
    path, episode_id = recorded
    runner = CliRunner(env={"COLUMNS": "80"})
    listed = runner.invoke(cli.cli, ["episodes", "--store", str(path)])
    assert listed.exit_code == 0, listed.output
    assert any(episode_id in line for line in listed.stdout.splitlines())
    shown = runner.invoke(cli.cli, ["episodes", episode_id, "--store", str(path)])
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert "--- step 2: bash sleep 5" in text and "(timed out)" in text
    assert "--- verdict: 1.000 passed" in text and "+    return a + b" in text
    exported = runner.invoke(cli.cli, ["episodes", episode_id, "--store", str(path), "--json"])
    data = json.loads(exported.stdout)
    assert len(data["steps"]) == 5 and data["result"]["passed"]
    missing = runner.invoke(cli.cli, ["episodes", "ep-nope", "--store", str(path)])
    assert missing.exit_code == 2 and "no episode 'ep-nope'" in missing.stderr


def test_the_console_replays_an_episode_step_by_step(recorded: tuple[Path, str]) -> None:
    from tests.server.conftest import fake_app
    from tests.server.test_console import CONSOLE_TOKEN, COOKIE, get

    path, episode_id = recorded
    with RunStore(path) as store:
        app = fake_app(store=store, console_token=CONSOLE_TOKEN, api=False)[0]
        listing, page, none = get(
            app,
            "/console/episodes",
            f"/console/episodes/{episode_id}",
            "/console/episodes/ep-nope",
            cookies={COOKIE: CONSOLE_TOKEN},
        )
    assert episode_id in listing.text
    assert page.status_code == 200 and none.status_code == 404
    html = page.text
    assert re.findall(r'<section id="step-(\d+)">', html) == ["1", "2", "3", "4", "5"]
    assert '<a href="#step-2">next</a>' in html and '<a href="#step-4">previous</a>' in html
    assert "timed out" in html and "return a + b" in html and "1.000" in html
