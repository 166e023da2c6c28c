"""The solution process: holds the answer and serves plain-data calls from the verifier.

Started by the verifier at its first use of the answer (the in-play instant), inside its own
namespaces. It sets its own hard limits before the answer's first line runs, then either imports
the answer and serves calls on fds 3 (requests) and 4 (replies) (``module`` mode), runs it as
``__main__`` with the test's stdin (``script`` mode), or serves calls without importing anything
(``repo`` mode: a patch task, whose verifier first sends the patched files with ``write_files``
and then calls ``"package.module:function"`` names), or builds or runs a compiled language's
program (``build`` and ``exec`` modes: ``judge.build``). The answer cannot raise a hard limit
back. Started as pid 1 of its sandbox (``strict``), it first forks itself under an init of ours
(``judge.init.supervise``) and goes on as pid 2: the answer is never a pid 1, which would ignore
its own signals.
"""

from __future__ import annotations

import os
import resource
import sys

from . import files, wire
from .codes import BEGAN, RUNTIME_ENV, SETUP_FAILED, STATUS_FD_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

REQ_FD = 3
REP_FD = 4
REPO_DIR = "repo"
"""Where ``write_files`` puts a patch task's files, under the solution's work dir."""
MAX_FILES = 10_000


def apply_limits(limits: dict[str, int]) -> None:
    """Hard and soft rlimits for this process and everything it starts."""
    table = {
        "as_bytes": resource.RLIMIT_AS,
        "cpu_s": resource.RLIMIT_CPU,
        "fsize_bytes": resource.RLIMIT_FSIZE,
        "nofile": resource.RLIMIT_NOFILE,
        "nproc": resource.RLIMIT_NPROC,
        "core": resource.RLIMIT_CORE,
    }
    for key, which in table.items():
        if key in limits:
            value = int(limits[key])
            resource.setrlimit(which, (value, value))


class _Refs:
    """Objects the verifier holds by id (class instances, generators, functions)."""

    def __init__(self) -> None:
        self.table: dict[int, Any] = {}

    def put(self, obj: Any) -> int:
        key = len(self.table) + 1
        self.table[key] = obj
        return key

    def get(self, key: int) -> Any:
        try:
            return self.table[key]
        except KeyError:
            raise LookupError(f"no remote object {key}") from None


def _error(exc: BaseException) -> dict[str, Any]:
    import traceback

    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": "".join(tb)[-4000:],
    }


def _resolve(module: Any, name: str) -> Any:
    """``name`` in the answer's module, or ``"package.module:attr.attr"`` imported by path."""
    if ":" not in name:
        if module is None:
            raise NameError(f"{name!r}: no answer module here; name it as 'module:attribute'")
        return getattr(module, name)
    mod_name, _, attr = name.partition(":")
    __import__(mod_name)
    obj = sys.modules[mod_name]
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _safe_target(root: str, rel: Any) -> str:
    """The absolute path for ``rel`` under ``root``; ``ValueError`` if it could leave it."""
    if not isinstance(rel, str) or not rel or "\0" in rel or rel.startswith("/"):
        raise ValueError(f"invalid path {rel!r}")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"invalid path {rel!r}")
    target = os.path.join(root, *parts)
    parent = os.path.realpath(os.path.dirname(target))
    if parent != root and not parent.startswith(root + os.sep):
        raise ValueError(f"path {rel!r} leaves the repository")
    return target


