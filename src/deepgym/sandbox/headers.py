"""Precompiled headers for compiled answers: ``<bits/stdc++.h>`` parsed once, not per answer.

Most of a C++ contest answer's compile is g++ parsing ``<bits/stdc++.h>`` (2.0 s of 2.35 s,
measured: ``benchmarks/languages.py``). A language whose ``Language.precompiled`` names such a
header gets it precompiled once per toolchain and compiler command line, and every later build
finds it (``-I`` a folder holding ``bits/stdc++.h.gch``, which g++ looks for before the header
itself).

Rules (g++'s own, and ours):

- A precompiled header is used only with the flags it was made with (``-std``, ``-O``: g++ checks
  them, and the macros they define). So there is one per command line: ``flags`` is the compile
  line without its source, output and libraries, the same words the build uses, and a
  ``dialect``'s other line gets its own.
- It is built inside the sandbox's own view of the toolchain: a ``build`` sandbox like an
  answer's (``ProgramCache.build_header``), from a source of ours (``#include <header>``), never
  an answer's, and read-only in every build that uses it (``policy``'s ``precompiled_headers``).
- Where: ``$DEEPGYM_PCH_DIR``, else ``$DEEPGYM_HOME/pch``: it outlives the process (100 MB and a
  few seconds of CPU each, once per machine), one folder per key.
- Invalidation: the key is the language, the toolchain's fingerprint (its version line and the
  paths of its programs) and the flags; a new compiler gets a new key and a new build. A header
  that is stale all the same (a compiler replaced under the same version line) is refused by
  g++ itself, which then parses the header as if there were none: slower, never different.
- It never holds an answer back: the first build that could use it starts it in the background
  (one per key per process, with the lowest CPU priority), and builds go without it until it is
  there. One that fails is not tried again by this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from deepgym import languages
from deepgym.home import deepgym_home

__all__ = ["PCH_DIR_VAR", "Headers", "flags", "headers_root"]

PCH_DIR_VAR = "DEEPGYM_PCH_DIR"
IN_SANDBOX = "/pch"
"""Where a build sandbox finds the folder of its precompiled header (``policy``)."""
SOURCE = "pch.h"
ARTIFACT = "pch.h.gch"
BUILD_TIMEOUT_S = 300.0
"""The CPU time a header's build may take (g++ takes a few seconds)."""

Build = Callable[[languages.Language, dict[str, object], str], Awaitable[bytes | None]]
"""Builds ``spec`` from ``source`` in a build sandbox: the artifact, or None."""


_BUILDING: dict[Path, asyncio.Future[None]] = {}
"""The builds under way in this process, by folder (every backend's)."""
_FAILED: set[Path] = set()
"""The folders whose build failed in this process: not tried again."""


def headers_root() -> Path:
    """Where precompiled headers are kept (``$DEEPGYM_PCH_DIR``, else ``$DEEPGYM_HOME/pch``)."""
    chosen = os.environ.get(PCH_DIR_VAR)
    return Path(chosen) if chosen else deepgym_home() / "pch"


def flags(argv: list[str], source: str) -> list[str]:
    """The flags of a compile line ``argv`` that a precompiled header must be made with: all
    but the compiler, the source, the output (``-o X``) and the libraries (``-l``)."""
    out: list[str] = []
    words = iter(argv[1:])
    for word in words:
        if word == "-o":
            next(words, None)
        elif word != source and not word.startswith("-l"):
            out.append(word)
    return out


class Headers:
    """One backend's view of the precompiled headers under ``root`` (see the module)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = headers_root() if root is None else root
        self._mine: set[asyncio.Future[None]] = set()
        """The builds this one started (``close`` cancels them)."""

    def folder(self, lang: languages.Language, tc: languages.Toolchain, argv: list[str]) -> Path:
        """The folder of ``lang``'s precompiled header for the compile line ``argv``."""
        assert lang.precompiled is not None
        header, _ = lang.precompiled
        text = json.dumps([lang.name, tc.fingerprint, flags(argv, lang.source), header])
        return self.root / f"{lang.name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def ready(
        self, lang: languages.Language, tc: languages.Toolchain, argv: list[str], build: Build
    ) -> Path | None:
        """The folder a build of ``argv`` can use (``-I`` it), where the header is built; else
        None, having started its build (``build``) unless one is under way or failed."""
        if lang.precompiled is None:
            return None
        header, _ = lang.precompiled
        folder = self.folder(lang, tc, argv)
        if (folder / f"{header}.gch").is_file():
            return folder
        if folder not in _BUILDING and folder not in _FAILED:
            task = asyncio.ensure_future(self._build(lang, argv, folder, build))
            _BUILDING[folder] = task
            self._mine.add(task)
            task.add_done_callback(lambda _: _BUILDING.pop(folder, None))
            task.add_done_callback(self._mine.discard)
        return None

    async def close(self) -> None:
        """Cancel the builds this one started and wait for their end (their sandboxes too)."""
        for task in list(self._mine):
            task.cancel()
        if self._mine:
            await asyncio.gather(*self._mine, return_exceptions=True)

    @staticmethod
    def spec(lang: languages.Language, argv: list[str]) -> tuple[dict[str, object], str]:
        """The build spec of ``lang``'s header for ``argv`` (``judge.build``), and its source."""
        assert lang.precompiled is not None
        header, kind = lang.precompiled
        line = [argv[0], *flags(argv, lang.source), "-x", kind, SOURCE, "-o", ARTIFACT]
        spec: dict[str, object] = {
            "source": SOURCE,
            "argv": line,
            "artifact": ARTIFACT,
            "pack": None,
            "env": dict(lang.build_env),
            "crash_codes": list(lang.crash_exit_codes),
        }
        return spec, f"#include <{header}>\n"

    async def _build(
        self, lang: languages.Language, argv: list[str], folder: Path, build: Build
    ) -> None:
        assert lang.precompiled is not None
        header, _ = lang.precompiled
        spec, source = self.spec(lang, argv)
        try:
            data = await build(lang, spec, source)
        except Exception:  # a header is a speed-up: its failure costs the builds nothing
            data = None
        if not data:
            _FAILED.add(folder)
            return
        target = folder / f"{header}.gch"
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            await asyncio.to_thread(_write, part, target, data)
        except OSError:
            _FAILED.add(folder)
            with contextlib.suppress(OSError):
                part.unlink()


def _write(part: Path, target: Path, data: bytes) -> None:
    """``data`` at ``target``, whole or not at all (written aside, then renamed)."""
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(data)
    part.replace(target)
