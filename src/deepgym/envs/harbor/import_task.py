"""Harbor tasks as session environments: ``deepgym harbor import``.

A Harbor task (harborframework.com) is a folder: ``task.toml`` (``[metadata]``; ``[verifier]``
``timeout_sec`` and ``env``; ``[agent] timeout_sec``; ``[solution] env``; ``[environment]``
``docker_image``, ``memory_mb``, ``gpus``, ``env``, ...), ``instruction.md`` (the prompt),
``environment/`` (a ``Dockerfile`` and the files it copies, or a compose file), ``tests/test.sh``
(run after the agent; it writes the reward to ``/logs/verifier/reward.txt``, a number, or
``reward.json``, an object whose ``reward`` is the number) and ``solution/solve.sh`` (the oracle).

``import_harbor_task(task_dir, out_dir)`` writes a session environment folder and loads it:

- the work dir is seeded with the files the Dockerfile copies into its ``WORKDIR``, and its
  variables and ``RUN`` lines become ``setup.sh`` (``plan`` says precisely which Dockerfiles
  the host stands in for);
- ``verifier.py`` is ``VERIFIER`` (``verifier.py`` of this package, standard library only): it
  runs ``tests/test.sh`` in the final verifier's sandbox and reads its reward (the verdicts are
  in its docstring);
- ``reference_agent.json`` writes ``solution/`` to ``/tmp/harbor/solution``, then runs
  ``solve.sh`` in the work dir: the oracle is the reference agent;
- ``[agent] timeout_sec`` is the session's ``lifetime`` and ``step_timeout`` (Harbor limits the
  agent's phase as a whole), ``[verifier] timeout_sec`` the test script's limit.

A Dockerfile beyond the host subset but within the subset deepgym builds
(``deepgym.images.recipe``) imports on its image: built by the import, named
``harbor/<task>:<hash of environment/>``, its ``WORKDIR`` mapped onto the work dir
(``image`` says how, and how the image is rebuilt on another machine).

A multi-step task (``steps/``) is a session in stages (``stages``). Several named scores in
``reward.json`` are reward components, their mean the score. A task's network policy is
honoured where it forbids (no sandbox here has a network) and refused where a phase asks for
the internet; ``[verifier] environment_mode = "separate"`` with a ``tests/Dockerfile`` gives the
verifier an image of its own.

Refused, with one ``ConfigError`` line: a Dockerfile outside the build subset (the line and its
instruction), a ``docker_image`` in task.toml or a compose file (a prebuilt image or services:
it "cannot run on the host sandbox"); also a GPU, a Windows task, a phase that needs the
internet, and a variable read from the host (``${VAR}``: the sandbox passes none of the
host's).

Paths: Harbor's container paths are rewritten to where a session has them (``paths``).

Threat model: the agent's sandbox never holds ``tests/`` or ``solution/``. The tests reach only
the final verifier's sandbox (they are the environment's hidden tests); the solution is only in
``reference_agent.json``, which only the reference agent plays. Every file read from the task
folder is checked before it is read (``files``: a link out of it, a named pipe, a file or
a task past the limits are refused: a task must not carry host files into a sandbox, nor fill
the memory or the disk), and the output is written beside ``out_dir`` and renamed into place
once whole (``output.staged``): a refused task leaves nothing there.
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import posixpath
import re
import shlex
import shutil
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym.envs.harbor import files as harbor_files
from deepgym.envs.harbor import image as harbor_image
from deepgym.envs.harbor.output import staged, write_command
from deepgym.envs.harbor.paths import HARBOR_ROOT, WORK, path_map, rewrite, rewrite_tree
from deepgym.envs.harbor.plan import DEFAULT_WORKDIR, Plan, inside
from deepgym.envs.harbor.plan import plan as host_plan
from deepgym.envs.harbor.stages import stage_plan
from deepgym.envs.registry import load_folder
from deepgym.exceptions import ConfigError
from deepgym.images.dockerfile import parse as parse_dockerfile
from deepgym.images.recipe import Recipe
from deepgym.models import Environment

__all__ = [
    "DEFAULT_AGENT_S",
    "DEFAULT_VERIFIER_S",
    "HARBOR",
    "VERIFIER",
    "VERIFIER_GRACE_S",
    "TaskFormat",
    "import_harbor_task",
]

VERIFIER_GRACE_S = 15.0
"""The final verifier's limit past the test script's own: it reports the script's timeout."""
DEFAULT_AGENT_S = 600.0
"""The agent's time where task.toml gives none."""
DEFAULT_VERIFIER_S = 600.0
"""The test script's time where task.toml gives none (Harbor's default)."""
VERIFIER = Path(__file__).resolve().parent / "verifier.py"
"""The file an import writes as the environment's ``verifier.py`` (standard library only: it
runs in the final verifier's sandbox, outside the deepgym package)."""
_COMPOSE = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_READ = ("task.toml", "instruction.md", "environment", "tests", "solution", "steps")
"""What the import reads of a task folder (``harbor_files.inventory`` checks it first)."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class TaskFormat:
    """How a task format names the parts the import reads: Harbor's (``HARBOR``) by default;
    ``deepgym.envs.harbor.tbench`` stages terminal-bench's first format in Harbor's layout
    with its own names."""

    script: str = "test.sh"
    """The test script, in ``tests/``."""
    solve: str = "solve.sh"
    """The oracle, in ``solution/``."""
    parser: str | None = None
    """How the test script's output is read: None (Harbor's reward files) or ``"pytest"``
    (pytest's short test summary, one result a test: ``verifier.parse_pytest``)."""
    label: str = "Harbor"


HARBOR = TaskFormat()


def _needs_image(task: Path, why: str) -> ConfigError:
    return ConfigError(
        f"{task.name}: needs a container image ({why}), and cannot run on the host sandbox"
    )


def _task_folder(task: Path, form: TaskFormat = HARBOR) -> None:
    """``ConfigError`` unless ``task`` is a Harbor task folder whose files the import may read:
    ``harbor_files.inventory`` over them, before any is read."""
    if not task.is_dir():
        raise ConfigError(f"{task}: not a {form.label} task folder")
    staged = (task / "steps").is_dir()  # a multi-step task: each step has its instruction
    for name in ("task.toml", *(() if staged else ("instruction.md", f"tests/{form.script}"))):
        if not (task / name).is_file():
            raise ConfigError(f"{task}: not a {form.label} task folder (no {name})")
    harbor_files.inventory([task / name for name in _READ], task)


def _config(task: Path) -> dict[str, Any]:
    try:
        config = tomllib.loads(harbor_files.read(task / "task.toml").decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{task / 'task.toml'}: malformed TOML ({exc})") from None
    for section in ("metadata", "task", "verifier", "agent", "solution", "environment"):
        if not isinstance(config.get(section, {}), dict):
            raise ConfigError(f"{task / 'task.toml'}: [{section}] must be a table")
    return config


def _seconds(config: dict[str, Any], section: str, default: float, where: Path) -> float:
    value = config.get(section, {}).get("timeout_sec")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{where}: [{section}] timeout_sec must be a positive number of seconds")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: [{section}] timeout_sec must be finite")
    return float(value)


def _variables(config: dict[str, Any], section: str, where: Path) -> dict[str, str]:
    values = config.get(section, {}).get("env", {})
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: [{section}] env must be a table of strings")
    out = {}
    for key, value in values.items():
        if not _NAME.fullmatch(key) or not isinstance(value, str | int | float):
            raise ConfigError(f"{where}: [{section}] env {key!r} is not a variable with a value")
        if "${" in str(value):
            raise ConfigError(
                f"{where}: [{section}] env {key} reads {value} from the host, and the sandbox "
                "passes none of the host's variables"
            )
        out[key] = str(value)
    return out


def _memory_mb(environment: dict[str, Any], where: Path) -> int | None:
    value = environment.get("memory_mb")
    if value is None and isinstance(environment.get("memory"), str):  # Harbor's older "2G"
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMK])\s*", environment["memory"].upper())
        if m is None:
            raise ConfigError(f"{where}: [environment] memory {environment['memory']!r}")
        value = int(float(m[1]) * {"G": 1024, "M": 1, "K": 1 / 1024}[m[2]])
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 32:
        raise ConfigError(f"{where}: [environment] memory_mb must be a whole number, at least 32")
    return value


