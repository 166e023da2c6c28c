"""A folder of Harbor tasks imported at once: each that can run here, and why each other cannot.

``import_harbor_folder(folder, out_dir)`` imports every subfolder of ``folder`` that holds a
``task.toml`` into ``out_dir/<task>`` (``import_task.import_harbor_task``: on the host
sandbox, or on the task's image, built first). A task that fails leaves nothing in ``out_dir``
and its reason, one line, in the report; the others go on. Only bad input as a whole (not a
folder, no task in it, an ``out_dir`` that is not new or empty) raises ``ConfigError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deepgym.envs.harbor.import_task import import_harbor_task
from deepgym.exceptions import ConfigError, DeepGymError

__all__ = ["FolderImport", "import_harbor_folder", "task_folders"]


@dataclass
class FolderImport:
    """What a folder's import did: the tasks imported, and each other one's reason."""

    imported: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every task imported."""
        return not self.refused

    def lines(self) -> list[str]:
        """The report: how many imported, then one line per task that did not."""
        total = len(self.imported) + len(self.refused)
        out = [f"imported {len(self.imported)} of {total} Harbor tasks"]
        out += [f"not imported: {name}: {why}" for name, why in self.refused.items()]
        return out


def task_folders(folder: Path) -> list[Path]:
    """The subfolders of ``folder`` that hold a ``task.toml``, by name."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    return sorted(d for d in folder.iterdir() if d.is_dir() and (d / "task.toml").is_file())


def _one_line(name: str, exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text.removeprefix(f"{name}: ")


def import_harbor_folder(
    folder: str | Path,
    out_dir: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> FolderImport:
    """Import each Harbor task under ``folder`` into ``out_dir/<task>`` (``out_dir`` new, or
    empty); the report of what imported and why the others did not."""
    tasks = task_folders(Path(folder))
    if not tasks:
        raise ConfigError(f"{folder}: holds no Harbor task (no subfolder with a task.toml)")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out}: exists and is not an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    report = FolderImport()
    for task in tasks:
        if progress is not None:
            progress(f"{task.name}: importing")
        try:
            import_harbor_task(task, out / task.name, progress=progress)
        except DeepGymError as exc:
            report.refused[task.name] = _one_line(task.name, exc)  # it left nothing in out
        else:
            report.imported.append(task.name)
    return report
