"""The runtimes a Python answer runs in: the judge's interpreter, with or without more packages.

An environment names its answers' runtime (``Environment.runtime``): ``stdlib`` (the default),
the judge's own interpreter with its standard library only, as every answer ran before runtimes;
or ``scientific``, the same interpreter with numpy, pandas, scipy, scikit-learn and sympy
(``scientific.txt`` beside this module pins them: SandboxFusion's versions of the first four where
this Python has wheels for them). ``RUNTIMES`` is the table; ``RuntimeStore`` builds and finds them.

Invariants:

- A runtime is packages, never another interpreter: a folder of site-packages that pip builds
  once from pinned requirements (``--no-deps --only-binary=:all:``: exactly the pinned wheels,
  nothing resolved at build time), checked by importing its modules before it is kept. The
  interpreter stays the judge's (``host.SANDBOX_PYTHON``), so the answer's process speaks the
  verifier's RPC as ever, and only the answer's process has the packages on its path.
- A folder's name is its key: the runtime's name, the interpreter's cache tag and machine, and
  the pins' digest (``runtime_key``). Another Python, machine or pin gets a folder of its own;
  nothing is rebuilt in place.
- A folder under its final name is complete: a build goes to a hidden folder beside it and is
  renamed into place once pip and the import check succeeded; builders in other processes wait
  on one lock file, and find the folder built.
- Kept under ``$DEEPGYM_RUNTIMES`` (default ``$DEEPGYM_HOME/runtimes``) and mounted read-only
  into the answer's sandbox at ``IN_RUNTIME``, whose ``site-packages`` the answer's process puts
  last on ``sys.path`` (``judge.solution_host.use_runtime``): the answer cannot write it, and
  no package of the host's is on its path.

A runtime that cannot be built (no package index, no pip, no wheel for this Python) is
``SandboxUnavailableError``: it fails every run that names it alike, never one answer's 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, SandboxUnavailableError
from deepgym.home import deepgym_home
from deepgym.judge.codes import IN_RUNTIME, RUNTIME_ENV

__all__ = [
    "DEFAULT",
    "MANIFEST",
    "RUNTIMES",
    "SITE",
    "Built",
    "Runtime",
    "RuntimeStore",
    "default_root",
    "runtime",
    "runtime_key",
]

SITE = "site-packages"
"""The folder of a built runtime that holds its packages (``pip install --target``)."""
MANIFEST = "runtime.json"
"""What a built runtime says of itself: its key, Python, packages, size and build time."""
BUILD_TIMEOUT_S = 1800.0
"""How long one build (pip, then the import check) may take."""
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""BLAS and OpenMP with one thread: an answer's time limit is its CPU time, which a pool of
threads spinning while they wait for work would spend for nothing; and a thread per core at
import would count against the run's process limit."""


@dataclass(frozen=True)
class Runtime:
    """One runtime: what it holds, and how it is built."""

    name: str
    description: str
    requirements: str | None = None
    """The pinned requirements file beside this module; None: no packages (``stdlib``)."""
    imports: tuple[str, ...] = ()
    """The modules a build must import before it is kept."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set for the answer's process."""


DEFAULT = "stdlib"
RUNTIMES: dict[str, Runtime] = {
    "stdlib": Runtime("stdlib", "the judge's Python, its standard library only"),
    "scientific": Runtime(
        "scientific",
        "the judge's Python with numpy, pandas, scipy, scikit-learn and sympy",
        requirements="scientific.txt",
        imports=("numpy", "pandas", "scipy", "sklearn", "sympy"),
        env=ONE_THREAD,
    ),
}
"""Every runtime, by name (``models.RuntimeName`` lists the same names)."""


def runtime(name: str) -> Runtime:
    """The runtime named ``name``; ``ConfigError`` naming the runtimes there are."""
    try:
        return RUNTIMES[name]
    except (KeyError, TypeError):
        known = ", ".join(RUNTIMES)
        raise ConfigError(f"runtime must be one of {known}, got {name!r}") from None


