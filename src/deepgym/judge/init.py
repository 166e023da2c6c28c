"""The init of an answer's pid namespace: pid 1 is ours, so that the answer is an ordinary process.

The kernel drops every signal that reaches a pid namespace's first process (its init) from inside
the namespace without a handler to run: an answer that is pid 1 survives its own
``raise(SIGTERM)``, prints on after ``os.kill(os.getpid(), SIGTERM)``, and ends ``abort()`` by
SIGSEGV. So in both sandboxes pid 1 of the answer's namespace is an init of deepgym's own, and the
answer runs as pid 2 (its own processes above that), where signals act as on any host.

Threat model: the init shares the answer's uid and pid namespace, so nothing of it may be the
answer's to use:

- it is non-dumpable from its first instant among the answer's processes: the answer, which has
  no capability, can neither trace it nor reach its memory or descriptors (``ptrace``,
  ``process_vm_readv``, ``pidfd_getfd``, ``/proc/<pid>``), which is the attack of
  ``tests/languages/test_attacks.py``'s ``test_ptrace_of_the_parent_fails``;
- it holds none of the run's descriptors (the pool's holds its factory's socket end, which only
  the zygote's end talks to; the strict one keeps the write end of its status pipe, which
  nothing of the answer's holds);
- it forwards no signal and runs no handler (the pool's runs no code of ours at all; the strict
  one removes Python's ``SIGINT`` handler): as pid 1 it drops whatever the answer sends it,
  ``SIGKILL`` included, so the answer cannot stop, end or wake it;
- it dies with its parent, and when it ends the kernel ends every process of its namespace;
- what the answer orphans is reaped.

Two forms, one per sandbox:

- pool: made per run by the worker's **init factory** (``factory``), a small process the worker
  forks at its start, before its heavy imports, as pid 1 of the pid namespace the zygote is then
  forked into (``deepgym.judge.worker``). The factory is non-dumpable from its first line, has
  no signal handler, ignores ``SIGCHLD`` and holds no descriptor but its socket to the zygote;
  it keeps the worker's capabilities (it makes pid namespaces), under the zygote's own seal:
  an empty bounding set, no-new-privileges, the seccomp filter, the verifier's folders covered.
  Per request it makes a new pid namespace and, as its pid 1, a process that shares the
  factory's memory and runs the C library's ``pause`` (``_Maker``): it is the factory's memory,
  so it is non-dumpable from birth, and it costs the factory no copy of its page tables (a
  fork of the zygote, which this replaces, cost about 1 ms of CPU per run). The zygote gets its
  pidfd and its namespace, forks the solution process into that namespace as pid 2, its own
  child (so its exit status and rusage reach the judge as they always did), and ends the init
  with the run (``SIGKILL`` from the parent namespace, which an init cannot drop), then waits
  for its end on the pidfd. The kernel reaps what is reparented to the init, and the init
  itself (both ignore ``SIGCHLD``). The init dies with the factory (pid 1 of a namespace above
  it: its end ends every process below); the factory dies with the worker and ends when the
  zygote's end of its socket closes, so a lost zygote ends everything of its runs. The answer
  cannot reach the factory: it has no pid in the answer's namespace, and nothing of the
  answer's holds its socket.
- ``supervise`` (strict): the solution sandbox's pid 1 (bwrap's ``--as-pid-1``) forks the
  solution host as its child, pid 2, and returns into that child. The init reaps whatever is
  reparented to it and, when its child ends, writes the child's wait status on its status pipe
  (the host's exact record: ``deepgym.sandbox.served``) and exits with the child's exit code, or
  128 + its signal (bwrap's own convention, which ``deepgym.sandbox.spawn.exit_signal`` reads
  where there is no status pipe: a compiler's sandbox).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (``signal`` without its enums: no start-up cost)
import os

from . import isolate
from .codes import SETUP_FAILED

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import NoReturn

NAME = "dg-init"
"""The name ``ps`` shows for an init (its ``comm``)."""
FACTORY_NAME = "dg-init-factory"
"""The name ``ps`` shows for the pool's init factory."""
STACK_BYTES = 65536
"""The stack the pool's inits run ``pause`` on (they need a few words of it)."""
TOP_FD = 65536
"""Descriptors below this are closed (as a pool's solution process closes the zygote's)."""


def _close_all_but(keep: int | None) -> None:
    top = TOP_FD
    if keep is None:
        os.closerange(0, top)
    else:
        os.closerange(0, keep)
        os.closerange(keep + 1, top)


