"""The languages an answer may be written in, and the toolchains this host has for them.

A ``Language`` is data: the file its source goes in, the compiler's command line (run in the
answer's sandbox, in a build folder), the file the build leaves (the program), and the command
line that runs it (``{program}`` is the program's path, ``{memory_mb}`` the run's memory limit).
Python is the default and needs none of this: its answers run in the judge's own interpreter.

A toolchain is found only in the system folders every sandbox mounts read-only (``/usr``,
``/bin``): a compiler under a home folder (rustup's, say) would not be there inside. A language
whose toolchain is missing is a ``ConfigError`` naming the Debian package to install, never a
fallback to something else.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import get_args

from deepgym.exceptions import ConfigError
from deepgym.models import LanguageName

__all__ = [
    "LANGUAGES",
    "Language",
    "Toolchain",
    "language",
    "require",
    "toolchain",
    "toolchains",
]

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
"""Where a toolchain is looked for: folders every sandbox mounts (``host.system_binds``)."""
SYSTEM_TOPS = ("/usr/", "/bin/", "/lib/")


@dataclass(frozen=True)
class Language:
    """How an answer in one language is built and run."""

    name: str
    """The name environments and requests use (``cpp``)."""
    title: str
    """The name people use (``C++17``)."""
    tool: str
    """The program whose presence and version stand for the toolchain (``g++``)."""
    version_argv: tuple[str, ...]
    """The arguments that print the toolchain's version."""
    package: str
    """The Debian package that installs the toolchain."""
    source: str
    """The file the answer's source is written to in the build folder."""
    compile_argv: tuple[str, ...]
    """The compiler's command line, run in the build folder (the first word is found on
    ``SYSTEM_PATH``)."""
    artifact: str
    """What the build leaves in the build folder: the program the runs execute."""
    run_argv: tuple[str, ...]
    """The program's command line: ``{program}`` is its path, ``{memory_mb}`` the run's memory
    limit in MiB; a first word without a slash is found on ``SYSTEM_PATH``."""
    pack: str | None = None
    """``"jar"``: the build's class files are packed into one runnable jar (``artifact``)."""
    build_env: tuple[tuple[str, str], ...] = ()
    """Variables the compiler needs (over the sandbox's own)."""
    extra_address_space_mb: int = 0
    """Address space beyond the memory limit, where no memory cgroup holds the run and an
    address-space limit stands in for it: the JVM and Go reserve far more than they use."""
    compile_memory_mb: int = 2048
    """The compiler's memory limit."""
    origin: bool = False
    """The run's program finds its libraries beside its real path (``$ORIGIN``), which the
    loader reads from ``/proc``: a solution has none, so the run names that folder."""
    probe: str = ""
    """A known-good program (it prints ``ok``): built when an answer's compile fails (after a
    plain refusal, only until the language has built something here), so that a toolchain
    broken in the sandbox is ours, never the answer's 0 (``sandbox.programs``)."""
    crash_exit_codes: tuple[int, ...] = ()
    """The compiler's exit codes for an internal compiler error: still the answer's
    ``compile_error`` (the source made the compiler fail), but checked against the known-good
    ``probe`` built at that moment, as a crash is (``sandbox.programs``)."""
    precompiled: tuple[str, str] | None = None
    """A header most answers include first, and its kind for the compiler's ``-x``
    (``("bits/stdc++.h", "c++-header")``): precompiled once per toolchain and command line,
    and used by every build (``sandbox.headers``)."""
    sandbox_fusion_argv: tuple[str, ...] | None = None
    """SandboxFusion's compiler command line, where it differs from ``compile_argv`` (an
    environment's ``dialect="sandbox_fusion"``; ``compile_argv_for``)."""

    def compile_argv_for(self, dialect: str) -> tuple[str, ...]:
        """The compiler's command line in ``dialect`` (``Environment.dialect``)."""
        if dialect == "sandbox_fusion" and self.sandbox_fusion_argv is not None:
            return self.sandbox_fusion_argv
        return self.compile_argv


