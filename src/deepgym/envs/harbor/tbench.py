"""terminal-bench's first task format as session environments: ``deepgym harbor import``.

A terminal-bench task is a folder: ``task.yaml`` (``instruction``, ``parser_name``,
``max_agent_timeout_sec``, ``max_test_timeout_sec``, ``difficulty``, ``category``, ``tags``), a
``docker-compose.yaml`` with one service (its build context and Dockerfile, its environment
variables), ``run-tests.sh`` (run after the agent, with the task's ``tests/`` at ``$TEST_DIR``),
``solution.sh`` (the oracle) and ``tests/``.

``import_terminal_bench_task(task_dir, out_dir)`` reads it into Harbor's layout in a staging
folder and imports that (``import_task``, whose checks, rewrites and image build apply as they
do to a Harbor task), with terminal-bench's names and its verdict:

- ``instruction`` -> ``instruction.md``; ``max_agent_timeout_sec`` -> ``[agent] timeout_sec``;
  ``max_test_timeout_sec`` -> ``[verifier] timeout_sec`` (the test script's limit);
- the service's build context and Dockerfile -> ``environment/``; its ``environment`` ->
  ``[environment] env`` (terminal-bench's own variables given their values in the container:
  ``T_BENCH_TEST_DIR`` is ``/tests``); its image name, container name, command, volumes (the
  harness's log folders) and CPU limit have no effect here; a memory limit is the session's;
- ``run-tests.sh`` and ``tests/`` -> the hidden tests, at ``/tests`` as terminal-bench puts them
  (``$TEST_DIR``, rewritten to where a session has it);
- ``solution.sh`` -> the reference agent;
- ``parser_name``: how the test script's output becomes the verdict. ``pytest`` (the only one
  read): pytest's short test summary, one result a test; 1.0 when at least one test ran and none
  failed, as terminal-bench resolves a task, and the script exited 0 (stricter: a summary the
  answer's code printed before it killed the script is no pass).

Refused in one ``ConfigError`` line: a compose file with more than one service (or none, or one
without a build), another parser, a ``solution.yaml`` oracle (commands for its tmux session),
and what Harbor's import refuses.

Threat model: as ``import_task``'s. The files read (``task.yaml``, the compose file, the build
context, ``run-tests.sh``, ``tests/``, ``solution.sh``) are checked before any is read.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from deepgym.envs.harbor import files as harbor_files
from deepgym.envs.harbor.import_task import TaskFormat, import_harbor_task
from deepgym.exceptions import ConfigError
from deepgym.models import Environment

__all__ = [
    "COMPOSE_FILES",
    "PARSERS",
    "TBENCH",
    "TBENCH_VARIABLES",
    "import_terminal_bench_task",
    "is_terminal_bench_task",
]

TBENCH = TaskFormat(
    script="run-tests.sh", solve="solution.sh", parser="pytest", label="terminal-bench"
)
"""terminal-bench's names, staged in Harbor's layout: the test script, the oracle, the parser."""
PARSERS = ("pytest",)
"""``parser_name`` values the import reads."""
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
TBENCH_VARIABLES = {
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}
"""terminal-bench's harness variables with their values in the container."""
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([gmk])i?b?\s*", re.IGNORECASE)