def _requirements(rt: Runtime) -> Path:
    assert rt.requirements is not None
    return Path(__file__).with_name(rt.requirements)


def runtime_key(rt: Runtime) -> str:
    """The folder name of ``rt`` built for this interpreter and machine: its name, the
    interpreter's cache tag, the machine, and the digest of its pins (its requirement lines,
    comments left out)."""
    lines = (line.partition("#")[0].strip() for line in _requirements(rt).read_text().splitlines())
    pins = "\n".join(line for line in lines if line)  # (a comment changes no build)
    digest = hashlib.sha256(pins.encode()).hexdigest()[:12]
    return f"{rt.name}-{sys.implementation.cache_tag}-{platform.machine()}-{digest}"


def default_root() -> Path:
    """Where runtimes are kept: ``$DEEPGYM_RUNTIMES``, else ``$DEEPGYM_HOME/runtimes``."""
    return Path(os.environ.get("DEEPGYM_RUNTIMES") or deepgym_home() / "runtimes")


@dataclass(frozen=True)
class Built:
    """A built runtime: its folder and what its manifest says."""

    runtime: Runtime
    path: Path
    manifest: Mapping[str, Any]

    @property
    def site(self) -> Path:
        """Its packages' folder on the host."""
        return self.path / SITE

    def solution_env(self, site: str = f"{IN_RUNTIME}/{SITE}") -> dict[str, str]:
        """The variables of an answer's process in this runtime: the runtime's own, and where
        its packages are (``site``: as the answer's sandbox mounts them)."""
        return {**self.runtime.env, RUNTIME_ENV: site}

    def describe(self) -> str:
        """One line: its packages and versions, its size, its folder."""
        packages = ", ".join(f"{k} {v}" for k, v in self.manifest.get("packages", {}).items())
        mib = int(self.manifest.get("bytes", 0)) / 2**20
        return f"{packages} ({mib:.0f} MiB at {self.path})"


def _say_stderr(line: str) -> None:
    sys.stderr.write(f"deepgym: {line}\n")
    sys.stderr.flush()


