"""scripts/install-torch.sh: the CPU build of torch where one is reachable, PyPI's (CUDA on Linux)
build otherwise, said in one line; nothing when that torch is installed already.

``python -m pip`` is a stand-in here (tests/setup/fake_pip) run by a bare virtualenv's Python,
so nothing is downloaded: it logs each call and "installs" by writing torch's metadata.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-torch.sh"
FAKE = Path(__file__).resolve().parent / "fake_pip"
VERSION = "2.13.0"

pytestmark = pytest.mark.skipif(platform.system() != "Linux", reason="the Linux path")


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv's Python without pip or torch."""
    where = tmp_path_factory.mktemp("venv")
    venv.create(where, with_pip=False)
    return where / "bin" / "python"


def _install(
    python: Path, tmp_path: Path, has: str, installed: str | None = None
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    fake = tmp_path / "fake"
    shutil.copytree(FAKE, fake)
    if installed is not None:
        info = fake / f"torch-{installed}.dist-info"
        info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: torch\nVersion: {installed}\n"
        (info / "METADATA").write_text(metadata)
    env = {**os.environ, "PYTHONPATH": str(fake), "FAKE_PIP_HAS": has}
    done = subprocess.run(
        ["sh", str(SCRIPT), str(python), VERSION],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    log = fake / "calls.jsonl"
    calls = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return done, calls


def _version(tmp_path: Path) -> str:
    (info,) = (tmp_path / "fake").glob("torch-*.dist-info")
    return info.name.removeprefix("torch-").removesuffix(".dist-info")


def test_a_local_cpu_wheel_is_used_first(python: Path, tmp_path: Path) -> None:
    done, calls = _install(python, tmp_path, "local,index")
    assert done.returncode == 0, done.stderr
    assert calls == [["install", "-q", f"torch=={VERSION}+cpu"]]
    assert _version(tmp_path) == f"{VERSION}+cpu"
    assert done.stdout.splitlines() == [
        f"install-torch: installed torch {VERSION}+cpu, the CPU-only build (a wheel pip found "
        "locally)"
    ]


def test_else_the_pytorch_cpu_index_once_with_a_short_timeout(python: Path, tmp_path: Path) -> None:
    done, calls = _install(python, tmp_path, "index")
    assert done.returncode == 0, done.stderr
    index = "https://download.pytorch.org/whl/cpu"
    assert calls[1] == [
        "install", "-q", "--no-deps", "--timeout", "10", "--retries", "0",
        "--index-url", index, f"torch=={VERSION}+cpu",
    ]  # fmt: skip
    assert calls[2] == ["install", "-q", f"torch=={VERSION}+cpu"]  # its dependencies
    assert _version(tmp_path) == f"{VERSION}+cpu"
    assert done.stdout.splitlines()[-1].endswith(f"the CPU-only build (from {index})")


@pytest.mark.parametrize("has", ["", "constrained"])
def test_else_pypis_build_said_in_one_line(python: Path, tmp_path: Path, has: str) -> None:
    done, calls = _install(python, tmp_path, has)
    assert done.returncode == 0, done.stderr
    assert calls[-1] == ["install", "-q", f"torch=={VERSION}"]
    assert _version(tmp_path) == VERSION
    (said,) = done.stdout.splitlines()
    assert said.startswith(f"install-torch: installed torch {VERSION}, PyPI's default build")
    assert "CUDA" in said and f"no torch-{VERSION}+cpu wheel" in said and "not reachable" in said


@pytest.mark.parametrize("installed", [VERSION, f"{VERSION}+cpu"])
def test_nothing_when_that_torch_is_installed(python: Path, tmp_path: Path, installed: str) -> None:
    done, calls = _install(python, tmp_path, "local,index", installed=installed)
    assert done.returncode == 0 and calls == []
    assert done.stdout == f"install-torch: torch {installed} is installed already\n"


def test_another_version_is_replaced(python: Path, tmp_path: Path) -> None:
    done, _ = _install(python, tmp_path, "local", installed="2.12.0")
    assert done.returncode == 0 and _version(tmp_path) == f"{VERSION}+cpu"


def test_an_error_other_than_not_found_is_shown_not_passed_over(
    python: Path, tmp_path: Path
) -> None:
    done, calls = _install(python, tmp_path, "broken")
    assert done.returncode == 1 and len(calls) == 1
    assert "No space left on device" in done.stderr
