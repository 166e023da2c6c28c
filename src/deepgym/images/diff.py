"""A build step's layer: what changed in a root between a snapshot and now, as an OCI layer.

``snapshot(root)`` records each path's inode and change time (``ctime``, which no program can
set back); after the step, ``write_layer`` walks the root again and writes, as a gzip'd tar,
every path that is new or whose inode or ``ctime`` moved (a directory as its own entry, not its
contents), and an OCI whiteout (``.wh.NAME``) for the top of each subtree that is gone. Hard
links among the written files stay links. The layer's ``digest`` (of the gzip'd bytes) and
``diff_id`` (of the tar) are computed while it is written.

Paths a build's sandbox mounts over (``MOUNTED``) never enter a layer.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["MOUNTED", "HashingWriter", "Layer", "snapshot", "write_layer"]

MOUNTED = frozenset({"proc", "sys", "dev", "tmp", "run/deepgym", "etc/resolv.conf"})
"""Paths (relative to the root) the build sandbox mounts; their contents are the host's."""

Snapshot = dict[str, tuple[int, int]]


@dataclass(frozen=True)
class Layer:
    """A written layer: its blob's digest and size, and its uncompressed tar's digest."""

    digest: str
    size: int
    diff_id: str
    entries: int


def _walk(root: Path) -> dict[str, os.stat_result]:
    out: dict[str, os.stat_result] = {}
    for top, dirs, files in os.walk(root, followlinks=False):
        rel_top = os.path.relpath(top, root)
        kept = []
        for name in sorted(dirs):
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if rel in MOUNTED:
                continue
            out[rel] = os.lstat(os.path.join(top, name))
            if not os.path.islink(os.path.join(top, name)):
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if rel not in MOUNTED:
                out[rel] = os.lstat(os.path.join(top, name))
    return out


def snapshot(root: Path) -> Snapshot:
    """Each path under ``root`` (relative, ``MOUNTED`` left out) -> (inode, ctime in ns)."""
    return {rel: _key(st) for rel, st in _walk(root).items()}


class _Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...
    def flush(self) -> None: ...


class HashingWriter:
    """A write-only file that hashes and counts what passes through it to ``inner``."""

    def __init__(self, inner: _Writable) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:  # noqa: D102
        self.sha.update(data)
        self.size += len(data)
        return self.inner.write(data)

    def flush(self) -> None:  # noqa: D102
        self.inner.flush()


def _gone(before: Snapshot, after: dict[str, os.stat_result]) -> list[str]:
    """The top path of each subtree in ``before`` that ``after`` lacks (under a folder that is
    still one: a folder replaced by a file is in the layer as the file)."""
    out = []
    for rel in sorted(before):
        if rel in after:
            continue
        parent = rel.rpartition("/")[0]
        if not parent or (parent in after and stat.S_ISDIR(after[parent].st_mode)):
            out.append(rel)
    return out


def _key(st: os.stat_result) -> tuple[int, int]:
    return (st.st_ino, st.st_ctime_ns)


def write_layer(root: Path, before: Snapshot, out: Path) -> Layer:
    """Write the layer of what changed under ``root`` since ``before`` to the file ``out``."""
    now = _walk(root)
    changed = [rel for rel, st in now.items() if before.get(rel) != _key(st)]
    entries = 0
    with out.open("wb") as raw:
        outer = HashingWriter(raw)
        with gzip.GzipFile(fileobj=outer, mode="wb", compresslevel=1, mtime=0) as gz:
            inner = HashingWriter(gz)
            with tarfile.open(fileobj=inner, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for rel in changed:
                    tar.add(root / rel, arcname=rel, recursive=False)
                    entries += 1
                for rel in _gone(before, now):
                    parent, _, name = rel.rpartition("/")
                    info = tarfile.TarInfo(f"{parent}/.wh.{name}" if parent else f".wh.{name}")
                    tar.addfile(info)
                    entries += 1
    return Layer(
        f"sha256:{outer.sha.hexdigest()}", outer.size, f"sha256:{inner.sha.hexdigest()}", entries
    )
