"""``deepgym harbor import`` and ``deepgym harbor export``: Harbor task folders.

``import TASK_DIR OUT_DIR [--base FROM=LOCAL]`` writes the Harbor or terminal-bench task in
TASK_DIR as a session environment folder (building its image first where it needs one, on the
stand-ins ``--base`` names), or each task of a folder of tasks, with a report (exit 1 when some
did not import);
``export ENV OUT_DIR`` writes a session environment (a name or a folder) in Harbor's layout.
Both are ``deepgym.envs.harbor``; a task that cannot run here, or any other bad input, is one
``Error: ...`` line and exit 2 (the group translates the ``ConfigError``).
"""

from __future__ import annotations

from pathlib import Path

import click

from deepgym.cli.common import load_env
from deepgym.envs.harbor import export_harbor_task, import_harbor_folder, import_task
from deepgym.envs.harbor.tbench import is_terminal_bench_task

__all__ = ["harbor_cmd"]


@click.group("harbor")
def harbor_cmd() -> None:
    """Import Harbor tasks as session environments, or export session environments to
    Harbor's task layout."""


@harbor_cmd.command("import")
@click.argument("task_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option(
    "--base",
    "bases",
    multiple=True,
    metavar="FROM=LOCAL",
    help="Build on LOCAL, an image in the store, where a Dockerfile says FROM (a base this "
    "host cannot pull: buildpack-deps:jammy=local/buildpack-deps:jammy). Repeatable.",
)
def import_cmd(task_dir: Path, out_dir: Path, bases: tuple[str, ...]) -> None:
    """Write the task in TASK_DIR (Harbor's task.toml layout, or terminal-bench's task.yaml)
    as a session environment folder OUT_DIR (new, or empty). A task whose Dockerfile needs an
    image has it built first (progress on stderr).

    TASK_DIR may instead be a folder of tasks: each is imported into OUT_DIR/<task>, and the
    command says how many imported and why each other did not. Exit 0 when all imported, 1
    when some did not, 2 for bad input."""
    from deepgym.images.build import parse_bases

    def say(line: str) -> None:
        click.echo(line, err=True)

    stand_ins = parse_bases(bases)
    single = (task_dir / "task.toml").is_file() or is_terminal_bench_task(task_dir)
    if task_dir.is_dir() and not single:
        report = import_harbor_folder(task_dir, out_dir, progress=say, bases=stand_ins)
        for line in report.lines():
            click.echo(line)
        if report.imported:
            click.echo(f"check them with: deepgym check {out_dir}/<task>")
        if not report.ok:
            raise SystemExit(1)
        return
    env = import_task(task_dir, out_dir, progress=say, bases=stand_ins)
    on = f" on the image {env.image}" if env.image else ""
    click.echo(f"imported {task_dir} as the session environment {env.name}{on} in {out_dir}")
    click.echo(f"check it with: deepgym check {out_dir}")


@harbor_cmd.command("export")
@click.argument("env")
@click.argument("out_dir", type=click.Path(path_type=Path))
def export_cmd(env: str, out_dir: Path) -> None:
    """Write the session environment ENV (a name, such as agent/fix_add, or a folder) in
    Harbor's task layout to OUT_DIR (new, or empty)."""
    environment = load_env(env)
    export_harbor_task(environment, out_dir)
    click.echo(f"exported {environment.name} as a Harbor task in {out_dir}")
