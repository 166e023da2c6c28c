"""What an agent changed in its work dir: a unified diff from the environment's seed files to a
snapshot of the work dir. Pure: it reads the two trees and nothing else.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DIFF_CAP", "work_diff"]

DIFF_CAP = 256 * 1024
"""Characters of a work dir's diff that are kept."""


def _files(root: Path | None) -> dict[str, Path]:
    if root is None or not root.is_dir():
        return {}
    return {
        str(p.relative_to(root)): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
    }


def work_diff(seed: Path | None, work: Path) -> str:
    """What the agent changed: a unified diff from the seed files to the work dir (binary files
    named only; an empty file added or removed, by its header), capped at ``DIFF_CAP``
    characters."""
    import difflib

    before, after = _files(seed), _files(work)
    out: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        a = before[name].read_bytes() if name in before else b""
        b = after[name].read_bytes() if name in after else b""
        if a == b and (name in before) == (name in after):
            continue
        try:
            a_text, b_text = a.decode(), b.decode()
        except UnicodeDecodeError:
            out.append(f"Binary files a/{name} and b/{name} differ\n")
            continue
        a_name = f"a/{name}" if name in before else "/dev/null"
        b_name = f"b/{name}" if name in after else "/dev/null"
        lines = list(
            difflib.unified_diff(
                a_text.splitlines(keepends=True), b_text.splitlines(keepends=True), a_name, b_name
            )
        )
        # an empty file added or removed has no hunk: its header alone names it
        out.extend(lines or [f"--- {a_name}\n", f"+++ {b_name}\n"])
        if sum(map(len, out)) > DIFF_CAP:
            break
    text = "".join(line if line.endswith("\n") else line + "\n" for line in out)
    return text if len(text) <= DIFF_CAP else text[:DIFF_CAP] + "\n... (cut)\n"
