"""verifiers 0.4: deepgym's taskset found by verifiers' own loaders, and one ``vf-eval`` run
(verifiers' chat harness in its subprocess runtime, against a scripted OpenAI-protocol server):
the rewards equal deepgym's own for the same answers, and an answer without a verdict is a failed
rollout, never a 0.

verifiers' harness prepares its chat program with ``uv`` (installing it with pip if missing) and
the program's packages from the index, once per machine (then cached)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import default_harness_id, harness_class, taskset_config_type

from deepgym import DeepGym
from deepgym.exceptions import ConfigError
from deepgym.integrations import verifiers as dg_vf
from tests.eval.openai_server import serve as serve_model
from tests.integrations.conftest import TWO_SUM_OK

TASKSET_ID = "deepgym-verifiers"
WRONG = "def two_sum(nums, target):\n    return [0, 0]\n"


def test_verifiers_loads_the_taskset_and_its_harness_by_id() -> None:
    config_cls = taskset_config_type(TASKSET_ID)
    assert config_cls is dg_vf.DeepGymTasksetConfig
    taskset = vf.load_taskset(config_cls(id=TASKSET_ID, envs=["two_sum", "fizzbuzz"]))
    tasks = list(taskset)
    assert [(t.data.idx, t.data.env) for t in tasks] == [(0, "two_sum"), (1, "fizzbuzz")]
    assert tasks[0].data.prompt.endswith(dg_vf.INSTRUCTION)
    assert isinstance(tasks[0], dg_vf.DeepGymTask)
    assert [fn.__name__ for fn in tasks[0].hooks("reward")] == ["deepgym"]
    assert default_harness_id(TASKSET_ID) == TASKSET_ID  # the taskset's own: the chat harness
    assert harness_class(TASKSET_ID) is dg_vf.DeepGymHarness
    assert len(list(taskset.take(1))) == 1  # verifiers' own views work on it


def test_a_session_environment_is_refused() -> None:
    with pytest.raises(ConfigError, match="session"):
        dg_vf.environments(["agent/fix_add"])
    with pytest.raises(ConfigError, match="list"):
        dg_vf.environments("two_sum")  # type: ignore[arg-type]


def test_load_environment_names_the_taskset_under_verifiers_04() -> None:
    with pytest.raises(ConfigError, match="taskset"):
        dg_vf.load_environment(["two_sum"])


def _broken_env(folder: Path) -> Path:
    """An environment whose verifier crashes before it touches the answer: no verdict."""
    folder.mkdir()
    (folder / "verifier.py").write_text(
        "def verify(solution, test_cases):\n    raise RuntimeError('verifier bug')\n"
    )
    (folder / "task.md").write_text("Write any function.\n")
    return folder


def _traces(out: Path) -> list[dict[str, Any]]:
    """Each episode's one trace (``traces.jsonl`` holds one episode a line)."""
    (path,) = out.rglob("traces.jsonl")
    episodes = [json.loads(line) for line in path.read_text().splitlines()]
    return [trace for episode in episodes for trace in episode["traces"]]


@pytest.mark.sandbox
def test_vf_eval_scores_with_deepgym_and_fails_a_rollout_without_a_verdict(
    tmp_path: Path,
) -> None:
    broken = _broken_env(tmp_path / "broken")
    answers = [
        f"text:Here:\n```python\n{TWO_SUM_OK}```",
        f"text:```python\n{WRONG}```",
    ]
    with serve_model({}, default=answers) as (url, script):
        argv = [
            str(Path(sys.executable).with_name("vf-eval")), TASKSET_ID,
            "--env.taskset.envs", "two_sum", str(broken),
            "-m", "scripted", "-r", "2",
            "--client.base-url", url, "--client.api-key-var", "DEEPGYM_TEST_KEY",
            "--env.agent.runtime.type", "subprocess",
            "--no-push", "-o", str(tmp_path / "out"),
        ]  # fmt: skip
        env = {**os.environ, "DEEPGYM_TEST_KEY": "none", "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=480, env=env)
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
        assert script.total == 4
    traces = _traces(tmp_path / "out")
    by_env: dict[str, list[dict[str, Any]]] = {}
    for trace in traces:
        by_env.setdefault(trace["task"]["data"]["env"], []).append(trace)
    rewards = sorted(t["rewards"]["deepgym"]["score"] for t in by_env["two_sum"])
    with DeepGym() as dg:
        own = sorted(r.score for r in dg.run_batch("two_sum", [TWO_SUM_OK, WRONG]).results)
    assert rewards == own == [0.0, 1.0]
    assert all(t["ok"] and t["info"]["deepgym"]["has_verdict"] for t in by_env["two_sum"])
    for trace in by_env[str(broken)]:  # no verdict: a failed rollout, its reward unscored
        assert not trace["ok"] and trace["rewards"]["deepgym"] is None
        (error,) = trace["errors"]
        assert error["type"] == "TaskError" and "NoVerdictError" in error["message"]
