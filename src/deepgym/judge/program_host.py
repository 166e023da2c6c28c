"""A pool run's program host: one sandbox for all the cases of a compiled program's run.

A program's case used to be a solution process of its own, forked from the worker's zygote,
set up (namespaces, tmpfs, the program written, capabilities dropped) and replaced by the
program (``build.run_program``): per case, a copy of a Python process made and torn down again
(about 3.6 ms of CPU a case, where the program itself takes 2). Here the zygote forks one
process per run, which sets up the sandbox once (``worker._prepare_run``) and then starts each
case's program itself with ``posix_spawn`` (a ``vfork``: no copy), on the worker's request:

- it is pid 1 of the run's pid namespace, so each program is an ordinary process (pid 2 or
  higher, as ``init``'s module asks), and nothing of the answer can signal it (the kernel drops
  every signal a namespace's init gets from inside without a handler to run, and it has none:
  the zygote's ``SIGINT`` is ignored); it is non-dumpable (the zygote's memory), so nothing of
  the answer can trace it or reach its memory or descriptors;
- before each case it ends whatever an earlier case left running (``kill(-1)``, which reaches
  every process of the namespace but itself), reaps it, and empties the work dir (all but the
  program), ``/tmp`` and ``/dev/shm``: each case starts as a fresh sandbox would;
- it writes the run's files, then starts the program with its pipes (stdin, stdout, stderr),
  in a session of its own, ``SIGPIPE``, ``SIGXFSZ`` and ``SIGINT`` at their defaults, and hands
  the worker the pipes' other ends and a pidfd (and, where the run reads files back, an io
  socket with the work dir's descriptor on it); the program's start is its ``exec`` done (an
  ``exec`` that fails fails the ``posix_spawn``: ours, the answer never ran);
- it reaps each case's program as it ends and tells the worker at once (no request), with its
  CPU time; it kills one on request.

Requests arrive on the io socket, one a line: ``F`` + the run's files and whether its work dir
is read back (``wire``; once, first, no reply), ``S`` + the program's arguments (``wire``: the
reply is ``pid`` and the descriptors), ``K`` + pid (kill: the reply is ``status cpu_ms``, or
``-1 0`` for a case already reported). A case's end comes unasked: ``P`` + ``pid status
cpu_ms``. A request it cannot serve is answered ``E`` + why (ours: the program has not run).
The run's rlimits are its own too (set once, before the first case); the host's own use is its
set-up and a few system calls a case.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (``signal`` without its enums)
import _socket
import os
import select
import struct

from . import build, files, wire
from .codes import MSG_MAX

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROGRAM_PATH = "/work/solution.py"
"""Where the solution process's set-up wrote the program (read-only)."""
CLEARED = {"/work": 0o755, "/tmp": 0o1777, "/dev/shm": 0o1777}
"""The writable folders emptied before each case (the program itself kept), with their modes
(a case may have changed them)."""
RESET = (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT)
"""What this process ignores and a program gets back at its default."""


def serve(job: dict[str, Any], ctl_fd: int) -> int:
    """Serve the worker's requests on ``ctl_fd`` until it closes it; the exit code."""
    ctl = _socket.socket(fileno=ctl_fd)
    ctl.setblocking(True)
    os.set_inheritable(ctl_fd, False)
    for fd in (0, 1, 2, 3, 4):  # the host's own pipes: no program inherits them
        try:
            os.set_inheritable(fd, False)
        except OSError:
            pass
    host = _Host(job, ctl)
    # Orphans of a case's program come to this process (pid 1): each is reaped as it ends,
    # woken by SIGCHLD (the one signal with a handler here, and a handler that does nothing: what
    # the answer's processes send it only wakes it), so none holds a slot of the process limit.
    r_wake, w_wake = os.pipe()
    os.set_blocking(w_wake, False)
    _signal.set_wakeup_fd(w_wake)
    _signal.signal(_signal.SIGCHLD, _ignore)
    poller = select.poll()
    poller.register(ctl_fd, select.POLLIN)
    poller.register(r_wake, select.POLLIN)
    buffer = b""
    while True:
        for fd, _ in poller.poll():
            if fd == r_wake:
                os.read(r_wake, 4096)
                host.reap()
                continue
            chunk = ctl.recv(MSG_MAX)
            if not chunk:
                return 0
            buffer += chunk
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                host.handle(line)


def _ignore(signum: int, frame: Any) -> None:
    """SIGCHLD's handler: the wakeup descriptor is what wakes the host."""


