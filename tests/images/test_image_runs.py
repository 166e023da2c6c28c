"""An image from each source runs a session and a function task with the right verdicts, through
the real image store: pulled from a registry on 127.0.0.1 (by the sandbox, on first use), loaded
from a ``docker save`` tarball, and built from a Dockerfile on top of it.

The image is a Debian bookworm root with busybox and bash (``tests.sandbox.image_fixtures``),
as one layer. Each run is bounded in time (the environments' limits) and memory (their cgroups).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tarfile
import textwrap
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.envs.registry import load_folder
from deepgym.images.build import build
from deepgym.images.distribution import push
from deepgym.images.store import ImageStore
from deepgym.models import Environment
from deepgym.sandbox.sessions import LocalSessions
from tests.images.conftest import digest_of
from tests.images.registry_fixtures import LocalRegistry, registry, write_image
from tests.sandbox.image_fixtures import debian_root
from tests.sessions.conftest import EXAMPLE, FIX

__all__ = ["debian_root", "registry"]  # fixtures, imported by name

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(300)]

PROBE = """
import os

def probe():
    return [open("/etc/debian_version").read()[:3], os.path.exists("/etc/built-by-deepgym")]
"""


@pytest.fixture(scope="module")
def layer(debian_root: Path) -> bytes:
    """The Debian root as one uncompressed layer tar."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(debian_root.rglob("*")):
            if path.is_symlink() or path.is_file() or path.is_dir():
                tar.add(path, arcname=str(path.relative_to(debian_root)), recursive=False)
    return out.getvalue()


def _docker_save(path: Path, layer: bytes, tag: str) -> None:
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [digest_of(layer)]},
    }
    raw = json.dumps(config).encode()
    files = {f"{digest_of(raw)[7:]}.json": raw, "0/layer.tar": layer}
    manifest = [
        {"Config": f"{digest_of(raw)[7:]}.json", "RepoTags": [tag], "Layers": ["0/layer.tar"]}
    ]
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _function(image: str, built: bool) -> Environment:
    return Environment(
        name="image-function",
        image=image,
        entry_point="probe",
        test_cases=[{"args": [], "expected": ["12.", built]}],
        timeout=20.0,
        memory_mb=256,
    )


def _session_scores(image: str) -> tuple[float, float]:
    env = load_folder(EXAMPLE).model_copy(update={"image": image})

    async def go() -> tuple[float, float]:
        provider = LocalSessions()
        try:
            fixed = await provider.open(env)
            assert (await fixed.exec(FIX)).exit_code == 0
            right = (await fixed.score()).score
            await fixed.close()
            idle = await provider.open(env)
            await idle.exec("true")
            wrong = await idle.score()
            await idle.close()
            assert wrong.has_verdict
            return right, wrong.score
        finally:
            await provider.close()

    return asyncio.run(go())


def _check(image: str, built: bool) -> None:
    assert _session_scores(image) == (1.0, 0.0)
    with DeepGym(sandbox="strict") as dg:
        right = dg.run(_function(image, built), textwrap.dedent(PROBE))
        wrong = dg.run(_function(image, built), "def probe():\n    return []\n")
    assert (right.has_verdict, right.score) == (True, 1.0), right
    assert (wrong.has_verdict, wrong.score) == (True, 0.0), wrong


def test_an_image_from_each_source_runs_sessions_and_function_tasks(
    layer: bytes,
    registry: LocalRegistry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the Dockerfile build maps ids directly only as root")
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))
    store = ImageStore()
    # 1. a registry: the sandbox pulls it on first use
    layout = tmp_path / "layout"
    desc = write_image(layout, layer, env=("PATH=/usr/bin:/bin",))
    pushed = f"{registry.host}/e2e/debian:1"
    push(layout, pushed, desc["digest"])
    _check(pushed, built=False)
    assert store.lookup(pushed) == desc["digest"]
    # 2. a docker save tarball
    saved = tmp_path / "debian.tar"
    _docker_save(saved, layer, "saved/debian:1")
    store.import_tarball(saved, "saved/debian:1")
    _check("saved/debian:1", built=False)
    # 3. a Dockerfile on top of it
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        "FROM saved/debian:1\nRUN echo yes > /etc/built-by-deepgym\nWORKDIR /work\n"
    )
    build(ctx / "Dockerfile", ref="built/debian:1")
    _check("built/debian:1", built=True)