NETWORK_PHASES = ("agent", "verifier")
"""The phases whose own network setting overrides the task's baseline ([environment])."""


def _network(task: Path, config: dict[str, Any]) -> None:
    """``ConfigError`` where a phase asks for the internet, which no sandbox here has: an
    ``allowlist`` of hosts anywhere, or a phase's own ``public`` (or ``allow_internet = true``)
    over the baseline. A baseline that allows the internet (Harbor's default) runs without it;
    one that forbids it is what every sandbox here is."""
    tables = [("environment", config.get("environment", {}))]
    tables += [(name, config.get(name, {})) for name in NETWORK_PHASES]
    verifier_env = config.get("verifier", {}).get("environment")
    if isinstance(verifier_env, dict):
        tables.append(("verifier.environment", verifier_env))
    for i, step in enumerate(config.get("steps") or []):
        if isinstance(step, dict):
            tables += [(f"steps[{i}].{n}", step.get(n) or {}) for n in NETWORK_PHASES]
    for name, table in tables:
        if not isinstance(table, dict):
            continue
        mode, allow = table.get("network_mode"), table.get("allow_internet")
        phase = name != "environment" and name != "verifier.environment"
        if mode == "allowlist":
            hosts = ", ".join(str(h) for h in table.get("allowed_hosts") or []) or "no hosts"
            why = f"network_mode = 'allowlist' ({hosts})"
        elif phase and (mode == "public" or allow is True):
            why = "network_mode = 'public'" if mode == "public" else "allow_internet = true"
        else:
            continue
        raise ConfigError(
            f"{task.name}: [{name}] {why}: the phase needs the internet, and no sandbox here "
            "has a network"
        )


