"""``deepgym image pull|build|load|list|rm|prune`` against a real registry on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym.cli import cli
from deepgym.images.distribution import push
from tests.images.registry_fixtures import (
    LocalRegistry,
    layer_from_rootfs,
    registry,
    rootfs_tar,
    write_image,
)

__all__ = ["registry", "rootfs_tar"]  # fixtures, imported by name


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _layout(tmp_path: Path, rootfs: Path) -> tuple[Path, str]:
    layout = tmp_path / "layout"
    desc = write_image(layout, layer_from_rootfs(rootfs))
    top = {k: desc[k] for k in ("mediaType", "digest", "size")}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return layout, desc["digest"]


def _ok(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_pull_list_rm_prune(
    home: Path, registry: LocalRegistry, rootfs_tar: Path, tmp_path: Path
) -> None:
    layout, digest = _layout(tmp_path, rootfs_tar)
    push(layout, f"{registry.host}/cli/busybox:1", digest)
    out = _ok(["image", "pull", f"{registry.host}/cli/busybox:1"])
    assert digest in out and "fetched" in out
    out = _ok(["image", "pull", "cli/busybox:1", "--registry", registry.host])
    assert digest in out and "(0 B fetched)" in out  # every blob was there already
    listing = _ok(["image", "list"])
    assert f"{registry.host}/cli/busybox:1" in listing and "cli/busybox:1" in listing
    assert "2 images" in listing
    _ok(["image", "rm", f"{registry.host}/cli/busybox:1"])
    _ok(["image", "rm", "cli/busybox:1"])
    freed = _ok(["image", "prune"])
    assert freed.startswith("freed ") and "freed 0 B" not in freed
    assert "0 images" in _ok(["image", "list"])


def test_load_and_build(home: Path, rootfs_tar: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("build steps map ids directly only as root")
    layout, digest = _layout(tmp_path, rootfs_tar)
    assert digest in _ok(["image", "load", str(layout), "-t", "bb:1"])
    ctx = tmp_path / "task"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM bb:1\nRUN echo built > /built\n")
    out = _ok(["image", "build", str(ctx), "-t", "task:1"])
    assert "step 1/1: RUN echo built > /built" in out and "built task:1" in out
    assert "1 cached" in _ok(["image", "build", str(ctx), "-t", "task:1"])
    for flags in (["-t", "Task:1"], ["--step-timeout", "0"]):
        bad = CliRunner().invoke(cli, ["image", "build", str(ctx), *flags])
        assert bad.exit_code == 2 and bad.output.startswith("Error: "), bad.output


def test_an_unknown_image_is_one_line_with_a_suggestion(home: Path) -> None:
    result = CliRunner().invoke(cli, ["image", "rm", "debian:bookworm"])
    assert result.exit_code == 2 and result.output.startswith("Error: unknown image")