LANGUAGES: dict[str, Language] = {
    lang.name: lang
    for lang in (
        Language(
            name="c",
            probe='#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n',
            title="C (gcc, GNU C11)",
            tool="gcc",
            version_argv=("--version",),
            package="gcc",
            source="main.c",
            compile_argv=("gcc", "-std=gnu11", "-O2", "-pipe", "-o", "prog", "main.c", "-lm"),
            artifact="prog",
            run_argv=("{program}",),
            crash_exit_codes=(4,),
        ),
        Language(
            name="cpp",
            probe='#include <iostream>\nint main() { std::cout << "ok\\n"; }\n',
            title="C++17 (g++)",
            tool="g++",
            version_argv=("--version",),
            package="g++",
            source="main.cpp",
            compile_argv=("g++", "-std=gnu++17", "-O2", "-pipe", "-o", "prog", "main.cpp"),
            artifact="prog",
            run_argv=("{program}",),
            crash_exit_codes=(4,),
            precompiled=("bits/stdc++.h", "c++-header"),
            sandbox_fusion_argv=(  # its run_cpp: OpenSSL and threads linked, no optimisation
                *("g++", "-std=c++17", "main.cpp", "-o", "prog"),
                *("-lcrypto", "-lssl", "-lpthread"),
            ),
        ),
        Language(
            name="java",
            probe=(
                "public class Main {\n"
                '    public static void main(String[] a) { System.out.println("ok"); }\n'
                "}\n"
            ),
            title="Java (OpenJDK; the class is Main)",
            tool="javac",
            version_argv=("-version",),
            package="default-jdk-headless",
            source="Main.java",
            compile_argv=(
                "javac",
                "-J-XX:+UseSerialGC",
                "-J-XX:TieredStopAtLevel=1",
                "-J-Xshare:auto",
                "-encoding",
                "UTF-8",
                "-d",
                "classes",
                "Main.java",
            ),
            artifact="prog.jar",
            pack="jar",
            run_argv=(
                "java",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xshare:auto",
                "-Xss64m",
                "-Xmx{memory_mb}m",
                "-jar",
                "{program}",
            ),
            extra_address_space_mb=4096,
            origin=True,
        ),
        Language(
            name="js",
            probe='console.log("ok");\n',
            title="JavaScript (Node.js)",
            tool="node",
            version_argv=("--version",),
            package="nodejs",
            source="main.js",
            compile_argv=("node", "--check", "main.js"),
            artifact="main.js",
            run_argv=("node", "{program}"),
            extra_address_space_mb=4096,
        ),
        Language(
            name="rust",
            probe='fn main() { println!("ok"); }\n',
            title="Rust (rustc, edition 2021)",
            tool="rustc",
            version_argv=("--version",),
            package="rustc",
            source="main.rs",
            compile_argv=("rustc", "--edition", "2021", "-O", "-o", "prog", "main.rs"),
            artifact="prog",
            run_argv=("{program}",),
            crash_exit_codes=(101,),
        ),
        Language(
            name="go",
            probe='package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("ok") }\n',
            title="Go",
            tool="go",
            version_argv=("version",),
            package="golang-go",
            source="main.go",
            compile_argv=("go", "build", "-o", "prog", "main.go"),
            artifact="prog",
            run_argv=("{program}",),
            build_env=(
                ("GOCACHE", "/tmp/go-cache"),
                ("GOPATH", "/tmp/go"),
                ("GO111MODULE", "off"),
                ("CGO_ENABLED", "0"),
                ("HOME", "/tmp"),
            ),
            extra_address_space_mb=1024,
        ),
    )
}
"""Every language besides Python, by name."""
NAMES: tuple[str, ...] = get_args(LanguageName)
"""Every name a ``language`` field takes: Python and ``LANGUAGES``."""


def language(name: str) -> Language:
    """The language ``name``; ``ConfigError`` naming the known ones for any other."""
    lang = LANGUAGES.get(name)
    if lang is None:
        raise ConfigError(f"language {name!r} is not one of {', '.join(NAMES)}")
    return lang


@dataclass(frozen=True)
class Toolchain:
    """One language's toolchain on this host: where its tool is and what version it says."""

    language: str
    path: str | None
    version: str
    tools: dict[str, str] = field(default_factory=dict)
    """Each program the language's command lines name, by its name: its full path."""

    @property
    def present(self) -> bool:
        """Whether every program the language needs is here."""
        return self.path is not None

    @property
    def fingerprint(self) -> str:
        """What a compiled program depends on besides its source: the toolchain's version and
        where its programs are (the compile cache's key)."""
        text = "\0".join([self.version, *sorted(f"{k}={v}" for k, v in self.tools.items())])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _system_which(name: str) -> str | None:
    """``name``'s full path on ``SYSTEM_PATH``, if it resolves into a folder every sandbox
    mounts (a link elsewhere, to a home folder say, would not be there inside)."""
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        return None
    real = os.path.realpath(found)
    return found if real.startswith(SYSTEM_TOPS) else None


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    text = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return text[0].strip() if text else "unknown"


@functools.cache
def toolchain(name: str) -> Toolchain:
    """The toolchain of language ``name`` on this host (looked up once per process)."""
    lang = language(name)
    wanted = {lang.tool, lang.compile_argv[0]}
    if "/" not in lang.run_argv[0] and not lang.run_argv[0].startswith("{"):
        wanted.add(lang.run_argv[0])
    tools = {tool: _system_which(tool) for tool in sorted(wanted)}
    if any(path is None for path in tools.values()):
        return Toolchain(name, None, "", {k: v for k, v in tools.items() if v})
    path = tools[lang.tool]
    assert path is not None
    found = {k: v for k, v in tools.items() if v is not None}
    return Toolchain(name, path, _version([path, *lang.version_argv]), found)


def toolchains() -> list[Toolchain]:
    """Every language's toolchain on this host, in ``LANGUAGES``'s order."""
    return [toolchain(name) for name in LANGUAGES]


def require(name: str) -> Toolchain:
    """The toolchain of language ``name``; ``ConfigError`` in one line, naming the package to
    install, where this host lacks it."""
    tc = toolchain(name)
    if not tc.present:
        lang = LANGUAGES[name]
        raise ConfigError(
            f"language {name!r} needs {lang.tool} in /usr/bin, which this host lacks: "
            f"install Debian's {lang.package} package (apt-get install {lang.package})"
        )
    return tc
