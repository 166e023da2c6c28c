"""Session environments as Harbor tasks: ``deepgym harbor export``.

``export_harbor_task(env, out_dir)`` writes a session environment in Harbor's layout: a
Dockerfile that copies its ``repo/`` into ``/work`` (and runs its ``setup.sh`` there), a
``tests/test.sh`` that runs its verifier (``RUNNER``, shipped as ``tests/deepgym_verify.py``) and
writes the score to ``reward.txt``, and a ``solution/solve.sh`` made of its reference agent's
actions. Importing the export (``import_task``) gives the environment back: the same task,
verifier and reference agent. The folder is written whole or not at all (``output.staged``).
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
from pathlib import Path
from typing import Any

from deepgym.envs.harbor.output import staged, write_command
from deepgym.envs.harbor.paths import WORK
from deepgym.envs.qa.session_check import reference_actions
from deepgym.envs.registry import resolve
from deepgym.exceptions import ConfigError
from deepgym.models import Environment

__all__ = ["EXPORT_BASE", "RUNNER", "export_harbor_task"]

EXPORT_BASE = "python:3.12"
"""The base of an exported task's image: Debian with python3, git, make and a C compiler, the
toolchain the built-in session environments use."""
RUNNER = Path(__file__).resolve().parent / "runner.py"
"""The file an export ships as ``tests/deepgym_verify.py`` (standard library only: it runs in
the task's container, without deepgym)."""


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string (ASCII, escaped) is a TOML basic string


def _task_toml(env: Environment) -> str:
    name = "deepgym/" + re.sub(r"[^A-Za-z0-9._-]+", "-", env.name).strip("-.")
    sections: dict[str, dict[str, Any]] = {
        "task": {"name": name, "description": env.description, "keywords": list(env.tags)},
        "metadata": {"source": "deepgym", "deepgym_env": env.name, "tags": list(env.tags)},
        "verifier": {"timeout_sec": float(env.timeout)},
        "agent": {"timeout_sec": float(env.lifetime)},
        "environment": {
            "build_timeout_sec": 600.0,
            "cpus": 1,
            "memory_mb": env.memory_mb,
            "allow_internet": False,
        },
    }
    if env.difficulty:
        sections["metadata"]["difficulty"] = env.difficulty
    lines = ['schema_version = "1.1"']
    for section, values in sections.items():
        lines += ["", f"[{section}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    return "\n".join(lines) + "\n"


def _dockerfile(env: Environment) -> str:
    lines = [
        f"# deepgym's session environment {env.name}: the work dir is {WORK}.",
        f"FROM {EXPORT_BASE}",
        f"WORKDIR {WORK}",
    ]
    if env.repo_path is not None:
        lines.append(f"COPY repo/ {WORK}/")
    if env.setup_script:
        lines += [
            f"COPY setup.sh {WORK}/.deepgym-setup.sh",
            "RUN bash .deepgym-setup.sh && rm .deepgym-setup.sh",
        ]
    return "\n".join(lines) + "\n"


_TEST_SH = f"""#!/bin/bash
# deepgym's final verifier: verify(work, tests) of verifier.py over the work dir, with the hidden
# tests in hidden/. Its score is the reward; no reward file means the verifier itself failed.
mkdir -p /logs/verifier
cd {WORK}
python3 /tests/deepgym_verify.py /tests/verifier.py {WORK} /tests/hidden /logs/verifier/reward.txt
"""


def _solve_sh(env: Environment) -> str:
    lines = [
        "#!/bin/bash",
        f"# deepgym's reference agent for {env.name}: its actions, in order, in one shell.",
        "exec </dev/null",
        f"cd {WORK}",
    ]
    for i, action in enumerate(reference_actions(env), 1):
        if action.tool == "done":
            break
        if action.tool == "bash":
            lines += [f"# step {i}", action.command]
        else:
            path = posixpath.normpath(posixpath.join(WORK, action.path))
            write = write_command(path, action.content.encode())
            lines += [f"# step {i}: write {action.path}", write]
    return "\n".join(lines) + "\n"


def export_harbor_task(env: Environment | str | Path, out_dir: str | Path) -> Path:
    """Write the session environment ``env`` (an ``Environment``, a name or a folder) to
    ``out_dir`` in Harbor's task layout; the folder written."""
    environment = resolve(env)
    if environment.kind != "session":
        raise ConfigError(f"{environment.name} is a {environment.kind} task, not a session")
    verifier = environment.verifier_code
    if verifier is None and environment.verifier_path is not None:
        verifier = environment.verifier_path.read_text()
    solve = _solve_sh(environment) if environment.reference_solution else None
    with staged(out_dir) as (stage, out):
        _export(environment, verifier, solve, stage)
    return out


def _export(environment: Environment, verifier: str | None, solve: str | None, out: Path) -> None:
    """Write ``environment``'s Harbor task into the empty folder ``out``."""
    (out / "task.toml").write_text(_task_toml(environment))
    (out / "instruction.md").write_text(environment.task)
    context = out / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(_dockerfile(environment))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    if environment.repo_path is not None:
        shutil.copytree(environment.repo_path, context / "repo", ignore=ignore, symlinks=True)
    if environment.setup_script:
        (context / "setup.sh").write_text(environment.setup_script)
    tests = out / "tests"
    (tests / "hidden").mkdir(parents=True)
    if environment.tests_path is not None:
        shutil.copytree(environment.tests_path, tests / "hidden", ignore=ignore, dirs_exist_ok=True)
    (tests / "test.sh").write_text(_TEST_SH)
    (tests / "test.sh").chmod(0o755)
    shutil.copyfile(RUNNER, tests / "deepgym_verify.py")
    (tests / "verifier.py").write_text(verifier or "")
    if solve is not None:
        (out / "solution").mkdir()
        (out / "solution" / "solve.sh").write_text(solve)
        (out / "solution" / "solve.sh").chmod(0o755)