class RuntimeStore:
    """The runtimes kept under ``root`` (``default_root()``): found, or built once.

    ``say`` gets the progress lines of a build (default: stderr). ``ready`` is the async way
    in (a backend's, before a run): a runtime is built at its first use, in a thread, once per
    store however many runs wait for it."""

    def __init__(self, root: Path | None = None, say: Callable[[str], None] | None = None) -> None:
        self.root = Path(root if root is not None else default_root()).absolute()
        """(absolute: a sandbox mounts it, whatever the working directory)"""
        self.say = say or _say_stderr
        self._built: dict[str, Built] = {}
        self._building: dict[str, asyncio.Future[Built | None]] = {}

    def folder(self, name: str) -> Path:
        """Where runtime ``name`` is (or will be) built for this interpreter."""
        return self.root / runtime_key(runtime(name))

    def find(self, name: str) -> Built | None:
        """Runtime ``name`` as built here, or None (``stdlib`` is never built: None too)."""
        rt = runtime(name)
        if rt.requirements is None:
            return None
        folder = self.folder(name)
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(manifest, dict) or manifest.get("key") != folder.name:
            return None
        return Built(rt, folder, manifest)

    def build(self, name: str, say: Callable[[str], None] | None = None) -> Built | None:
        """Runtime ``name``, built now if it is not yet (blocking: pip, then an import check);
        None for ``stdlib``. ``SandboxUnavailableError`` when it cannot be built here."""
        say = say or self.say
        rt = runtime(name)
        if rt.requirements is None:
            return None
        if (found := self.find(name)) is not None:
            return found
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._unavailable(name, f"{self.root} cannot be made ({exc})") from exc
        with _locked(self.root / ".lock"):
            if (found := self.find(name)) is not None:  # built meanwhile, by another process
                return found
            return self._build_locked(rt, say)

    def _build_locked(self, rt: Runtime, say: Callable[[str], None]) -> Built:
        final = self.folder(rt.name)
        for stale in self.root.glob(f".{final.name}.*"):  # a build that was killed
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=self.root))
        t0 = time.monotonic()
        version = platform.python_version()
        say(
            f"building runtime {rt.name} for Python {version} (once; about a minute and "
            f"400 MiB from the package index) into {final}"
        )
        try:
            self._pip(rt, tmp / SITE)
            self._check_imports(rt, tmp / SITE)
            manifest = {
                "key": final.name,
                "name": rt.name,
                "python": version,
                "packages": _packages(tmp / SITE),
                "bytes": _size(tmp),
                "built_s": round(time.monotonic() - t0, 1),
            }
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
            os.chmod(tmp, 0o755)  # (mkdtemp's 0700: the sandbox's uid reads it too)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        built = Built(rt, final, manifest)
        say(f"runtime {rt.name} built in {manifest['built_s']:g} s: {built.describe()}")
        return built

    def _pip(self, rt: Runtime, target: Path) -> None:
        """``pip install`` the pinned wheels of ``rt`` into ``target``, with this process's
        interpreter (the judge's version: the wheels' ABI is its)."""
        cmd = [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-input"),
            *("--disable-pip-version-check", "--no-deps", "--only-binary=:all:"),
            *("--target", str(target), "--requirement", str(_requirements(rt))),
        ]
        why = _run(cmd)
        if why is not None:
            if "No module named pip" in why:
                why += f" (install pip for {sys.executable}: {sys.executable} -m ensurepip)"
            raise self._unavailable(rt.name, f"pip failed: {why}")

    def _check_imports(self, rt: Runtime, site: Path) -> None:
        """Import each of ``rt.imports`` from ``site`` in the judge's interpreter, isolated as
        in a sandbox (``-I -S``): a build that fails it is never kept."""
        from deepgym.sandbox.host import SANDBOX_PYTHON

        code = f"import sys; sys.path.append({str(site)!r}); import {', '.join(rt.imports)}"
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **rt.env}
        why = _run([SANDBOX_PYTHON, "-I", "-S", "-W", "ignore", "-c", code], env=env)
        if why is not None:
            raise self._unavailable(rt.name, f"its packages do not import: {why}")

    def _unavailable(self, name: str, why: str) -> SandboxUnavailableError:
        return SandboxUnavailableError(
            f"runtime {name} is not built and cannot be built here: {why}; build it where the "
            f"package index is reachable (deepgym runtime build {name}), with DEEPGYM_RUNTIMES "
            f"naming the folder it is kept in ({self.root})"
        )

    async def ready(self, name: str) -> Built | None:
        """Runtime ``name``, built first where it is not yet (in a thread; one build at a time
        per store, whatever the number of runs waiting for it); None for ``stdlib``."""
        if runtime(name).requirements is None:
            return None
        if (built := self._built.get(name)) is not None:
            return built
        fut = self._building.get(name)
        if fut is None or fut.get_loop() is not asyncio.get_running_loop():
            fut = asyncio.ensure_future(asyncio.to_thread(self.build, name))
            self._building[name] = fut
            fut.add_done_callback(lambda f: self._forget(name, f))
        built = await asyncio.shield(fut)  # a cancelled run leaves the build to the others
        assert built is not None
        self._built[name] = built
        return built

    def _forget(self, name: str, fut: asyncio.Future[Built | None]) -> None:
        """A build that ended: the next ``ready`` finds its folder (or, if it failed, tries
        again)."""
        if self._building.get(name) is fut:
            del self._building[name]
        if not fut.cancelled():
            fut.exception()  # seen: a failure is raised to every run that waited for it


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _run(cmd: list[str], env: Mapping[str, str] | None = None) -> str | None:
    """Run ``cmd``: None when it exits 0, else its last line of stderr (or why it did not)."""
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:400] if lines else f"exit {proc.returncode}"


def _packages(site: Path) -> dict[str, str]:
    """Each installed distribution's name and version, from its ``.dist-info`` folder."""
    out = {}
    for info in sorted(site.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        out[name.lower().replace("_", "-")] = version
    return out


def _size(folder: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(folder):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total