def _separate_verifier(
    task: Path,
    config: dict[str, Any],
    workdir: str,
    on_image: bool,
    bases: dict[str, str],
    progress: Callable[[str], None] | None,
) -> str | None:
    """The image of a verifier environment of the task's own (``[verifier] environment_mode =
    "separate"``, ``tests/`` its build context), built; None where the task asks for none or
    gives no Dockerfile (its verifier runs on the task's image, as every verifier here runs in a
    sandbox of its own). ``ConfigError`` for an artifact outside the work dir (the only part of
    the agent's sandbox a verifier here sees), or a separate image for a task on the host."""
    verifier = config.get("verifier", {})
    if verifier.get("environment_mode", "shared") != "separate":
        return None
    for path in config.get("artifacts") or []:
        if not isinstance(path, str) or not inside(posixpath.normpath(path), workdir):
            raise ConfigError(
                f"{task.name}: artifact {path!r} is outside the work dir {workdir}, the only "
                "part of the agent's sandbox a verifier here sees"
            )
    if not (task / "tests" / "Dockerfile").is_file():
        return None
    if not on_image:
        raise ConfigError(
            f"{task.name}: a verifier image of its own (tests/Dockerfile) for a task on the "
            "host sandbox"
        )
    harbor_image.image_recipe(
        parse_dockerfile(harbor_files.read(task / "tests" / "Dockerfile").decode("utf-8")),
        task.name,
    )
    ref = harbor_image.image_ref(f"{task.name}-verifier", task / "tests", bases)
    harbor_image.build_image(task / "tests", ref, progress, bases)
    return ref


