"""Reading a Harbor task's files within limits: what the import reads and copies.

A task folder is untrusted input: a 300 MB ``instruction.md``, a sparse 1 TB file in ``tests/``,
a named pipe in ``environment/`` or a link to the host's files must be refused before the import
reads it, not after it filled the memory or the disk. So, for every file the import reads or
copies (``task.toml``, ``instruction.md``, ``environment/``, ``tests/``, ``solution/``, and the
work dir an image seeds):

- ``inventory`` walks the files before anything is read: each is a folder, a regular file or a
  link that stays inside the task folder (followed; a link that loops or leads to nothing is
  refused); each file is at most ``MAX_FILE_BYTES`` and all of them together at most
  ``MAX_TASK_BYTES`` (their sizes as ``stat`` gives them: a sparse file counts whole);
- ``read`` and ``copy_file`` then read at most ``MAX_FILE_BYTES`` of a file, in chunks for a
  copy, and refuse a file that has grown past it or is not a regular file by then.

Every refusal is one ``ConfigError`` line naming the file and the limit.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from deepgym.exceptions import ConfigError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_TASK_BYTES",
    "checked",
    "copy_file",
    "copy_in",
    "inventory",
    "read",
    "walk",
]

MAX_FILE_BYTES = 64 * 2**20
"""The most bytes of one file the import reads or copies. The instruction becomes the task's
text (at most ``validation.MAX_TEXT_CHARS`` characters), and the solution, which the reference
agent carries in one file, counts as one file."""
MAX_TASK_BYTES = 512 * 2**20
"""The most bytes of all the files an import reads or copies from a task folder together, and
apart from them of the work dir its image seeds."""
_CHUNK = 1 << 20


def _mib(size: int) -> str:
    """``size`` in MiB where it is a whole number of them, else in bytes."""
    return f"{size >> 20} MiB" if size and not size % 2**20 else f"{size} bytes"


def walk(source: Path, root: Path, *, follow: bool = True) -> Iterator[tuple[Path, int]]:
    """Each regular file under ``source`` (``source`` itself when it is one) and its size, in
    path order. With ``follow``, links are followed and must stay inside ``root``; without,
    they are passed over (copied as links). ``ConfigError`` for anything else: a device, a
    named pipe, a socket, a link out of ``root``, to nothing, or back to a folder above it."""
    top = root.resolve()
    stack: list[tuple[Path, frozenset[tuple[int, int]]]] = [(source, frozenset())]
    while stack:
        path, above = stack.pop()
        try:
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                if not follow:
                    continue
                if not path.resolve().is_relative_to(top):
                    raise ConfigError(f"{path}: a link out of the task folder {root}")
                info = path.stat()
        except FileNotFoundError:
            raise ConfigError(f"{path}: a link to nothing") from None
        if stat.S_ISREG(info.st_mode):
            yield path, info.st_size
        elif stat.S_ISDIR(info.st_mode):
            here = (info.st_dev, info.st_ino)
            if here in above:
                raise ConfigError(f"{path}: a link back to a folder above it")
            children = sorted(path.iterdir(), reverse=True)
            stack += [(child, above | {here}) for child in children]
        else:
            raise ConfigError(f"{path}: not a regular file, a folder or a link")


def checked(source: Path, root: Path) -> None:
    """``ConfigError`` where ``walk`` would refuse something under ``source``."""
    for _ in walk(source, root):
        pass


def inventory(
    sources: list[Path], root: Path, *, follow: bool = True, label: str | None = None
) -> int:
    """The bytes of every file under ``sources`` (those that exist), after checking that each
    is at most ``MAX_FILE_BYTES`` and all together at most ``MAX_TASK_BYTES`` (``walk``'s
    refusals too); nothing is read. Messages name a file by ``label`` (``root``'s name by
    default) and its path under ``root``."""
    total = 0
    for source in sources:
        if not os.path.lexists(source):
            continue
        for path, size in walk(source, root, follow=follow):
            if size > MAX_FILE_BYTES:
                raise ConfigError(
                    f"{_name(path, root, label)} is {_mib(size)}, past the import's limit of "
                    f"{_mib(MAX_FILE_BYTES)} a file"
                )
            total += size
            if total > MAX_TASK_BYTES:
                raise ConfigError(
                    f"{_name(root, root, label)}: its files come to more than the import's "
                    f"limit of {_mib(MAX_TASK_BYTES)} a task (at {_rel(path, root)})"
                )
    return total


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _name(path: Path, root: Path, label: str | None = None) -> str:
    """``path`` as ``label`` (the task folder's name) and its path under ``root``."""
    head = label or root.name
    return head if path == root else f"{head}: {_rel(path, root)}"


def _open(path: Path) -> int:
    """A descriptor for reading the regular file ``path`` (never blocking on a named pipe)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"{path}: not a regular file")
    os.set_blocking(fd, True)
    return fd


def _grown(path: Path) -> ConfigError:
    return ConfigError(f"{path}: more than the import's limit of {_mib(MAX_FILE_BYTES)} a file")


def read(path: Path) -> bytes:
    """The bytes of the regular file ``path``; ``ConfigError`` past ``MAX_FILE_BYTES``."""
    with os.fdopen(_open(path), "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _grown(path)
    return data


def copy_file(source: str | Path, target: str | Path) -> None:
    """Copy the regular file ``source`` to ``target`` (its mode and times too), in chunks;
    ``ConfigError`` past ``MAX_FILE_BYTES``. ``shutil.copytree``'s ``copy_function``."""
    copied = 0
    with os.fdopen(_open(Path(source)), "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(_CHUNK):
            copied += len(chunk)
            if copied > MAX_FILE_BYTES:
                raise _grown(Path(source))
            dst.write(chunk)
    shutil.copystat(source, target)


def copy_in(source: Path, target: Path, root: Path) -> None:
    """Copy ``source`` (a file, or a folder's contents) to ``target``, links followed, after
    checking that ``walk`` takes it; each file with ``copy_file``."""
    checked(source, root)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, copy_function=copy_file)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_file(source, target)
