"""The languages an answer may be written in, and the toolchains this host has for them.

A ``Language`` is data: the file its source goes in, the compiler's command line (run in the
answer's sandbox, in a build folder), the file the build leaves (the program), and the command
line that runs it (``{program}`` is the program's path, ``{memory_mb}`` the run's memory limit).
Python is the default and needs none of this: its answers run in the judge's own interpreter.

An interpreted language has a syntax check for its compile phase (``node --check``, ``php
-l``, ...: the program is then the source itself), or no compile phase at all
(``compile_argv`` empty: R, Racket, SQL, the pytest mode), where a check would cost as much as
the run. A test-runner mode (``pytest``, ``junit``, ``go_test``, ``jest``) runs the answer's
tests under the language's own runner, and each test the runner reports is a case of the
result (``report``; ``judge.reports`` reads the runner's words).

A toolchain is found only in the system folders every sandbox mounts read-only (``/usr``,
``/bin``): a compiler under a home folder (rustup's, say) would not be there inside. A language
whose toolchain is missing is a ``ConfigError`` naming the Debian package to install, never a
fallback to something else. A language that Debian packages no toolchain for (Swift, Julia,
Lean, CUDA) is known by name and refused in one line that says why (``unavailable``).
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
    "etc_folders",
    "language",
    "missing_libraries",
    "programs",
    "refusal",
    "require",
    "run_words",
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
    ``SYSTEM_PATH``; ``{source}`` is the source's file name, ``{judge}`` the judge package's
    folder in the sandbox, where a helper of ours lies: ``sandbox.programs``)."""
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
    proc: bool = False
    """The program needs a ``/proc`` at run time (mono reads ``/proc/self``, Racket finds its
    boot files through ``/proc/self/exe``): it runs with one of its own pid namespace, which
    shows its own processes and its init's (non-dumpable) only, as a compiler's sandbox has."""
    etc: tuple[str, ...] = ()
    """Configuration folders under ``/etc`` the toolchain reads (R's ``Renviron``, mono's
    ``machine.config``): every sandbox mounts them read-only where they exist (no host data)."""
    files: tuple[str, ...] = ()
    """Files the command lines name besides their programs (a runner's jar): the toolchain is
    present only with them. A JVM language's program names them on its class path."""
    class_path: tuple[str, ...] = ()
    """Jars of libraries answers may use, on a JVM program's class path where they are
    (javatuples, as SandboxFusion's Java has it): the compiler's too."""
    run_name: str | None = None
    """The name the program needs to run under (a test runner finds its tests by name): it is
    copied to that name in the work dir, and ``{program}`` names the copy."""
    report: str | None = None
    """A test-runner mode: the runner whose report gives the result's cases
    (``judge.reports``: ``pytest``, ``junit``, ``go_test`` or ``jest``)."""
    libraries: tuple[tuple[str, str], ...] = ()
    """Libraries answers and benchmarks' tests use (MultiPL-E's asserts): (a file that shows
    the library is here, its Debian package). The doctor names the missing ones."""
    unavailable: str = ""
    """Why no toolchain of this language is used here (Debian packages none): the language
    is known by name, named by the doctor, and refused in one line."""
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


JVM_RUN = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xss64m")
"""The JVM's options for a run (as Java's): a small, quick-starting JVM."""
JVM_COMPILE = ("-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-Xshare:auto")
JUNIT_JAR = "/usr/share/java/junit-platform-console-standalone.jar"
"""JUnit 5's console launcher, all of JUnit in one jar (Debian's ``junit5``)."""
JAVATUPLES = "/usr/share/java/javatuples.jar"
"""javatuples (Debian's ``libjavatuples-java``): MultiPL-E's Java problems import it."""
SCALA_LIBRARY = "/usr/share/scala-2.11/lib/scala-library.jar"
"""Scala's runtime library (Debian's ``scala``): a Scala program's jar names it."""
GO_ENV = (
    ("GOCACHE", "/tmp/go-cache"),
    ("GOPATH", "/tmp/go"),
    ("GO111MODULE", "off"),
    ("CGO_ENABLED", "0"),
    ("HOME", "/tmp"),
)