def is_terminal_bench_task(folder: Path) -> bool:
    """Whether ``folder`` holds a terminal-bench task (a ``task.yaml`` and a
    ``run-tests.sh``)."""
    return (folder / "task.yaml").is_file() and (folder / "run-tests.sh").is_file()


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(harbor_files.read(path).decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: malformed YAML ({' '.join(str(exc).split())})") from None


def _task(task: Path) -> dict[str, Any]:
    spec = _yaml(task / "task.yaml")
    if not isinstance(spec, dict):
        raise ConfigError(f"{task / 'task.yaml'}: must be a mapping")
    if not isinstance(spec.get("instruction"), str) or not spec["instruction"].strip():
        raise ConfigError(f"{task / 'task.yaml'}: no instruction")
    parser = spec.get("parser_name", "pytest")
    if parser not in PARSERS:
        raise ConfigError(
            f"{task.name}: parser {parser!r}, which deepgym does not read ({', '.join(PARSERS)})"
        )
    return spec


def _compose(task: Path) -> tuple[dict[str, Any], Path]:
    """The one service of the task's compose file, and its path; ``ConfigError`` for another
    number of services, or one without a build."""
    found = [task / name for name in COMPOSE_FILES if (task / name).is_file()]
    if not found:
        raise ConfigError(f"{task.name}: no docker-compose.yaml")
    doc = _yaml(found[0])
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or len(services) != 1:
        names = ", ".join(sorted(services)) if isinstance(services, dict) else "none"
        count = len(services) if isinstance(services, dict) else 0
        raise ConfigError(
            f"{task.name}: {found[0].name} defines {count} services ({names}); only a task "
            "of one container runs here"
        )
    ((name, service),) = services.items()
    if not isinstance(service, dict) or "build" not in service:
        raise ConfigError(
            f"{task.name}: {found[0].name} service {name!r} has no build (a prebuilt image)"
        )
    return service, found[0]


def _substitute(value: str) -> str:
    """``value`` with terminal-bench's own variables given their values in the container
    (any other ``${VAR}`` is left for the import to refuse: a value from the host)."""

    def known(m: re.Match[str]) -> str:
        name = m[1] or m[2]
        return TBENCH_VARIABLES.get(name, m[0])

    return _VARIABLE.sub(known, value)


def _environment(service: dict[str, Any], where: Path) -> dict[str, str]:
    raw = service.get("environment") or {}
    pairs: list[tuple[str, str]] = []
    if isinstance(raw, list):
        for item in raw:
            key, sep, value = str(item).partition("=")
            if not sep:
                raise ConfigError(f"{where}: environment {item!r} passes a host variable")
            pairs.append((key.strip(), value))
    elif isinstance(raw, dict):
        pairs = [(str(k), "" if v is None else str(v)) for k, v in raw.items()]
    else:
        raise ConfigError(f"{where}: environment must be a list or a mapping")
    return {key: _substitute(value) for key, value in pairs}


def _memory(service: dict[str, Any]) -> str | None:
    limits = ((service.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    value = service.get("mem_limit") or limits.get("memory")
    if value is None:
        return None
    m = _MEMORY.fullmatch(str(value))
    return f"{m[1]}{m[2].upper()}" if m else None


def _toml(config: Mapping[str, Mapping[str, Any]]) -> str:
    """``config`` as TOML (strings as JSON strings, which TOML's basic strings read alike)."""
    out: list[str] = []
    for section, values in config.items():
        tables = {k: v for k, v in values.items() if isinstance(v, dict)}
        out.append(f"[{section}]")
        for key, value in values.items():
            if not isinstance(value, dict):
                out.append(f"{key} = {json.dumps(value)}")
        for key, table in tables.items():
            out.append(f"[{section}.{key}]")
            out += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in table.items()]
        out.append("")
    return "\n".join(out)


def _stage(task: Path, stage: Path) -> None:
    """Write ``task`` (terminal-bench's layout) in Harbor's layout into ``stage``."""
    spec = _task(task)
    service, compose = _compose(task)
    build = service["build"]
    context_name = build if isinstance(build, str) else str(build.get("context", "."))
    dockerfile = (
        "Dockerfile" if isinstance(build, str) else str(build.get("dockerfile", "Dockerfile"))
    )
    context = (task / context_name).resolve()
    if not context.is_relative_to(task.resolve()) or not context.is_dir():
        raise ConfigError(f"{compose}: build context {context_name!r} is not a folder of the task")
    if (task / "solution.yaml").is_file() and not (task / "solution.sh").is_file():
        raise ConfigError(
            f"{task.name}: solution.yaml (commands typed into its terminal), which is not imported"
        )
    read = [task / "task.yaml", compose, context, task / "run-tests.sh", task / "tests"]
    harbor_files.inventory([*read, task / "solution.sh"], task)
    harbor_files.copy_in(context, stage / "environment", task)
    for name in COMPOSE_FILES:  # read here: the build is the one service's
        (stage / "environment" / name).unlink(missing_ok=True)
    if dockerfile != "Dockerfile":
        harbor_files.copy_in(context / dockerfile, stage / "environment" / "Dockerfile", task)
    if (task / "tests").is_dir():
        harbor_files.copy_in(task / "tests", stage / "tests", task)
    harbor_files.copy_in(task / "run-tests.sh", stage / "tests" / "run-tests.sh", task)
    if (task / "solution.sh").is_file():
        harbor_files.copy_in(task / "solution.sh", stage / "solution" / "solution.sh", task)
    (stage / "instruction.md").write_text(spec["instruction"], encoding="utf-8")
    config: dict[str, dict[str, Any]] = {"metadata": {}, "agent": {}, "verifier": {}}
    for key in ("difficulty", "category"):
        if isinstance(spec.get(key), str):
            config["metadata"][key] = spec[key]
    tags = spec.get("tags")
    if isinstance(tags, list):
        config["metadata"]["tags"] = ["terminal-bench", *(str(t) for t in tags)]
    else:
        config["metadata"]["tags"] = ["terminal-bench"]
    for section, key in (("agent", "max_agent_timeout_sec"), ("verifier", "max_test_timeout_sec")):
        if spec.get(key) is not None:
            config[section]["timeout_sec"] = spec[key]
    environment: dict[str, Any] = {"env": _environment(service, compose)}
    memory = _memory(service)
    if memory is not None:
        environment["memory"] = memory
    config["environment"] = environment
    (stage / "task.toml").write_text(_toml(config), encoding="utf-8")


def import_terminal_bench_task(
    task_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    bases: Mapping[str, str] | None = None,
) -> Environment:
    """The terminal-bench task in ``task_dir`` as a session environment, written as a folder to
    ``out_dir`` (a temporary folder, removed at exit, when None) and loaded from it; on its
    image, built first on the stand-ins ``bases`` names (``import_harbor_task``)."""
    task = Path(task_dir)
    if not task.is_dir() or not is_terminal_bench_task(task):
        raise ConfigError(f"{task}: not a terminal-bench task folder (task.yaml, run-tests.sh)")
    with tempfile.TemporaryDirectory(prefix="tbench-") as tmp:
        stage = Path(tmp) / task.name
        stage.mkdir()
        _stage(task, stage)
        return import_harbor_task(
            stage, out_dir, progress=progress, bases=bases, task_format=TBENCH
        )
