"""The built-in session environments and their QA: every one's reference agent scores 1.0 (three
reruns alike), and a no-op, a busy and a random agent score ``MAX_WRONG_SCORE`` (0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym import DeepGym, Environment, load_environment
from deepgym.cli import cli
from deepgym.envs.qa.check import MAX_WRONG_SCORE, check_environment
from deepgym.envs.qa.exploits import session_exploits
from deepgym.envs.qa.session_check import (
    BUSY_COMMANDS,
    random_actions,
    reference_actions,
    scripted,
)
from deepgym.envs.registry import list_session_environments
from deepgym.exceptions import ConfigError
from deepgym.session import Action, Observation

SESSION_ENVS = list_session_environments()


def test_there_are_at_least_six_built_in_session_environments() -> None:
    assert len(SESSION_ENVS) >= 6, SESSION_ENVS
    for name in SESSION_ENVS:
        env = load_environment(name)
        assert env.kind == "session" and env.task and env.reference_solution


@pytest.fixture(scope="module")
def dg() -> DeepGym:
    with DeepGym() as client:
        yield client  # type: ignore[misc]


@pytest.mark.sandbox
@pytest.mark.parametrize("name", SESSION_ENVS)
def test_every_session_environment_passes_its_qa(name: str, dg: DeepGym) -> None:
    env = load_environment(name)
    report = check_environment(env, dg)
    assert [c.name for c in report.checks] == [
        "reference",
        "deterministic",
        "no-op",
        "busy",
        "random",
        *[f"exploit[{x.name}]" for x in session_exploits(env)],
    ]
    assert report.ok, report.summary()


def test_the_scripted_agents_are_pure() -> None:
    assert random_actions(3) == random_actions(3)
    assert random_actions(3) != random_actions(4)
    agent = scripted([Action("bash", command="ls")])
    assert agent(Observation(task="t", step=0)) == Action("bash", command="ls")
    assert agent(Observation(task="t", step=1)) == Action("done")
    assert len(BUSY_COMMANDS) >= 8


def _session_env(reference: str | None) -> Environment:
    return Environment(
        name="s",
        kind="session",
        verifier_code="def verify(work, tests):\n    return 0.0\n",
        reference_solution=reference,
    )


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (None, "no reference_agent.json"),
        ("not json", "not JSON"),
        ("[]", "non-empty list"),
        (json.dumps([{"tool": "fly"}]), "bash, write_file or done"),
    ],
)
def test_a_bad_reference_agent_is_named(reference: str | None, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        reference_actions(_session_env(reference))


@pytest.mark.sandbox
def test_qa_catches_a_verifier_that_rewards_doing_nothing(dg: DeepGym) -> None:
    generous = _session_env(json.dumps([{"tool": "bash", "command": "true"}])).model_copy(
        update={"verifier_code": "def verify(work, tests):\n    return 1.0\n"}
    )
    report = check_environment(generous, dg)
    failed = {c.name for c in report.failures}
    exploits = {f"exploit[{x.name}]" for x in session_exploits(generous)}
    assert failed == {"no-op", "busy", "random", *exploits}, report.summary()
    assert f"it must score {MAX_WRONG_SCORE:g}" in report.summary()


def noop_agent(obs: Observation) -> Action:
    """An agent for ``deepgym episode --agent``: it does nothing."""
    return Action("done")


@pytest.mark.sandbox
def test_deepgym_episode_runs_the_reference_agent_or_one_by_name(tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200"})
    r = runner.invoke(cli, ["episode", "agent/log_counts", "--store", str(tmp_path / "s.db")])
    assert r.exit_code == 0, r.output
    assert "--- step 2: write_file count.sh" in r.output
    assert "--- verdict: 1.000 passed" in r.output
    r = runner.invoke(cli, ["episodes", "--store", str(tmp_path / "s.db"), "--json"])
    assert json.loads(r.output)[0]["env_name"] == "agent/log_counts"  # recorded
    agent = "tests.envs.test_session_envs:noop_agent"
    r = runner.invoke(cli, ["episode", "agent/csv_json", "--agent", agent, "--no-store", "--json"])
    assert r.exit_code == 1, r.output  # judged, and not passed: ``run``'s exit code
    data = json.loads(r.output)
    assert data["result"]["score"] == 0.0 and data["result"]["has_verdict"]
    assert [s["action"]["tool"] for s in data["steps"]] == ["done"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["two_sum"], "an episode needs a session"),
        (["agent/csv_json", "--agent", "nocolon"], "module:function"),
        (["agent/csv_json", "--agent", "no_such_module:f"], "no module named 'no_such_module'"),
        (["agent/csv_json", "--agent", "json:no_such_function"], "no attribute"),
    ],
)
def test_deepgym_episode_refuses_bad_input_in_one_line(args: list[str], message: str) -> None:
    r = CliRunner().invoke(cli, ["episode", *args, "--no-store"])
    assert r.exit_code == 2, r.output
    assert message in r.output