def _plan(task: Path, config: dict[str, Any]) -> tuple[Plan, Recipe | None]:
    """What the task's environment builds and, where only an image gives it, the image's build
    (``harbor_image``); or the one-line refusal of a task that cannot run here."""
    environment = config.get("environment", {})
    if str(environment.get("os", "linux")).lower() != "linux":
        raise ConfigError(f"{task.name}: a task for {environment['os']}, not for linux")
    gpus = environment.get("gpus", 0)
    if gpus:
        raise ConfigError(f"{task.name}: needs {gpus} GPU(s), which the host sandbox does not give")
    if environment.get("docker_image"):
        raise _needs_image(task, f"task.toml docker_image = {environment['docker_image']!r}")
    for name in _COMPOSE:
        if (task / "environment" / name).is_file():
            raise _needs_image(task, f"environment/{name} defines its services")
    docker = task / "environment" / "Dockerfile"
    if not docker.is_file():
        return Plan(base="", workdir=DEFAULT_WORKDIR), None
    try:
        instructions = parse_dockerfile(harbor_files.read(docker).decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{docker}: not UTF-8 text") from None
    with contextlib.suppress(ConfigError):  # the host stands in for the image
        return host_plan(instructions), None
    built = harbor_image.image_recipe(instructions, task.name)
    workdir = built.workdir or DEFAULT_WORKDIR
    return Plan(base=built.base, workdir=workdir, env=dict(built.env)), built


def _seed(plan: Plan, context: Path, repo: Path) -> None:
    """The files a plan copies, where they land under its work dir, in ``repo``."""
    for c in plan.copies:
        matched: list[Path] = []
        for src in c.sources:
            hits = sorted(context.glob(src)) if glob.has_magic(src) else [context / src]
            if not hits or not all(h.exists() for h in hits):
                raise ConfigError(f"environment/Dockerfile line {c.line}: no {src} in environment/")
            matched += hits
        target = repo / posixpath.relpath(c.dest, plan.workdir)
        into = c.into or c.dest == plan.workdir or len(matched) > 1 or target.is_dir()
        for source in matched:
            dest = target / source.name if into and not source.is_dir() else target
            harbor_files.copy_in(source, dest, context)
            if c.chmod is not None:
                for p in [dest, *(dest.rglob("*") if dest.is_dir() else [])]:
                    if p.is_file():
                        p.chmod(c.chmod)


def _setup(plan: Plan, variables: dict[str, str], mapping: dict[str, str]) -> str:
    """The setup script: the task's variables exported, then its ``RUN`` lines in their
    folders ("" when there is neither)."""
    if not variables and not plan.runs:
        return ""
    lines = [
        "# From the Harbor task's environment: its variables, then its RUN lines (each in its",
        "# WORKDIR), run in the session's shell before the agent acts.",
        "set -e",
    ]
    for key, value in variables.items():
        if not _NAME.fullmatch(key):
            raise ConfigError(f"environment/Dockerfile: ENV {key!r} is not a variable name")
        lines.append(f"export {key}={shlex.quote(rewrite(value, mapping))}")
    for run in plan.runs:
        cwd = WORK + run.cwd[len(plan.workdir) :]
        lines.append(f"(cd {shlex.quote(cwd)} && {rewrite(run.command, mapping)})")
    lines.append(f"cd {WORK}")
    return "\n".join(lines) + "\n"


def _reference(
    task: Path, mapping: dict[str, str], variables: dict[str, str], solve: str = "solve.sh"
) -> list[dict[str, str]] | None:
    """The oracle as the reference agent: write ``solution/`` to ``/tmp/harbor/solution``, then
    run ``solve`` (``solve.sh``) in the work dir (None without one)."""
    solution = task / "solution"
    if not (solution / solve).is_file():
        return None
    files = list(harbor_files.walk(solution, task))
    if sum(size for _, size in files) > harbor_files.MAX_FILE_BYTES:
        raise ConfigError(
            f"{task.name}: solution/ comes to more than the import's limit of "
            f"{harbor_files.MAX_FILE_BYTES >> 20} MiB a file (the reference agent carries it "
            "in one file)"
        )
    actions = []
    for path, _ in sorted(files):
        data = harbor_files.read(path)
        with contextlib.suppress(UnicodeDecodeError):  # binary data is kept as it is
            data = rewrite(data.decode("utf-8"), mapping).encode("utf-8")
        target = f"{HARBOR_ROOT}/solution/{path.relative_to(solution).as_posix()}"
        command = write_command(target, data, executable=bool(path.stat().st_mode & 0o111))
        actions.append({"tool": "bash", "command": command})
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in variables.items())
    run = f"bash {HARBOR_ROOT}/solution/{solve}"
    actions.append(
        {
            "tool": "bash",
            "command": f"mkdir -p {HARBOR_ROOT}/logs/agent && cd {WORK} && "
            + (f"env {env}{run}" if env else run),
        }
    )
    return actions


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _metadata(
    task: Path, config: dict[str, Any], agent_s: float, verifier_s: float
) -> dict[str, Any]:
    info, about = config.get("metadata", {}), config.get("task", {})
    description = about.get("description") or info.get("description") or ""
    tags = _strings(info.get("tags")) or _strings(about.get("keywords"))
    meta: dict[str, Any] = {
        "name": task.name,
        "kind": "session",
        "description": description if isinstance(description, str) else "",
        "tags": ["harbor", *(t for t in tags if t != "harbor")],
        "lifetime": agent_s,
        "step_timeout": agent_s,
        "timeout": verifier_s + VERIFIER_GRACE_S,
        # A Harbor task's verifier writes its reward, which may be any number in [0, 1]: that
        # number is the task's reward, as Harbor defines it.
        "scoring": "partial",
    }
    if isinstance(info.get("difficulty"), str):
        meta["difficulty"] = info["difficulty"]
    memory = _memory_mb(config.get("environment", {}), task / "task.toml")
    if memory is not None:
        meta["memory_mb"] = memory
    return meta


def import_harbor_task(
    task_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    bases: Mapping[str, str] | None = None,
    task_format: TaskFormat = HARBOR,
) -> Environment:
    """The Harbor task in ``task_dir`` as a session environment, written as a folder to
    ``out_dir`` (a temporary folder, removed at exit, when None) and loaded from it.

    A task the host sandbox stands in for runs on it; one whose Dockerfile deepgym builds runs
    on its image, built here first (``harbor_image``; ``progress`` gets the build's lines).
    ``ConfigError``, one line, for a task that cannot run here or is not a Harbor task; see the
    module doc. ``bases``: ``FROM`` images this host cannot pull, each to the image in the store
    that stands for it (``deepgym.images.build``); recorded in the environment folder's
    ``image-bases.json`` and in the image's labels.
    """
    task = Path(task_dir)
    _task_folder(task, task_format)
    with staged(out_dir) as (stage, out):
        loaded = _import(task, stage, progress, dict(bases or {}), task_format)
    return loaded if stage == out else load_folder(out)


