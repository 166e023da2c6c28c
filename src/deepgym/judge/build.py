"""Build an answer written in a compiled language, inside its own solution sandbox.

``solution build PATH LIMITS SPEC_JSON`` (``solution_host``'s ``build`` mode) copies the answer at
PATH into a build folder under its work dir, under the name the language wants, runs the
compiler there, and writes the program it leaves to stdout: the host keeps it (in its compile
cache) and hands it to each run. The compiler's diagnostics go to stderr.

The compiler starting on the answer's source is the instant the answer comes into play (as the
verifier opening the answer's file is): from then on, whatever stops the build is the answer's,
and before it, ours (``deepgym.verdict.compile_outcome``). The host learns which side of that
instant a build ended on only from what the compiler cannot reach or forge (it runs as the same
uid, and a source can make it read any file, a pipe of this process's included):

- the exit code, for a build that ended by itself. Only this function gives ``BUILT``,
  ``REJECTED``, ``CRASHED`` and ``STOPPED``, once the compiler has run; bwrap's own failures
  and an interpreter's (exit 1, 2, 120, 128 + n) and a set-up's (``SETUP_FAILED``) are none
  of them:

  - ``BUILT`` (0): the program is on stdout;
  - ``REJECTED``: the compiler refused the source (exited non-zero);
  - ``CRASHED``: the compiler died by a signal of its own (a fault: SIGSEGV, SIGABRT, ...),
    failed with its internal-error code, or left no program;
  - ``STOPPED``: the compiler was ended by a stop signal (``codes.STOP_SIGNALS``): from
    outside, by the memory cgroup's OOM killer (the host's evidence says which) or the host;

- the name this process gives itself (``COMPILING``, ``prctl(PR_SET_NAME)``: only the process
  itself can set it) once the compiler has started, for a build the host ends on its clock: it
  reads the name from ``/proc/<pid>/comm`` before the kill.

``exec`` mode then runs that program: ``solution exec PATH LIMITS ARGV...``, where the word
``{program}`` in ARGV stands for PATH (``java -jar {program}``, or ``{program}`` alone), and
leading ``NAME=value`` words set the program's environment (as ``env`` takes them); a word
that holds ``{program}`` within it (``.read {program}``) names it there too.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (``signal`` without its enums: no start-up cost)
import os

from . import wire
from .codes import BEGAN, EXEC_FAILED, SETUP_FAILED, STOP_SIGNALS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BUILT = 0
REJECTED = 10
CRASHED = 11
STOPPED = 12
COMPILING = "dg-compiling"
"""The build process's name once its compiler has started (see the module)."""
PR_SET_NAME = 15
BUILD_DIR = "build"
PROGRAM = "{program}"
RUN_NAME = "DEEPGYM_RUN_NAME"
"""A ``NAME=value`` word of a run's command line that ``run_program`` takes for itself: the
program is copied to that name in the work dir, and ``{program}`` names the copy."""
MANIFEST = "Manifest-Version: 1.0\r\nMain-Class: Main\r\nCreated-By: deepgym\r\n\r\n"


def _pack_jar(classes: str, jar: str, class_path: list[str]) -> None:
    """Every file under ``classes`` in a runnable jar whose main class is ``Main``, naming
    ``class_path`` (absolute jars, where they are) on its class path."""
    import zipfile

    manifest = MANIFEST
    if class_path:
        entry = "Class-Path: " + " ".join(f"file:{p}" for p in class_path) + "\r\n"
        manifest = manifest.removesuffix("\r\n") + entry + "\r\n"
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("META-INF/MANIFEST.MF", manifest)
        for folder, dirs, names in os.walk(classes):
            dirs.sort()
            for name in sorted(names):
                full = os.path.join(folder, name)
                z.write(full, os.path.relpath(full, classes))


def _add_class_path(jar: str, class_path: list[str]) -> None:
    """Name ``class_path`` (absolute jars: a language's runtime library) in the manifest of
    the compiler's ``jar`` (whose main class the compiler chose), so ``java -jar`` runs it."""
    import zipfile

    entry = "Class-Path: " + " ".join(f"file:{p}" for p in class_path) + "\r\n"
    packed = jar + ".part"
    try:
        with zipfile.ZipFile(jar) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as z:
            for info in src.infolist():
                data = src.read(info)
                if info.filename == "META-INF/MANIFEST.MF":
                    text = data.decode("utf-8", "replace").rstrip("\r\n") + "\r\n"
                    data = (text + entry + "\r\n").encode()
                z.writestr(info, data)
    except zipfile.BadZipFile as exc:  # (no OSError of its own): the compiler left no jar
        raise OSError(f"{jar}: {exc}") from exc
    os.replace(packed, jar)


