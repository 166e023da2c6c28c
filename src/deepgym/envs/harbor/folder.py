"""A folder of Harbor tasks imported at once: each that can run here, and why each other cannot.

``import_harbor_folder(folder, out_dir)`` imports every subfolder of ``folder`` that holds a
``task.toml`` into ``out_dir/<task>`` (``import_task.import_harbor_task``: on the host
sandbox, or on the task's image, built first). A task that fails leaves nothing in ``out_dir``
and its reason, one line, in the report; the others go on. Only bad input as a whole (not a
folder, no task in it, an ``out_dir`` that is not new or empty) raises ``ConfigError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deepgym.envs.harbor.import_task import import_harbor_task
from deepgym.envs.harbor.tbench import import_terminal_bench_task, is_terminal_bench_task
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.models import Environment

__all__ = ["FolderImport", "import_harbor_folder", "import_task", "task_folders"]


@dataclass
class FolderImport:
    """What a folder's import did: the tasks imported, and each other one's reason."""

    imported: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    label: str = "Harbor"
    """The tasks' format, as the report names it."""

    @property
    def ok(self) -> bool:
        """Whether every task imported."""
        return not self.refused

    def lines(self) -> list[str]:
        """The report: how many imported, then one line per task that did not."""
        total = len(self.imported) + len(self.refused)
        out = [f"imported {len(self.imported)} of {total} {self.label} tasks"]
        out += [f"not imported: {name}: {why}" for name, why in self.refused.items()]
        return out


def task_folders(folder: Path) -> list[Path]:
    """The subfolders of ``folder`` that hold a task: a Harbor task's ``task.toml``, or a
    terminal-bench task's ``task.yaml`` and ``run-tests.sh``; by name."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    return sorted(
        d
        for d in folder.iterdir()
        if d.is_dir() and ((d / "task.toml").is_file() or is_terminal_bench_task(d))
    )


def import_task(
    task: str | Path,
    out_dir: str | Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    bases: Mapping[str, str] | None = None,
) -> Environment:
    """The task in ``task`` as a session environment, whichever its format: terminal-bench's
    (a ``task.yaml``), else Harbor's."""
    folder = Path(task)
    if is_terminal_bench_task(folder) and not (folder / "task.toml").is_file():
        return import_terminal_bench_task(folder, out_dir, progress=progress, bases=bases)
    return import_harbor_task(folder, out_dir, progress=progress, bases=bases)


def _one_line(name: str, exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text.removeprefix(f"{name}: ")


def import_harbor_folder(
    folder: str | Path,
    out_dir: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
    bases: Mapping[str, str] | None = None,
) -> FolderImport:
    """Import each task under ``folder`` (Harbor's or terminal-bench's) into ``out_dir/<task>``
    (``out_dir`` new, or empty), on the stand-ins ``bases`` names; the report of what imported
    and why the others did not."""
    tasks = task_folders(Path(folder))
    if not tasks:
        raise ConfigError(
            f"{folder}: holds no Harbor task (no subfolder with a task.toml) and no "
            "terminal-bench task (task.yaml)"
        )
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out}: exists and is not an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    tbench = [t for t in tasks if not (t / "task.toml").is_file()]
    label = "terminal-bench" if len(tbench) == len(tasks) else "Harbor" if not tbench else ""
    report = FolderImport(label=label or "Harbor and terminal-bench")
    for task in tasks:
        if progress is not None:
            progress(f"{task.name}: importing")
        try:
            import_task(task, out / task.name, progress=progress, bases=bases)
        except DeepGymError as exc:
            report.refused[task.name] = _one_line(task.name, exc)  # it left nothing in out
        else:
            report.imported.append(task.name)
    return report