def write_files(files: Any, root: str) -> int:
    """Write ``{relative path: text}`` under ``root``, put ``root`` first on ``sys.path``.

    Paths are checked before anything is written; symlinks are not followed. Returns the count.
    """
    if not isinstance(files, dict) or len(files) > MAX_FILES:
        raise ValueError("write_files takes a mapping of at most 10,000 paths to texts")
    os.makedirs(root, exist_ok=True)
    root = os.path.realpath(root)
    for rel, text in files.items():
        if not isinstance(text, str):
            raise ValueError(f"{rel!r}: file contents must be text")
        _safe_target(root, rel)
    for rel, text in files.items():
        target = _safe_target(root, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    if root not in sys.path:
        sys.path.insert(0, root)
    return len(files)


def _serve_one(module: Any, refs: _Refs, req: dict[str, Any]) -> Any:
    op = req.get("op")
    if op == "call":
        fn = _resolve(module, str(req["name"]))
        return fn(*req.get("args", ()), **req.get("kwargs", {}))
    if op == "getattr":
        return _resolve(module, str(req["name"]))
    if op == "write_files":
        return write_files(req.get("files"), os.path.abspath(REPO_DIR))
    if op == "method":
        target = getattr(refs.get(req["ref"]), str(req["name"]))
        return target(*req.get("args", ()), **req.get("kwargs", {}))
    if op == "call_ref":
        return refs.get(req["ref"])(*req.get("args", ()), **req.get("kwargs", {}))
    if op == "attr_ref":
        return getattr(refs.get(req["ref"]), str(req["name"]))
    if op == "iter":
        return iter(refs.get(req["ref"]))
    if op == "next":
        return next(refs.get(req["ref"]))
    raise ValueError(f"unknown op {op!r}")


def _load_answer(path: str, source: bytes | None = None) -> Any:
    """Import the answer as module ``solution`` (without ``importlib``'s start-up cost);
    ``source``: the file's bytes, where the caller has them already."""
    if source is None:
        with open(path, "rb") as f:
            source = f.read()
    module = type(sys)("solution")
    module.__file__ = path
    sys.modules["solution"] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def _lines(fd: int) -> Iterator[bytes]:
    """The lines read from ``fd`` (the last one without its newline if the writer left it so),
    straight from the descriptor: no file object to set up per process."""
    parts: list[bytes] = []
    while chunk := os.read(fd, 65536):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            parts.append(chunk[start : end + 1])
            yield b"".join(parts) if len(parts) > 1 else parts[0]
            parts = []
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
    if parts:
        yield b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    """``data`` to ``fd`` (blocking), whatever a single write takes of it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _serve(path: str | None, source: bytes | None = None) -> int:
    """Serve requests; ``path`` None: import no answer (``repo`` mode)."""
    refs = _Refs()
    module: Any = None
    load_error: dict[str, Any] | None = None
    loaded = False
    write_all(REP_FD, READY)
    for line in _lines(REQ_FD):
        if not loaded:  # the answer loads at its first use: a process started ahead of time
            loaded = True  # runs none of it until the verifier asks
            try:
                module = _load_answer(path, source) if path is not None else None
            except BaseException as exc:  # the answer's own failure, reported on every call
                load_error = _error(exc)
            source = None
        if load_error is not None:
            reply: dict[str, Any] = {"err": load_error}
        else:
            try:
                req = wire.decode(line)
                reply = {"ok": _serve_one(module, refs, req)}
            except StopIteration:
                reply = {"stop": True}
            except BaseException as exc:  # SystemExit and KeyboardInterrupt in the answer too
                reply = {"err": _error(exc)}
        try:
            data = wire.encode(reply, refs.put)
        except (wire.WireError, RecursionError, TypeError, ValueError) as exc:
            data = wire.encode({"err": _error(exc)})
        write_all(REP_FD, data)
    return 0


def default_signals() -> None:
    """Every signal as a fresh interpreter on a plain host has it, whatever the process that
    started the sandbox inherited (``nohup`` ignores SIGHUP, a shell's background job SIGINT and
    SIGQUIT, a service manager may block some): none ignored but SIGPIPE and SIGXFSZ, which
    Python itself ignores (a program gets them back at its exec: ``judge.build``), SIGINT
    raising ``KeyboardInterrupt``, none blocked, glibc's own 32 and 33 not ignored either. (A
    pool's worker calls it once at its start: every process it forks inherits it.)"""
    import _signal  # type: ignore[import-not-found]  # (``signal`` without its enums)

    kept = {_signal.SIGKILL, _signal.SIGSTOP, _signal.SIGPIPE, _signal.SIGXFSZ}
    for sig in _signal.valid_signals():
        if sig not in kept and _signal.getsignal(sig) == _signal.SIG_IGN:
            dfl = _signal.default_int_handler if sig == _signal.SIGINT else _signal.SIG_DFL
            _signal.signal(sig, dfl)
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
    try:
        with open("/proc/self/status", "rb") as f:
            ignored = next((int(ln.split()[1], 16) for ln in f if ln.startswith(b"SigIgn:")), 0)
    except (OSError, ValueError):  # no /proc here: nothing more to read
        return
    reserved = [sig for sig in (32, 33) if ignored >> (sig - 1) & 1]
    if reserved:
        _default_reserved(reserved)


RT_SIGACTION = {"x86_64": 13, "aarch64": 134}
"""The ``rt_sigaction`` system call's number by machine."""


def _default_reserved(signals: list[int]) -> None:
    """Set ``signals`` (32 and 33, which glibc keeps for its threads and refuses to set) to
    their defaults by the kernel's own call: inherited as ignored, they would reach every
    program the answer runs."""
    import ctypes

    number = RT_SIGACTION.get(os.uname().machine)
    if number is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    action = (ctypes.c_ulong * 4)()  # handler SIG_DFL, no flags, no restorer, an empty mask
    for sig in signals:
        libc.syscall(number, sig, ctypes.byref(action), None, 8)


def _take_host_setup() -> int | None:
    """What a host that started this process ahead of time passes in the environment: cgroup
    files to join, and where the RPC pipes are (moved to fds 3 and 4) and its io socket (to
    ``files.IO_FD``, returned; None: none). Done before any of the answer runs, and removed
    from the environment the answer sees."""
    join_cgroups(os.environ.pop("DEEPGYM_CGROUP_PROCS", ""))
    fds = [int(x) for x in os.environ.pop("DEEPGYM_RPC_FDS", "").split(",") if x]
    if fds:
        move_fds(fds, REQ_FD)
    return files.IO_FD if len(fds) > 2 else None


def use_runtime(site: str | None = None) -> None:
    """The answer's runtime: its packages' folder (``site``, where the caller has it; else
    ``RUNTIME_ENV``, set where its environment names one, and then taken out of the environment
    the answer sees) last on ``sys.path``, after the standard library's. Nothing else is added:
    the interpreter runs isolated (``-I -S``), so no package of the host's is on the path."""
    if site is None:
        site = os.environ.pop(RUNTIME_ENV, "")
    if site:
        sys.path.append(site)


def join_cgroups(value: str) -> None:
    """Join the groups ``value`` names (``DEEPGYM_CGROUP_PROCS``, ``:``-separated): a
    ``cgroup.procs`` path (cgroup v1), or ``&N``, a descriptor of one the host opened (cgroup v2:
    the kernel checks the move in the opener's cgroup namespace), closed once used."""
    for entry in filter(None, value.split(":")):
        if entry.startswith("&"):
            fd = int(entry[1:])
            os.write(fd, b"0")
            os.close(fd)
        else:
            with open(entry, "w") as f:
                f.write("0")


def move_fds(fds: list[int], first: int) -> None:
    """Put ``fds`` on ``first``, ``first + 1``, ...: through numbers above all of them, so no
    descriptor is overwritten before it is moved, whatever numbers they had."""
    top = max([*fds, first + len(fds)]) + 1
    for i, fd in enumerate(fds):
        os.dup2(fd, top + i)
    for fd in fds:
        if fd not in range(first, first + len(fds)):
            os.close(fd)
    for i in range(len(fds)):
        os.dup2(top + i, first + i)
        os.close(top + i)


def _say(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
    except Exception:  # a closed or full stderr: the answer's own doing
        pass


def report_uncaught(exc: BaseException, path: str) -> None:
    """Write the traceback of ``exc``, which the answer at ``path`` raised and did not catch,
    to stderr through ``sys.excepthook``, as Python does for a script: from the answer's first
    frame (none of the judge's), or, for a syntax error, no frame at all."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    exc.__traceback__ = tb
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException:  # a hook of the answer's that fails: Python's own then
        try:
            sys.__excepthook__(type(exc), exc, tb)
        except Exception:  # a closed or full stderr: nothing more to say
            pass


READY = b'{"ready":true}\n'
"""The solution host's first line in module and repo mode: set up, the answer not yet loaded.
A process that dies before it is the sandbox's failure, never the answer's."""


def began() -> None:
    """Say on the reply pipe that the set-up is done and the answer runs next (``BEGAN``): a
    script's or a program's process has no other word for the judge, which can then tell its
    own failure (``SETUP_FAILED`` before this) from the answer's exit code (after it)."""
    try:
        write_all(REP_FD, BEGAN)
    except OSError:  # no judge reads it (a direct run): nothing to tell
        pass


def main(
    argv: list[str],
    source: bytes | None = None,
    prepared: bool = False,
    io: int | None = None,
    site: str = "",
) -> int:
    """``solution module|script|repo|build|exec PATH LIMITS_JSON [ARGS...]``; ``source``: the
    bytes of PATH, where the caller (a pool's solution process, which wrote it) has them;
    ``prepared``: the caller has put the pipes in place (its io socket at ``io``) and made
    PATH's folder the working dir and passes its runtime's packages' folder as ``site`` (a
    pool's solution process: nothing of the host's setup is in its environment; a lookup of a
    variable it lacks would cost the answer's process pages of its own, from its exception). A
    script or program takes its run's files on the io socket, and hands over its work dir where
    the run reads files back (``files``), before its first line."""
    mode, path, limits_json, *args = argv
    try:
        if not prepared:
            status_fd = os.environ.pop(STATUS_FD_ENV, "")
            if os.getpid() == 1:  # a strict sandbox's: its init is ours, the answer runs as pid 2
                from . import init

                init.supervise(int(status_fd) if status_fd else None)
            elif status_fd:
                os.close(int(status_fd))
            default_signals()
            io = _take_host_setup()
        use_runtime(site if prepared else None)
        apply_limits(wire.loads(limits_json))
        if not prepared:
            os.chdir(os.path.dirname(path) or "/")
        if io is not None:
            if mode in ("script", "exec"):
                files.serve_io(io, ".")  # (closes it)
            else:
                os.close(io)
    except BaseException as exc:  # ours: the answer has not run
        os.write(2, f"solution set-up failed: {exc}\n".encode())
        return SETUP_FAILED
    if mode == "module":
        return _serve(path, source)
    if mode == "repo":
        return _serve(None)
    if mode in ("build", "exec"):  # a compiled language's answer (``build``)
        from . import build

        return build.main(mode, path, args)
    began()  # the answer runs from here: its exit code, whatever it is, is its own
    os.close(REP_FD)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))  # as ``python PATH`` has it: its files import
    import runpy

    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, int):
            return code
        if code is not None:  # ``sys.exit("why")``: Python prints it, and exits 1
            _say(str(code))
        return 0 if code is None else 1
    except BaseException as exc:  # uncaught in the answer: reported as ``python answer.py`` does
        report_uncaught(exc, path)
        return 1
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # a closed or full stdout: the answer's own doing
            pass
    return 0
