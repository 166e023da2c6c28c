"""Processes as ``/proc`` lists them, for tests that check what a sandbox leaves behind."""

from __future__ import annotations

import os


def parent(pid: int) -> int | None:
    """The parent of ``pid``; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return int(raw[raw.rfind(b")") + 2 :].split()[1])


def children() -> dict[int, list[int]]:
    """Each parent pid with the pids of its children."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (ppid := parent(int(name))) is not None:
            out.setdefault(ppid, []).append(int(name))
    return out


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``."""
    tree = children()
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out
