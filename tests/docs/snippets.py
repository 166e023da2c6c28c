"""Code blocks of the Markdown docs: find them, and run the Python ones.

A block is a fenced block (``` or ~~~, three or more, indented or not) with its info string's
first word as its language. ``run`` executes a Python block as a script of its own, in a fresh
interpreter and a working directory the caller gives, so one snippet cannot lean on another's
names or leftovers, and whatever it starts (sandboxes, a server) ends with its process. The
script is padded with blank lines so that a traceback's line numbers are the Markdown file's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*)$")
PYTHON = frozenset({"python", "py"})


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language ('' when the fence names none), its code."""

    path: Path
    line: int
    """The 1-based line of the block's first code line."""
    language: str
    code: str

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of a Markdown file, in order; an unclosed fence is a ValueError."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        language = m["info"].split()[0].lower() if m["info"].strip() else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        else:
            raise ValueError(f"{path}:{i + 1}: the fence opened here is never closed")
        yield Block(path, i + 2, language, "\n".join(body) + "\n")
        i = j + 1


def script(block: Block) -> str:
    """The block's code, after blank lines that put its first line at the block's own line."""
    return "\n" * (block.line - 1) + block.code


def run(block: Block, cwd: Path, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    """Run a Python block in a fresh interpreter in ``cwd``; the completed process."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", block.where) + ".py"
    file = cwd / name
    file.write_text(script(block), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(file)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