class _Host:
    def __init__(self, job: dict[str, Any], ctl: _socket.socket) -> None:
        self.job = job
        self.ctl = ctl
        self.live: set[int] = set()
        """The cases' programs not yet reaped and reported to the worker."""
        self.environ = dict(os.environ)
        """The programs' environment (``os.environ`` read once: each read decodes it all)."""

    def handle(self, line: bytes) -> None:
        op = line[:1]
        if op == b"F":
            got = wire.loads(line[1:].decode())
            self.job = {**self.job, "files": got.get("files") or {}, "fetch": got.get("fetch")}
        elif op == b"S":
            try:
                pid, fds = self.start(wire.loads(line[1:].decode()).get("args") or [])
            except Dirty as exc:
                self.ctl.send(b"D" + str(exc).encode(errors="replace") + b"\n")
                return
            except (OSError, ValueError) as exc:
                self.ctl.send(b"E" + str(exc).encode(errors="replace") + b"\n")
                return
            try:
                data = struct.pack(f"{len(fds)}i", *fds)
                self.ctl.sendmsg([b"%d\n" % pid], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, data)])
            finally:
                for fd in fds:
                    os.close(fd)
        elif op == b"K":
            status, cpu = self.kill(int(line[1:]))
            self.ctl.send(b"%d %.3f\n" % (status, cpu))
        else:
            self.ctl.send(b"Eunknown request\n")

    def start(self, args: list[Any]) -> tuple[int, list[int]]:
        """Start one case's program; its pid and the worker's ends of its descriptors (stdout,
        stderr, stdin, a pidfd, and the io socket where the run reads files back)."""
        self.sweep()
        job = self.job
        if job.get("files"):
            files.put(".", job["files"])
        words, env = build.program_command(PROGRAM_PATH, [str(a) for a in args])
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        r_in, w_in = os.pipe()
        mine, theirs = [r_out, r_err, w_in], [w_out, w_err, r_in]
        io = -1  # (the worker's end of the io socket, where the run reads files back)
        try:
            if job.get("fetch"):
                io_t, io_m = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
                theirs.append(io_t.detach())
                io = io_m.detach()
                files.send_dir(theirs[-1], ".")
            pid = os.posix_spawn(
                words[0],
                words,
                {**self.environ, **env},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, r_in, 0),
                    (os.POSIX_SPAWN_DUP2, w_out, 1),
                    (os.POSIX_SPAWN_DUP2, w_err, 2),
                ],
                setsid=True,
                setsigdef=RESET,
            )
        except BaseException:
            for fd in (*mine, io):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self.live.add(pid)
        try:
            mine.append(os.pidfd_open(pid))
        except BaseException:
            self.kill(pid)
            for fd in (*mine, io):
                if fd >= 0:
                    os.close(fd)
            raise
        if io >= 0:
            mine.append(io)
        return pid, mine

    def kill(self, pid: int) -> tuple[int, float]:
        """Kill and reap a case's program: its wait status and CPU ms (-1 0: no such case, or
        one already reported)."""
        if pid not in self.live:
            return -1, 0.0
        try:
            os.kill(pid, _signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status, usage = os.wait4(pid, 0)
        self.live.discard(pid)
        return status, (usage.ru_utime + usage.ru_stime) * 1000.0

    def reap(self) -> None:
        """Reap every process that has ended: an orphan, or a case's program, whose end the
        worker is told at once (``P``)."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.live:
                self.live.discard(pid)
                cpu = (usage.ru_utime + usage.ru_stime) * 1000.0
                self.ctl.send(b"P%d %d %.3f\n" % (pid, status, cpu))

    def sweep(self) -> None:
        """End what earlier cases left (every process of the namespace but this one), reap it,
        and empty the writable folders. Every process of the namespace descends from this one
        (its pid 1): with no child left, none is left."""
        left = False
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:  # (one still running: end them all, then wait for each)
                if not left:
                    left = True
                    os.kill(-1, _signal.SIGKILL)
                pid, _ = os.waitpid(-1, 0)
            self.live.discard(pid)
        for folder, mode in CLEARED.items():
            try:
                os.chmod(folder, mode)
            except FileNotFoundError:  # (no /dev/shm here)
                continue
            except OSError as exc:
                raise Dirty(f"{folder}: {exc}") from None
            _empty(folder, keep=PROGRAM_PATH)


MAX_DEPTH = 32
"""How deep a case's leftover folders are emptied; deeper (or anything that cannot be removed)
and the host gives up: the worker starts the next case on a new host (``Dirty``)."""


class Dirty(OSError):
    """What an earlier case left could not be cleared: the next case needs a new host."""


def _empty(folder: str, keep: str, depth: int = 0) -> None:
    """Remove everything under ``folder`` but the file ``keep`` (no link followed)."""
    if depth > MAX_DEPTH:
        raise Dirty(f"{folder}: folders nested too deep to clear")
    try:
        if depth:
            os.chmod(folder, 0o700)  # (a case may have left it unreadable)
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise Dirty(f"{folder}: {exc}") from None
    for entry in entries:
        if entry.path == keep:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                _empty(entry.path, keep, depth + 1)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except Dirty:
            raise
        except OSError as exc:
            raise Dirty(f"{entry.path}: {exc}") from None
