"""The runtimes the tests run answers in, built once per checkout and Python.

``ROOT``: ``$DEEPGYM_RUNTIMES`` where it is set, else ``build/runtimes`` in the checkout (where
``make pytest`` builds the scientific runtime before the tests). ``scientific()`` builds it
there if it is not yet (about a minute, from the package index), as a run would at its first use.
``fake_scientific(root)`` makes a disposable stand-in: a folder under ``root`` that the store
takes for the scientific runtime, holding only a small ``numpy`` package, for the attacks that
try to write it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from deepgym.runtimes import MANIFEST, SITE, RuntimeStore

ROOT = Path(
    os.environ.get("DEEPGYM_RUNTIMES") or Path(__file__).resolve().parents[1] / "build" / "runtimes"
)
CANARY = "the runtime as it was built\n"
"""The text of the stand-in's ``numpy/canary.txt``: still there, unchanged, after any attack."""


def scientific() -> Path:
    """The folder of built runtimes, the scientific one in it (built here if need be)."""
    built = RuntimeStore(ROOT).build("scientific")
    assert built is not None
    return ROOT


def fake_scientific(root: Path) -> Path:
    """A disposable stand-in for the scientific runtime under ``root`` (its folder): the store
    finds it by its name and manifest; its packages are one module, ``numpy``."""
    folder = RuntimeStore(root).folder("scientific")
    package = folder / SITE / "numpy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = 'stand-in'\n")
    (package / "canary.txt").write_text(CANARY)
    manifest = {"key": folder.name, "name": "scientific", "packages": {"numpy": "stand-in"}}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return folder


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under ``folder`` with its mode and (for a file) its bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        out[str(path.relative_to(folder))] = (st.st_mode, data)
    return out