_MORE = (
    Language(
        name="bash",
        probe="echo ok\n",
        title="Bash",
        tool="bash",
        version_argv=("--version",),
        package="bash",
        source="main.sh",
        compile_argv=("bash", "-n", "main.sh"),
        artifact="main.sh",
        run_argv=("bash", "{program}"),
    ),
    Language(
        name="ts",
        probe='console.log("ok");\n',
        title="TypeScript (types stripped, as tsx does; then Node.js)",
        tool="tsc",
        version_argv=("--version",),
        package="node-typescript",
        source="main.ts",
        compile_argv=("node", "{judge}/ts_transpile.js", "main.ts"),
        artifact="main.js",
        run_argv=("node", "{program}"),
        build_env=(("HOME", "/tmp"),),
        extra_address_space_mb=4096,
    ),
    Language(
        name="php",
        probe='<?php echo "ok\\n";\n',
        title="PHP",
        tool="php",
        version_argv=("--version",),
        package="php-cli",
        source="main.php",
        compile_argv=("php", "-l", "main.php"),
        artifact="main.php",
        run_argv=("php", "{program}"),
        etc=("/etc/php",),
    ),
    Language(
        name="ruby",
        probe='puts "ok"\n',
        title="Ruby",
        tool="ruby",
        version_argv=("--version",),
        package="ruby",
        source="main.rb",
        compile_argv=("ruby", "-c", "main.rb"),
        artifact="main.rb",
        run_argv=("ruby", "{program}"),
        libraries=(("/usr/share/doc/ruby-test-unit/copyright", "ruby-test-unit"),),
    ),
    Language(
        name="lua",
        probe='print("ok")\n',
        title="Lua 5.4",
        tool="lua5.4",
        version_argv=("-v",),
        package="lua5.4",
        source="main.lua",
        compile_argv=("luac5.4", "-p", "main.lua"),
        artifact="main.lua",
        run_argv=("lua5.4", "{program}"),
        libraries=(("/usr/share/lua/5.4/luaunit.lua", "lua-unit"),),
    ),
    Language(
        name="perl",
        probe='print "ok\\n";\n',
        title="Perl 5",
        tool="perl",
        version_argv=("-e", "print qq(perl $^V)"),
        package="perl",
        source="main.pl",
        compile_argv=("perl", "-c", "main.pl"),
        artifact="main.pl",
        run_argv=("perl", "{program}"),
        libraries=(("/usr/share/perl5/Test/Deep.pm", "libtest-deep-perl"),),
    ),
    Language(
        name="r",
        title="R (Rscript)",
        tool="Rscript",
        version_argv=("--version",),
        package="r-base-core",
        source="main.R",
        compile_argv=(),
        artifact="main.R",
        run_argv=("Rscript", "{program}"),
        etc=("/etc/R",),
    ),
    Language(
        name="racket",
        title="Racket",
        tool="racket",
        version_argv=("--version",),
        package="racket",
        source="main.rkt",
        compile_argv=(),
        artifact="main.rkt",
        run_argv=("PLTUSERHOME=/tmp", "HOME=/tmp", "racket", "{program}"),
        proc=True,
        etc=("/etc/racket",),
        extra_address_space_mb=4096,
    ),
    Language(
        name="csharp",
        probe='class Program { static void Main() { System.Console.WriteLine("ok"); } }\n',
        title="C# (Mono)",
        tool="mcs",
        version_argv=("--version",),
        package="mono-mcs",
        source="Main.cs",
        compile_argv=(
            *("mcs", "-d:DEBUG", "-optimize+", "-r:System.Numerics.dll"),
            *("-out:prog.exe", "Main.cs"),
        ),
        artifact="prog.exe",
        run_argv=("HOME=/tmp", "mono", "{program}"),
        build_env=(("HOME", "/tmp"),),
        proc=True,
        etc=("/etc/mono",),
        extra_address_space_mb=4096,
    ),
    Language(
        name="scala",
        probe='object Main { def main(args: Array[String]): Unit = println("ok") }\n',
        title="Scala 2.11 (the object with main)",
        tool="scalac",
        version_argv=("-version",),
        package="scala",
        source="Main.scala",
        compile_argv=(
            "scalac",
            *JVM_COMPILE,
            "-nowarn",
            "-target:jvm-1.8",
            "-d",
            "prog.jar",
            "Main.scala",
        ),
        artifact="prog.jar",
        pack="class-path",
        run_argv=("java", *JVM_RUN, "-Xmx{memory_mb}m", "-jar", "{program}"),
        files=(SCALA_LIBRARY,),
        build_env=(("HOME", "/tmp"),),
        extra_address_space_mb=4096,
        origin=True,
    ),
    Language(
        name="kotlin",
        probe='fun main() { println("ok") }\n',
        title="Kotlin (the file's main)",
        tool="kotlinc",
        version_argv=("-version",),
        package="kotlin",
        source="main.kt",
        compile_argv=(
            "kotlinc",
            *JVM_COMPILE,
            "-nowarn",
            "-jvm-target",
            "1.8",
            "main.kt",
            "-include-runtime",
            "-d",
            "prog.jar",
        ),
        artifact="prog.jar",
        run_argv=("java", *JVM_RUN, "-Xmx{memory_mb}m", "-ea", "-jar", "{program}"),
        build_env=(("HOME", "/tmp"),),
        extra_address_space_mb=4096,
        origin=True,
    ),
    Language(
        name="d",
        probe='import std.stdio;\nvoid main() { writeln("ok"); }\n',
        title="D (gdc; unittest blocks run before main)",
        tool="gdc",
        version_argv=("--version",),
        package="gdc",
        source="main.d",
        compile_argv=("gdc", "-O2", "-funittest", "-pipe", "-o", "prog", "main.d"),
        artifact="prog",
        run_argv=("{program}",),
        crash_exit_codes=(4,),
    ),
    Language(
        name="verilog",
        probe='module main; initial begin $display("ok"); $finish; end endmodule\n',
        title="Verilog (Icarus: iverilog, then vvp)",
        tool="iverilog",
        version_argv=("-V",),
        package="iverilog",
        source="main.v",
        compile_argv=("iverilog", "-g2012", "-o", "prog", "main.v"),
        artifact="prog",
        run_argv=("vvp", "-n", "{program}"),
    ),
    Language(
        name="sql",
        title="SQL (SQLite, in memory)",
        tool="sqlite3",
        version_argv=("-version",),
        package="sqlite3",
        source="main.sql",
        compile_argv=(),
        artifact="main.sql",
        run_argv=("HOME=/tmp", "sqlite3", "-bail", "-batch", ":memory:", ".read {program}"),
    ),
    Language(
        name="pytest",
        title="Python tests (pytest: each test a case)",
        tool="pytest-3",
        version_argv=("--version",),
        package="python3-pytest",
        source="test_main.py",
        compile_argv=(),
        artifact="test_main.py",
        run_argv=(
            "HOME=/tmp",
            "PYTHONDONTWRITEBYTECODE=1",
            "pytest-3",
            "-p",
            "no:cacheprovider",
            "-v",
            "-rfE",
            "--color=no",
            "--no-header",
            "{program}",
        ),
        run_name="test_main.py",
        report="pytest",
    ),
    Language(
        name="junit",
        probe=("import org.junit.jupiter.api.Test;\npublic class OkTest { @Test void ok() { } }\n"),
        title="Java tests (JUnit 5: each test a case; the file is named after its public class)",
        tool="javac",
        version_argv=("-version",),
        package="junit5",
        source="{class}.java",
        compile_argv=(
            "javac",
            *JVM_COMPILE,
            "-encoding",
            "UTF-8",
            "-cp",
            JUNIT_JAR,
            "-d",
            "classes",
            "{source}",
        ),
        artifact="tests.jar",
        pack="jar",
        run_argv=(
            "java",
            *JVM_RUN,
            "-Xmx{memory_mb}m",
            "-ea",
            "-jar",
            JUNIT_JAR,
            "--class-path",
            "{program}",
            "--scan-class-path",
            "--disable-banner",
            "--disable-ansi-colors",
            "--details=tree",
        ),
        files=(JUNIT_JAR,),
        run_name="tests.jar",
        report="junit",
        extra_address_space_mb=4096,
        origin=True,
    ),
    Language(
        name="go_test",
        probe='package main\n\nimport "testing"\n\nfunc TestOk(t *testing.T) {}\n',
        title="Go tests (go test: each test a case)",
        tool="go",
        version_argv=("version",),
        package="golang-go",
        source="main_test.go",
        compile_argv=("go", "test", "-c", "-o", "prog", "main_test.go"),
        artifact="prog",
        run_argv=("{program}", "-test.v", "-test.count=1"),
        build_env=GO_ENV,
        report="go_test",
        extra_address_space_mb=1024,
    ),
    *(
        Language(
            name=name,
            title=title,
            tool=tool,
            version_argv=("--version",),
            package="",
            source="",
            compile_argv=(),
            artifact="",
            run_argv=(tool, "{program}"),
            unavailable=why,
        )
        for name, title, tool, why in (
            (
                "swift",
                "Swift",
                "swiftc",
                "Debian packages no Swift toolchain (its 'swift' package is OpenStack's "
                "object store): Swift's own release, installed under /usr, is not one deepgym "
                "knows how to run yet",
            ),
            (
                "julia",
                "Julia",
                "julia",
                "Debian bookworm packages no Julia (its package left after bullseye)",
            ),
            (
                "lean",
                "Lean 4",
                "lean",
                "Debian packages no Lean 4 toolchain",
            ),
            (
                "cuda",
                "CUDA C++",
                "nvcc",
                "deepgym's sandbox has no GPU in it, and Debian's CUDA toolkit is not in main",
            ),
            (
                "python_gpu",
                "Python on a GPU",
                "nvidia-smi",
                "deepgym's sandbox has no GPU in it: python_gpu answers are not run here",
            ),
            (
                "jest",
                "JavaScript tests (Jest)",
                "jest",
                "deepgym has no Jest mode: Debian's jest needs Debian's own nodejs, which a host "
                "with another build of Node.js (NodeSource's) cannot install beside it; the "
                "pytest, junit and go_test modes report each test",
            ),
        )
    ),
)
"""The languages besides the first six: interpreted ones with a syntax check (or none) as
their compile phase, the JVM's others, C# on Mono, the test-runner modes, and the languages
refused here (Swift, Julia, Lean, CUDA, Python on a GPU, Jest)."""


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
                "-cp",
                JAVATUPLES,
                "-d",
                "classes",
                "Main.java",
            ),
            class_path=(JAVATUPLES,),
            libraries=((JAVATUPLES, "libjavatuples-java"),),
            artifact="prog.jar",
            pack="jar",
            run_argv=(
                "java",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xshare:auto",
                "-Xss64m",
                "-Xmx{memory_mb}m",
                "-ea",
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
        *_MORE,
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


def run_words(argv: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """A command line's leading ``NAME=value`` words (its environment) and the rest."""
    words = list(argv)
    env: list[str] = []
    while words and "=" in words[0] and "/" not in words[0].partition("=")[0]:
        env.append(words.pop(0))
    return env, words


def programs(lang: Language) -> list[str]:
    """The programs ``lang``'s command lines name, found on ``SYSTEM_PATH``."""
    wanted = {lang.tool}
    if lang.compile_argv:
        wanted.add(lang.compile_argv[0])
    first = run_words(lang.run_argv)[1][0]
    if "/" not in first and not first.startswith("{"):
        wanted.add(first)
    return sorted(wanted)


@functools.cache
def toolchain(name: str) -> Toolchain:
    """The toolchain of language ``name`` on this host (looked up once per process)."""
    lang = language(name)
    if lang.unavailable:
        return Toolchain(name, None, "")
    tools = {tool: _system_which(tool) for tool in programs(lang)}
    found = {k: v for k, v in tools.items() if v is not None}
    if len(found) < len(tools) or not all(os.path.isfile(f) for f in lang.files):
        return Toolchain(name, None, "", found)
    path = found[lang.tool]
    return Toolchain(name, path, _version([path, *lang.version_argv]), found)


def missing_libraries(name: str) -> list[str]:
    """The Debian packages of ``name``'s ``libraries`` this host lacks."""
    return [package for path, package in language(name).libraries if not os.path.exists(path)]


def etc_folders() -> list[str]:
    """The ``/etc`` folders of every language's toolchain that this host has (``etc``)."""
    return sorted({f for lang in LANGUAGES.values() for f in lang.etc if os.path.isdir(f)})


def toolchains() -> list[Toolchain]:
    """Every language's toolchain on this host, in ``LANGUAGES``'s order."""
    return [toolchain(name) for name in LANGUAGES]


def require(name: str) -> Toolchain:
    """The toolchain of language ``name``; ``ConfigError`` in one line, naming the package to
    install, where this host lacks it."""
    tc = toolchain(name)
    if not tc.present:
        raise ConfigError(refusal(name))
    return tc


def refusal(name: str) -> str:
    """Why answers in language ``name`` are refused here, in one line: what to install."""
    lang = language(name)
    if lang.unavailable:
        return f"language {name!r} is not run here: {lang.unavailable}"
    missing = [t for t in programs(lang) if _system_which(t) is None]
    missing += [f for f in lang.files if not os.path.isfile(f)]
    what = ", ".join(missing) or lang.tool
    return (
        f"language {name!r} needs {what} in /usr, which this host lacks: "
        f"install Debian's {lang.package} package (apt-get install {lang.package})"
    )
