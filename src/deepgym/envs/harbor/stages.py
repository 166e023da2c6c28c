"""Harbor's multi-step tasks (``[[steps]]``, ``steps/<name>/``) as a session in stages.

A multi-step task runs the agent through its steps in order in one environment: each step has
its ``instruction.md``, its ``tests/`` (merged over the task's shared ``tests/``, its own files
winning), its ``solution/solve.sh``, optionally a ``workdir/`` uploaded to the WORKDIR before
the agent starts it (a ``workdir/setup.sh`` then run there, which deletes itself), a
``[steps.healthcheck]`` run before it, and in ``task.toml`` its ``min_reward``, ``[steps.agent]
timeout_sec`` and ``[steps.verifier]`` ``timeout_sec`` and ``env``. ``multi_step_reward_strategy``
(``mean``, the default, or ``final``) makes the trial's reward of the steps'.

``stage_plan`` turns them into ``Environment.stages`` (each step's instruction, its setup: the
upload, ``setup.sh`` and the healthcheck; its ``min_reward``), ``stage_reward``, the verifier's
per-stage settings (``harbor.json``'s ``stages``: the test script, its limit and variables; the
verifier reads ``DEEPGYM_STAGE``), and the reference agent (each step's solution, then
``done``). The first step's setup runs in the session's setup script.
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym.envs.harbor import files as harbor_files
from deepgym.envs.harbor.output import write_command
from deepgym.envs.harbor.paths import HARBOR_ROOT, WORK, rewrite, rewrite_tree
from deepgym.exceptions import ConfigError

__all__ = ["StagePlan", "stage_plan"]

STAGES_DIR = "harbor-stages"
"""Where each stage's own tests go, under the environment's hidden tests."""


@dataclass
class StagePlan:
    """What a multi-step task's steps make of the session environment."""

    stages: list[dict[str, Any]] = field(default_factory=list)
    """``Environment.stages``, as metadata."""
    verifier: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``harbor.json``'s ``stages``: each stage's test script, limit and variables."""
    reference: list[dict[str, str]] = field(default_factory=list)
    first_setup: str = ""
    """The first stage's setup, for the session's setup script."""
    agent_s: float = 0.0
    """The steps' agent time together (the session's lifetime)."""
    longest_agent_s: float = 0.0
    longest_verifier_s: float = 0.0
    reward: str = "mean"


def _seconds(table: Any, default: float, where: str) -> float:
    value = table.get("timeout_sec") if isinstance(table, dict) else None
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{where}: timeout_sec must be a positive number of seconds")
    return float(value)


def _upload(folder: Path, task: Path, mapping: dict[str, str]) -> list[str]:
    """Commands that write ``folder``'s files into the work dir, then run its ``setup.sh``
    there (which deletes itself, as Harbor's hook does)."""
    lines = []
    for path, _ in sorted(harbor_files.walk(folder, task)):
        data = harbor_files.read(path)
        with contextlib.suppress(UnicodeDecodeError):
            data = rewrite(data.decode("utf-8"), mapping).encode("utf-8")
        target = f"{WORK}/{path.relative_to(folder).as_posix()}"
        lines.append(write_command(target, data, executable=bool(path.stat().st_mode & 0o111)))
    if (folder / "setup.sh").is_file():
        lines.append(f"(cd {WORK} && bash {WORK}/setup.sh)")
    return lines


def _healthcheck(check: Any, where: str, mapping: dict[str, str]) -> list[str]:
    if not isinstance(check, dict) or not isinstance(check.get("command"), str):
        return []
    retries = int(check.get("retries", 3))
    interval = float(check.get("interval_sec", 1))
    limit = float(check.get("timeout_sec", 30))
    if retries < 1 or interval < 0 or limit <= 0:
        raise ConfigError(f"{where}: a healthcheck's retries, interval or timeout")
    cmd = shlex.quote(rewrite(check["command"], mapping))
    return [
        f"__ok=; for __i in $(seq 1 {retries}); do if timeout {limit:g} bash -c {cmd}; then "
        f'__ok=1; break; fi; sleep {interval:g}; done; [ -n "$__ok" ]'
    ]


def stage_plan(
    task: Path,
    config: dict[str, Any],
    out: Path,
    mapping: dict[str, str],
    variables: dict[str, str],
    defaults: tuple[float, float],
    solve: str = "solve.sh",
) -> StagePlan:
    """The stages of the multi-step task ``task`` (its ``task.toml`` read as ``config``), each
    stage's tests written under ``out/tests/harbor-stages/<name>``; ``variables``: the
    verifier's, which a step's own add to; ``defaults``: the agent's and the verifier's
    seconds where a step gives none."""
    steps = config.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ConfigError(f"{task.name}: steps/ but no [[steps]] in task.toml")
    plan = StagePlan(reward=str(config.get("multi_step_reward_strategy") or "mean"))
    if plan.reward not in ("mean", "final"):
        raise ConfigError(f"{task.name}: multi_step_reward_strategy {plan.reward!r}")
    for i, step in enumerate(steps):
        name = step.get("name") if isinstance(step, dict) else None
        where = f"{task.name}: [[steps]] {i + 1}"
        if not isinstance(name, str) or not (task / "steps" / name).is_dir():
            raise ConfigError(f"{where}: no steps/{name} folder")
        folder = task / "steps" / name
        if not (folder / "instruction.md").is_file():
            raise ConfigError(f"{where}: no steps/{name}/instruction.md")
        script = "test.sh"
        if not (folder / "tests" / script).is_file() and not (task / "tests" / script).is_file():
            raise ConfigError(f"{where}: no tests/test.sh, its own or the task's")
        agent_s = _seconds(step.get("agent"), defaults[0], where)
        verifier_s = _seconds(step.get("verifier"), defaults[1], where)
        plan.agent_s += agent_s
        plan.longest_agent_s = max(plan.longest_agent_s, agent_s)
        plan.longest_verifier_s = max(plan.longest_verifier_s, verifier_s)
        env = dict(variables)
        own = (step.get("verifier") or {}).get("env") or {}
        env.update({str(k): rewrite(str(v), mapping) for k, v in own.items()})
        plan.verifier[name] = {"script": script, "timeout": verifier_s, "env": env}
        if (folder / "tests").is_dir():
            harbor_files.copy_in(folder / "tests", out / "tests" / STAGES_DIR / name, task)
            rewrite_tree(out / "tests" / STAGES_DIR / name, mapping)
        setup = _upload(folder / "workdir", task, mapping) if (folder / "workdir").is_dir() else []
        setup += _healthcheck(step.get("healthcheck"), where, mapping)
        text = harbor_files.read(folder / "instruction.md").decode("utf-8", errors="replace")
        stage: dict[str, Any] = {"name": name, "task": rewrite(text, mapping)}
        if step.get("min_reward") is not None:
            stage["min_reward"] = float(step["min_reward"])
        if setup and i > 0:
            stage["setup_script"] = "set -e\n" + "\n".join(setup) + f"\ncd {WORK}\n"
        elif setup:
            plan.first_setup = "\n".join(setup) + "\n"
        plan.stages.append(stage)
        plan.reference += _solution(folder / "solution", task, mapping, name, solve)
    return plan


def _solution(
    folder: Path, task: Path, mapping: dict[str, str], name: str, solve: str
) -> list[dict[str, str]]:
    """A step's oracle as the reference agent's actions: its files written, its ``solve.sh``
    run in the work dir, then ``done`` (the step is over)."""
    actions: list[dict[str, str]] = []
    if (folder / solve).is_file():
        root = f"{HARBOR_ROOT}/solution/{name}"
        for path, _ in sorted(harbor_files.walk(folder, task)):
            data = harbor_files.read(path)
            with contextlib.suppress(UnicodeDecodeError):
                data = rewrite(data.decode("utf-8"), mapping).encode("utf-8")
            target = f"{root}/{path.relative_to(folder).as_posix()}"
            command = write_command(target, data, executable=bool(path.stat().st_mode & 0o111))
            actions.append({"tool": "bash", "command": command})
        actions.append({"tool": "bash", "command": f"cd {WORK} && bash {root}/{solve}"})
    actions.append({"tool": "done"})
    return actions