def _name_self(name: str) -> bool:
    """Give this process the name ``name`` (``prctl(PR_SET_NAME)``: what ``/proc/<pid>/comm``
    shows, which only the process itself can set); whether that worked."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_NAME, name.encode(), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def build(path: str, spec: dict[str, Any]) -> int:
    """Compile the answer at ``path`` as ``spec`` says; see the module's docstring. (Its
    imports are its own: each test case's ``exec`` loads this module too, and pays for what
    it imports.)"""
    import signal
    import subprocess

    try:
        os.makedirs(BUILD_DIR, exist_ok=True)
        with open(path, "rb") as f:
            source = f.read()
        with open(os.path.join(BUILD_DIR, spec["source"]), "wb") as f:
            f.write(source)
        env = {**os.environ, **spec.get("env", {})}
    except (OSError, KeyError, TypeError) as exc:
        os.write(2, f"build set-up failed: {exc}\n".encode())
        return SETUP_FAILED
    try:
        compiler = subprocess.Popen(
            list(spec["argv"]),
            cwd=BUILD_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=2,
            stderr=2,
        )
    except OSError as exc:  # the compiler could not start: ours
        os.write(2, f"the compiler did not start: {exc}\n".encode())
        return SETUP_FAILED
    if not _name_self(COMPILING):  # the compiler has started (Popen returned after its exec)
        compiler.kill()  # without the name, a build the host ends would read as ours: say so now
        compiler.wait()
        os.write(2, b"build set-up failed: the build process could not name itself\n")
        return SETUP_FAILED
    code = compiler.wait()
    if code < 0 and -code in STOP_SIGNALS:
        os.write(2, f"\nthe compiler was ended by {signal.Signals(-code).name}\n".encode())
        return STOPPED
    if code < 0:
        os.write(2, f"\nthe compiler died by {signal.Signals(-code).name}\n".encode())
        return CRASHED
    if code in spec.get("crash_codes", ()):
        os.write(2, f"\nthe compiler failed with its internal-error code {code}\n".encode())
        return CRASHED
    if code != 0:
        return REJECTED
    artifact = os.path.join(BUILD_DIR, spec["artifact"])
    try:
        if spec.get("pack") == "jar":
            _pack_jar(
                os.path.join(BUILD_DIR, "classes"), artifact, list(spec.get("class_path", ()))
            )
        elif spec.get("pack") == "class-path":
            _add_class_path(artifact, list(spec.get("class_path", ())))
        with open(artifact, "rb") as f:
            program = f.read()
    except OSError as exc:
        os.write(2, f"\nthe compiler left no program: {exc}\n".encode())
        return CRASHED
    with open(1, "wb", closefd=False) as out:  # the program, whole, on stdout
        out.write(program)
    return BUILT


def program_command(path: str, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command line and the environment variables of a run of the built program at
    ``path`` (``argv``'s ``{program}``, leading ``NAME=value`` words its environment); where
    ``argv`` names it (``DEEPGYM_RUN_NAME=NAME``), a copy of it named so in the work dir (a test
    runner finds its tests by their file's name). ``OSError`` where the copy cannot be made or
    nothing is left to run (ours: the program has not run)."""
    words = list(argv)
    env: dict[str, str] = {}
    while words and "=" in words[0] and "/" not in words[0].partition("=")[0]:
        name, _, value = words.pop(0).partition("=")
        if name == RUN_NAME:
            try:
                path = _copy_as(path, value)
            except OSError as exc:
                raise OSError(f"cannot name the program: {exc}") from None
            continue
        env[name] = value
    words = [w.replace(PROGRAM, path) for w in words]
    if not words:
        raise OSError("exec: no command line")
    return words, env


def run_program(path: str, argv: list[str]) -> int:
    """Replace this process with the built program at ``path`` (``program_command``)."""
    try:
        words, env = program_command(path, argv)
    except OSError as exc:
        os.write(2, f"solution set-up failed: {exc}\n".encode())
        return SETUP_FAILED
    os.environ.update(env)
    os.close(3)  # the call pipe: a program serves no calls
    os.closerange(5, 6)  # the io socket, where the set-up left it open
    # The reply pipe says the program begins, and closes on its exec: where the exec fails, it
    # says so after (``EXEC_FAILED``), and the failure is ours, never the answer's exit code.
    os.set_inheritable(4, False)
    try:  # as ``solution_host.began`` says it for a script
        os.write(4, BEGAN)
    except OSError:
        pass
    # Python ignores SIGPIPE and SIGXFSZ, and an exec keeps what is ignored: the program gets
    # them back as a shell or ``subprocess`` would start it (a write to a closed pipe, or past
    # the file size limit, ends it by the signal, as on any host).
    for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(sig, _signal.SIG_DFL)
    try:
        os.execv(words[0], words)
    except OSError as exc:  # ours: the program's own code has not run
        os.write(2, f"solution set-up failed: cannot run {words[0]}: {exc}\n".encode())
        try:
            os.write(4, EXEC_FAILED)
        except OSError:
            pass
    return SETUP_FAILED


def _copy_as(path: str, name: str) -> str:
    """A copy of the program at ``path`` named ``name`` in the work dir (a plain name)."""
    if "/" in name or name in ("", ".", ".."):
        raise OSError(f"not a plain file name: {name!r}")
    target = os.path.join(os.getcwd(), name)
    with open(path, "rb") as src, open(target, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
    return target


def main(mode: str, path: str, args: list[str]) -> int:
    """``build PATH SPEC_JSON`` or ``exec PATH ARGV...``, as ``solution_host`` hands them on."""
    if mode == "build":
        return build(path, wire.loads(args[0]))
    return run_program(path, args)