def factory(sock: socket.socket) -> NoReturn:
    """The pool's init factory, in the child the worker forked as pid 1 of the zygote's pid
    namespace (``deepgym.judge.worker``): per request on ``sock`` (one byte), make an init and
    send back its pidfd and its pid namespace (``SCM_RIGHTS``); end when the zygote's end closes
    (the zygote is gone: this process's end then ends the zygote's whole namespace). Never
    returns."""
    import _socket  # (here: the strict sandbox's init loads neither)
    import array

    code = SETUP_FAILED
    try:
        isolate.dumpable(False)  # before any init: each shares this memory, and this flag
        isolate.set_process_name(FACTORY_NAME)
        isolate.die_with_parent()
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # the one handler Python installs
        _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # the kernel reaps the inits
        _close_all_but(sock.fileno())
        # No view of the verifier's files (``/proc``, which it reads its namespaces from,
        # stays), and nothing an exec could gain: the zygote's own seal, less what only
        # solutions need.
        isolate.unshare(isolate.CLONE_NEWNS)
        isolate.make_private()
        isolate.hide(tuple(f for f in isolate.VERIFIER_FOLDERS if f != "/proc"))
        os.chdir("/")
        isolate.lock()
        make = _Maker()
        while sock.recv(16):
            try:
                fds = make()
            except OSError as exc:
                sock.send(b"E" + str(exc).encode(errors="replace"))
                continue
            try:
                rights = (_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array.array("i", fds))
                sock.sendmsg([b"I"], [rights])
            finally:
                for fd in fds:
                    os.close(fd)
        code = 0
    finally:
        os._exit(code)


class _Maker:
    """Makes an init: ``clone(CLONE_VM | CLONE_PIDFD)`` into a new pid namespace, running the C
    library's ``pause``. It shares the factory's memory, so it costs neither a copy of the
    factory's page tables nor an exit that unmaps them (measured: about 0.05 ms of CPU, where a
    fork of a small Python process costs 0.4 ms, of the zygote about 1 ms), and so its
    non-dumpable flag, which is the memory's. It copies the rest of the factory's state at its
    birth: credentials, signal dispositions (none handled; ``SIGCHLD`` ignored), descriptors
    (the factory's socket end, nothing else), mount namespace. It runs no code of ours:
    ``pause`` returns only once a handler has run, and it has none.

    Every init runs on one stack: what an init's start writes there (the function to call and
    its argument, then the frame of a ``pause`` that never returns) is the same for every init,
    and nothing reads it back once ``pause`` has begun."""

    def __init__(self) -> None:
        import ctypes

        lib = isolate.libc()
        self.clone = lib.clone
        self.clone.restype = ctypes.c_int
        self.clone.argtypes = (
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_int),
        )
        self.pause = ctypes.cast(lib.pause, ctypes.c_void_p)
        self.stack = ctypes.create_string_buffer(STACK_BYTES)
        self.top = (ctypes.addressof(self.stack) + STACK_BYTES) & ~15  # aligned, as the ABI asks
        self.pidfd = ctypes.c_int(-1)
        self.pidfd_ref = ctypes.byref(self.pidfd)
        self.flags = isolate.CLONE_VM | isolate.CLONE_PIDFD | _signal.SIGCHLD
        self.get_errno = ctypes.get_errno

    def __call__(self) -> tuple[int, int]:
        """A new init: its pidfd and a descriptor of its pid namespace (which the zygote joins
        with: a pidfd would not do, the init being non-dumpable)."""
        isolate.unshare(isolate.CLONE_NEWPID)  # (this process's next child is its pid 1)
        try:
            isolate.set_process_name(NAME)  # what the init's name is copied from
            try:
                pid = self.clone(self.pause, self.top, self.flags, None, self.pidfd_ref)
            finally:
                isolate.set_process_name(FACTORY_NAME)
            if pid < 0:
                err = self.get_errno()
                raise OSError(err, f"clone: {os.strerror(err)}")
            pidfd = self.pidfd.value
            try:
                return pidfd, os.open("/proc/self/ns/pid_for_children", os.O_RDONLY)
            except BaseException:
                _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
                os.close(pidfd)
                raise
        finally:  # back to its own namespace (opened now: no init holds it)
            own = os.open("/proc/self/ns/pid", os.O_RDONLY)
            try:
                isolate.setns(own, isolate.CLONE_NEWPID)
            finally:
                os.close(own)


def supervise(status_fd: int | None) -> None:
    """strict: become the init of this pid namespace, whose pid 1 this process is, and return
    in its one child (pid 2), which goes on as the solution process. ``status_fd``: where the
    init writes the child's wait status (closed in the child)."""
    isolate.dumpable(False)  # no other process is in the namespace yet: none could trace it
    handler = _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    pid = os.fork()
    if pid:
        _wait(pid, status_fd)
    _signal.signal(_signal.SIGINT, handler)  # an ordinary Python process, as anywhere
    isolate.dumpable(True)  # (its own children may trace it, as anywhere)
    if status_fd is not None:
        os.close(status_fd)


def _wait(child: int, status_fd: int | None) -> NoReturn:
    """The strict init's life: reap until ``child`` ends, then report its status and exit."""
    code = SETUP_FAILED  # the init itself failed: ours, and the answer ends with it
    try:
        isolate.set_process_name(NAME)
        isolate.die_with_parent()  # (bwrap asked it too: --die-with-parent)
        _close_all_but(status_fd)
        while True:
            pid, status = os.waitpid(-1, 0)  # it has a child until the end: no signal wakes it
            if pid == child:
                break
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if status_fd is not None:
            try:
                os.write(status_fd, b"%d" % status)
            except OSError:  # the host stopped listening: it has no use for the status
                pass
    finally:
        os._exit(code)