def _import(
    task: Path,
    out: Path,
    progress: Callable[[str], None] | None,
    bases: dict[str, str],
    form: TaskFormat,
) -> Environment:
    """Write the task ``task`` as a session environment into the empty folder ``out``, and
    load it from there (which checks it whole)."""
    config = _config(task)
    toml = task / "task.toml"
    _network(task, config)
    plan, built = _plan(task, config)
    mapping = path_map(plan.workdir)
    agent_s = _seconds(config, "agent", DEFAULT_AGENT_S, toml)
    verifier_s = _seconds(config, "verifier", DEFAULT_VERIFIER_S, toml)
    toml_env = {k: rewrite(v, mapping) for k, v in _variables(config, "environment", toml).items()}
    meta = _metadata(task, config, agent_s, verifier_s)
    reference = _reference(task, mapping, _variables(config, "solution", toml), form.solve)
    rootfs: Path | None = None
    if built is not None:
        meta["image"] = harbor_image.image_ref(task.name, task / "environment", bases)
        meta["user"] = harbor_image.image_user(built)
        rootfs, image_env = harbor_image.build_image(
            task / "environment", meta["image"], progress, bases
        )
        moved = {k: rewrite(v, mapping) for k, v in image_env.items()}
        variables = {**{k: v for k, v in moved.items() if v != image_env[k]}, **toml_env}
        setup = harbor_image.image_setup(variables, WORK, plan.workdir)
    else:
        variables = {**plan.env, **toml_env}
        setup = _setup(plan, variables, mapping)
    verifier_image = _separate_verifier(
        task, config, plan.workdir, built is not None, bases, progress
    )
    if verifier_image is not None:
        meta["verifier_image"] = verifier_image
    verifier_only = _variables(config, "verifier", toml)
    verifier_env = {**variables, **{k: rewrite(v, mapping) for k, v in verifier_only.items()}}
    if rootfs is not None:
        if harbor_image.seed_work(rootfs, plan.workdir, out / "repo"):
            rewrite_tree(out / "repo", mapping)
            if meta["user"] == "root":
                harbor_image.owner_writable(out / "repo")
        harbor_files.copy_in(task / "environment", out / "image", task)
        if bases:
            (out / "image-bases.json").write_text(json.dumps(bases, indent=2) + "\n")
    elif plan.copies:
        (out / "repo").mkdir()
        _seed(plan, task / "environment", out / "repo")
        rewrite_tree(out / "repo", mapping)
    staged = None
    if (task / "steps").is_dir():
        staged = stage_plan(
            task, config, out, mapping, verifier_env, (agent_s, verifier_s), form.solve
        )
        meta.update(stages=staged.stages, stage_reward=staged.reward, lifetime=staged.agent_s)
        meta["step_timeout"] = staged.longest_agent_s
        meta["timeout"] = staged.longest_verifier_s + VERIFIER_GRACE_S
        if staged.first_setup:
            setup = (setup or "set -e\n") + staged.first_setup + f"cd {WORK}\n"
        reference = staged.reference
        instruction = str(staged.stages[0]["task"])
    else:
        instruction = harbor_files.read(task / "instruction.md").decode("utf-8", "replace")
    (out / "task.md").write_text(rewrite(instruction, mapping), encoding="utf-8")
    (out / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    if setup:
        (out / "setup.sh").write_text(setup)
    shutil.copyfile(VERIFIER, out / "verifier.py")
    if (task / "tests").is_dir():
        harbor_files.copy_in(task / "tests", out / "tests" / "harbor", task)
        rewrite_tree(out / "tests" / "harbor", mapping)
    harbor: dict[str, Any] = {"script": form.script, "timeout": verifier_s, "env": verifier_env}
    if form.parser is not None:
        harbor["parser"] = form.parser
    if rootfs is not None:  # the image's WORKDIR is the work dir, by a link too
        harbor["workdir"] = plan.workdir
    if staged is not None:
        harbor["stages"] = staged.verifier
    (out / "tests" / "harbor.json").write_text(json.dumps(harbor, indent=2) + "\n")
    if reference is not None:
        (out / "reference_agent.json").write_text(json.dumps(reference, indent=2) + "\n")
    return load_folder(out)
