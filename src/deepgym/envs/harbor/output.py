"""What an import or an export writes: a folder, whole or not at all (``staged``), and a file,
by a bash command (``write_command``: the reference agent's actions and ``solve.sh``)."""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import posixpath
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from deepgym.exceptions import ConfigError

__all__ = ["staged", "write_command"]


def _delimiter(text: str, tag: str) -> str:
    lines = set(text.splitlines())
    while tag in lines:
        tag += "_"
    return tag


def write_command(path: str, data: bytes, executable: bool = False) -> str:
    """A bash command that writes ``data`` to ``path`` exactly (a here-document; base64 for
    bytes that are not newline-terminated UTF-8 text)."""
    out = f"mkdir -p {shlex.quote(posixpath.dirname(path))} && "
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.endswith("\n"):
        tag = _delimiter(text, "HARBOR_EOF")
        out += f"cat > {shlex.quote(path)} <<'{tag}'\n{text}{tag}"
    else:
        encoded = base64.encodebytes(data).decode()
        out += f"base64 -d > {shlex.quote(path)} <<'HARBOR_EOF'\n{encoded}HARBOR_EOF"
    return out + (f"\nchmod +x {shlex.quote(path)}" if executable else "")


@contextlib.contextmanager
def staged(out_dir: str | Path | None) -> Iterator[tuple[Path, Path]]:
    """``(stage, out)``: an empty folder to write into, and the folder it becomes.

    ``out_dir`` must be missing or an empty folder. The stage is a new hidden folder beside it,
    renamed onto it when the block ends without an exception and removed when it raises: a
    refused import or export leaves nothing in ``out_dir`` (nor ``out_dir``, nor the folders
    made to hold it, where they were missing). With no ``out_dir``, the stage is a temporary
    folder, removed when the interpreter exits.
    """
    if out_dir is None:
        stage = out = Path(tempfile.mkdtemp(prefix="harbor-import-"))
        atexit.register(shutil.rmtree, stage, True)
        made: list[Path] = []
    else:
        out = Path(out_dir)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"{out}: exists and is not an empty folder")
        made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = out.parent / f".{out.name}.partial-{secrets.token_hex(4)}"
        stage.mkdir()
    try:
        yield stage, out
        if stage != out:
            os.rename(stage, out)  # replaces an empty out_dir
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        for folder in made:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
