"""A small Debian root file system for the image sandbox's tests, built once and cached.

``mmdebstrap --variant=extract --include=busybox,bash`` unpacks bookworm's busybox and bash
with their dependencies (libc, base-files: ``/etc/debian_version``) from Debian's mirror, in a
user namespace of its own (``--mode=unshare``): about 25 MB, 5-20 s. (``--variant=custom`` needs
``dpkg`` inside to configure what it installs; ``extract`` only unpacks, which is all a test
root needs.) bash is there because a session's shell is ``/bin/bash``; busybox's applets are
linked into ``/bin`` as its postinst would (``cat``, ``id``, ``ls``, ...). The root is cached
under ``~/.cache/deepgym-tests`` (``DEEPGYM_TEST_CACHE``), so later runs take no time; a host
without ``mmdebstrap``, or without a way to Debian's mirror, skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

SUITE = "bookworm"
PACKAGES = "busybox,bash"
BUILD_TIMEOUT_S = 300.0


def cache_dir() -> Path:
    """Where built test roots are kept between runs."""
    return Path(os.environ.get("DEEPGYM_TEST_CACHE", "~/.cache/deepgym-tests")).expanduser()


def _link_applets(root: Path) -> None:
    """``/bin/<applet>`` -> ``busybox`` for each applet no package file already provides."""
    listed = subprocess.run(
        [str(root / "bin" / "busybox"), "--list"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    for applet in listed:
        if not any((root / d / applet).exists() for d in ("bin", "sbin", "usr/bin", "usr/sbin")):
            (root / "bin" / applet).symlink_to("busybox")


def build_root(dest: Path) -> Path:
    """``dest``, a Debian root with busybox and bash, built unless it is there already."""
    if (dest / "etc" / "debian_version").is_file():
        return dest
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is not installed: no Debian root to test images with")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".building-") as tmp:
        tar = Path(tmp) / "root.tar"
        cmd = [
            *("mmdebstrap", "--variant=extract", f"--include={PACKAGES}", "--mode=unshare"),
            *("--quiet", SUITE, str(tar)),
        ]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"mmdebstrap took over {BUILD_TIMEOUT_S:g} s (Debian's mirror?)")
        if proc.returncode != 0:
            pytest.skip(f"mmdebstrap failed: {proc.stderr.strip().splitlines()[-1:]}")
        root = Path(tmp) / "root"
        root.mkdir()
        with tarfile.open(tar) as archive:
            archive.extractall(root, filter="fully_trusted")
        _link_applets(root)
        root.chmod(0o755)
        os.rename(root, dest)  # atomic: a run that dies half-way leaves no half root
    return dest


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root``: its mode, size and mtime (ns), by relative path."""
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    st = os.lstat(root)
    out["."] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(scope="session")
def debian_root() -> Path:
    """The cached Debian test root (built on first use)."""
    return build_root(cache_dir() / f"{SUITE}-busybox-root")


@pytest.fixture
def setuid_root(debian_root: Path, tmp_path: Path) -> Path:
    """A copy of the test root (hard links: nothing of the cache is changed) with
    ``/bin/busybox-suid``, a copy of busybox owned by root with the setuid and setgid bits."""
    root = tmp_path / "suid-root"
    subprocess.run(["cp", "-al", str(debian_root), str(root)], check=True, timeout=60)
    suid = root / "bin" / "busybox-suid"
    shutil.copyfile(debian_root / "bin" / "busybox", suid)
    if os.geteuid() == 0:
        os.chown(suid, 0, 0)
    suid.chmod(0o755 | stat.S_ISUID | stat.S_ISGID)
    return root
