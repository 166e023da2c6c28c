"""Harbor's paths, and where a session has them.

Tasks hard-code paths of Harbor's container; the sandbox's root is read-only, and only ``/work``
and ``/tmp`` are writable. So the import rewrites, in ``instruction.md``, in the ``RUN`` lines
and variables, and in every UTF-8 file of the work dir, ``tests/`` and ``solution/``, a path
starting with one of these (``path_map``): ``/logs`` -> ``/tmp/harbor/logs``, ``/tests`` ->
``/tmp/harbor/tests``, ``/solution`` -> ``/tmp/harbor/solution``, the ``WORKDIR`` -> ``/work``.
"""

from __future__ import annotations

import re
from pathlib import Path

from deepgym.envs.harbor import files as harbor_files

__all__ = ["HARBOR_ROOT", "WORK", "path_map", "rewrite", "rewrite_tree"]

HARBOR_ROOT = "/tmp/harbor"
"""Where Harbor's own paths (``/logs``, ``/tests``, ``/solution``) are in a session."""
WORK = "/work"
"""A session's work dir."""


def path_map(workdir: str) -> dict[str, str]:
    """Harbor's fixed paths, and the task's ``workdir``, to where a session has them."""
    out = {
        "/logs": f"{HARBOR_ROOT}/logs",
        "/tests": f"{HARBOR_ROOT}/tests",
        "/solution": f"{HARBOR_ROOT}/solution",
    }
    if workdir != WORK:
        out[workdir] = WORK
    return out


def rewrite(text: str, mapping: dict[str, str]) -> str:
    """``text`` with each path that starts with a key of ``mapping`` (the key whole, then the
    end of the path or a ``/``) starting with its value instead."""
    keys = sorted(mapping, key=len, reverse=True)
    pattern = re.compile(
        r"(?:(?<=:-)|(?<![\w.~$/})-]))("  # a shell default (${APP_DIR:-/app}) is a path too
        + "|".join(re.escape(k) for k in keys)
        + r")(?![\w.-])"
    )
    return pattern.sub(lambda m: mapping[m[1]], text)


def rewrite_tree(folder: Path, mapping: dict[str, str]) -> None:
    """``rewrite`` over every UTF-8 file under ``folder`` (read within the import's limits;
    links and binary files are kept as they are)."""
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = harbor_files.read(path).decode("utf-8")
        except UnicodeDecodeError:
            continue  # binary data is kept as it is
        new = rewrite(text, mapping)
        if new != text:
            path.write_text(new, encoding="utf-8")
