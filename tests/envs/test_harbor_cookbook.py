"""Harbor's current task format, from three recipes of harbor-cookbook (``../shared/data``, see
its README), imported unmodified: ``simple-task``, ``multi-reward`` (several named scores) and
``multi-step`` (``steps/*``). They start ``FROM ubuntu:24.04``, which no registry here serves:
Debian bookworm stands in for it (``--base``). Their test scripts fetch their tools from the
internet, except multi-step's: that one runs whole, offline, here; the others are checked for
the structure deepgym derives.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from tests.envs.image_store import link_shared_store
from tests.shared_data import shared_data

from deepgym import DeepGym
from deepgym.envs.harbor import import_harbor_task
from deepgym.envs.harbor.verifier import read_reward
from deepgym.envs.qa.session_check import reference_actions, scripted
from deepgym.exceptions import ConfigError, ImageError
from deepgym.models import Environment, RunResult

RECIPES = shared_data() / "harbor-cookbook" / "harbor_cookbook" / "recipes"
BASES = {"ubuntu:24.04": "debian:bookworm"}

pytestmark = [
    pytest.mark.skipif(not RECIPES.is_dir(), reason=f"no harbor-cookbook at {RECIPES}"),
]


@pytest.fixture
def store_home(_deepgym_home: Path) -> None:
    """The image store the Harbor image tests share (debian:bookworm built once there)."""
    link_shared_store(_deepgym_home)


def _play(env: Environment, actions: list[dict[str, str]]) -> RunResult:
    with DeepGym() as dg:
        return dg.run_episode(env, scripted(actions)).result


def test_simple_task_runs_on_the_host_with_its_tests_hidden(tmp_path: Path) -> None:
    env = import_harbor_task(RECIPES / "simple-task", tmp_path / "simple")
    assert env.image is None  # FROM ubuntu:24.04 and a WORKDIR: the host's system stands in
    assert (env.lifetime, env.timeout) == (120.0, 135.0)
    assert env.memory_mb == 2048
    assert (tmp_path / "simple" / "tests" / "harbor" / "test_state.py").is_file()
    harbor = json.loads((tmp_path / "simple" / "tests" / "harbor.json").read_text())
    assert harbor["script"] == "test.sh" and "parser" not in harbor
    actions = json.loads((tmp_path / "simple" / "reference_agent.json").read_text())
    assert actions[-1]["command"].endswith("bash /tmp/harbor/solution/solve.sh")


def test_multi_reward_scores_the_mean_of_its_named_scores() -> None:
    """The recipe's test script writes ``{"correctness": c, "performance": p}`` and no total:
    each a reward component, their mean the score (Harbor's rule for several rewards)."""
    text = (RECIPES / "multi-reward" / "tests" / "test.sh").read_text()
    assert "'correctness': $correctness, 'performance': $performance" in text
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "reward.json").write_text('{"correctness": 1, "performance": 0}')
        report = read_reward(Path(tmp))
    assert (report["status"], report["score"]) == ("ok", 0.5)
    assert report["reward_components"] == {"correctness": 1.0, "performance": 0.0}


@pytest.mark.usefixtures("store_home")
@pytest.mark.sandbox
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="build steps map ids directly only as root")
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is absent")
def test_multi_reward_imports_on_its_image_built_on_the_stand_in(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"--base ubuntu:24\.04=LOCAL"):  # no stand-in
        import_harbor_task(RECIPES / "multi-reward", tmp_path / "none")
    env = import_harbor_task(RECIPES / "multi-reward", tmp_path / "mr", bases=BASES)
    assert env.image is not None and env.user == "root"
    assert json.loads((tmp_path / "mr" / "image-bases.json").read_text()) == BASES


@pytest.mark.usefixtures("store_home")
@pytest.mark.sandbox
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="build steps map ids directly only as root")
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is absent")
def test_multi_step_is_a_session_in_stages_gated_by_each_steps_tests(tmp_path: Path) -> None:
    config = tomllib.loads((RECIPES / "multi-step" / "task.toml").read_text())
    env = import_harbor_task(RECIPES / "multi-step", tmp_path / "ms", bases=BASES)
    assert [s.name for s in env.stages] == [s["name"] for s in config["steps"]]
    assert [s.min_reward for s in env.stages] == [1.0, 0.5, None]
    assert env.stage_reward == "mean" and env.lifetime == 60.0 + 90.0 + 60.0
    implement = env.stages[1]
    assert implement.setup_script is not None
    assert "/work/config.txt" in implement.setup_script and "test -x /work/greet.sh" in (
        implement.setup_script
    )
    assert "greet.sh" in env.stages[0].task and "/app" not in env.stages[0].task
    right = _play(env, reference_actions(env))
    assert (right.has_verdict, right.score) == (True, 1.0), (right.error, right.cases)
    assert right.reward_components == {"scaffold": 1.0, "implement": 1.0, "document": 1.0}
    idle = _play(env, [])  # the first step's gate (min_reward 1.0) ends the episode
    assert (idle.has_verdict, idle.score) == (True, 0.0), idle.cases
    assert idle.reward_components == {"scaffold": 0.0}
    hard_coded = [
        *reference_actions(env)[:3],  # scaffold solved, then a greeting that reads no file
        {"tool": "bash", "command": "printf '#!/bin/bash\\necho \"Hello, Harbor!\"\\n' > greet.sh"},
        {"tool": "done"},
    ]
    half = _play(env, hard_coded)  # implement scores 0 < 0.5: the mean of the two run
    assert (half.has_verdict, half.score) == (True, 0.5), half.cases
    assert half.reward_components == {"scaffold": 1.0, "implement": 0.0}


def test_a_phase_that_needs_the_internet_is_refused_in_a_line(tmp_path: Path) -> None:
    task = tmp_path / "net"
    shutil.copytree(RECIPES / "simple-task", task)
    with (task / "task.toml").open("a") as f:
        f.write('\n[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n')
    text = (task / "task.toml").read_text().replace("[agent]\ntimeout_sec = 120.0\n", "")
    (task / "task.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"\[agent\] network_mode = 'allowlist' \(pypi.org\)"):
        import_harbor_task(task, tmp_path / "out")
    assert not (tmp_path / "out").exists()
