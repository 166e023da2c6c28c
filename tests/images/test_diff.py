"""A build step's layer (``deepgym.images.diff``): what changed, and whiteouts for what went."""

from __future__ import annotations

import gzip
import hashlib
import os
import tarfile
from pathlib import Path

from deepgym.images.diff import snapshot, write_layer


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for rel, text in {
        "etc/os-release": "debian\n",
        "etc/keep": "same\n",
        "usr/share/doc/a/README": "a\n",
        "usr/share/doc/a/NEWS": "a\n",
        "var/lib/x": "x\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "tmp").mkdir()
    return root


def _entries(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def test_the_layer_holds_what_changed_and_whiteouts_for_what_went(tmp_path: Path) -> None:
    root = _root(tmp_path)
    before = snapshot(root)
    (root / "etc/os-release").write_text("changed\n")  # in place: same inode, new ctime
    (root / "usr/local/bin").mkdir(parents=True)
    (root / "usr/local/bin/tool").write_text("#!/bin/sh\n")
    os.link(root / "usr/local/bin/tool", root / "usr/local/bin/tool2")
    for name in ("README", "NEWS"):
        (root / "usr/share/doc/a" / name).unlink()
    (root / "usr/share/doc/a").rmdir()
    (root / "var/lib/x").unlink()
    (root / "tmp/scratch").write_text("mounted over in a build: never in a layer\n")
    layer = write_layer(root, before, tmp_path / "layer.tar.gz")
    got = _entries(tmp_path / "layer.tar.gz")
    assert "etc/os-release" in got and "etc/keep" not in got
    assert {"usr/local", "usr/local/bin", "usr/local/bin/tool"} <= set(got)
    assert got["usr/local/bin/tool2"].islnk()  # a hard link stays one
    assert "usr/share/doc/.wh.a" in got and "usr/share/doc/a/.wh.README" not in got
    assert "var/lib/.wh.x" in got
    assert not any(name.startswith("tmp/") for name in got)
    data = (tmp_path / "layer.tar.gz").read_bytes()
    assert layer.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert layer.diff_id == "sha256:" + hashlib.sha256(gzip.decompress(data)).hexdigest()
    assert layer.size == len(data) and layer.entries == len(got)


def test_a_step_that_changes_nothing_gives_an_empty_layer(tmp_path: Path) -> None:
    root = _root(tmp_path)
    before = snapshot(root)
    layer = write_layer(root, before, tmp_path / "layer.tar.gz")
    assert layer.entries == 0 and _entries(tmp_path / "layer.tar.gz") == {}


def test_a_folder_replaced_by_a_file_is_the_file(tmp_path: Path) -> None:
    root = _root(tmp_path)
    before = snapshot(root)
    for name in ("README", "NEWS"):
        (root / "usr/share/doc/a" / name).unlink()
    (root / "usr/share/doc/a").rmdir()
    (root / "usr/share/doc/a").write_text("now a file\n")
    write_layer(root, before, tmp_path / "layer.tar.gz")
    got = _entries(tmp_path / "layer.tar.gz")
    assert got["usr/share/doc/a"].isfile()
    assert not any(".wh." in name for name in got)
