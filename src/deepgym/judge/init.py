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
- it holds none of the run's descriptors (the strict one keeps the write end of its status pipe,
  which nothing of the answer's holds);
- it forwards no signal and runs no handler (Python's ``SIGINT`` handler is removed): as pid 1 it
  drops whatever the answer sends it, ``SIGKILL`` included, so the answer cannot stop, end or
  wake it;
- it dies with its parent, and when it ends the kernel ends every process of its namespace.

Two forms, one per sandbox:

- ``reap`` (pool): forked by the worker's zygote as the namespace's first process
  (``deepgym.judge.worker``). The zygote then forks the solution process into the namespace beside
  it, and waits for it itself, so its exit status and rusage reach the judge as they always did.
  The init only has the kernel reap what is reparented to it (``SIGCHLD`` ignored: nothing ever
  wakes it) until the zygote ends it with the run.
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
    from typing import NoReturn

NAME = "dg-init"
"""The name ``ps`` shows for an init (its ``comm``)."""
TOP_FD = 65536
"""Descriptors below this are closed (as a pool's solution process closes the zygote's)."""


def _close_all_but(keep: int | None) -> None:
    top = TOP_FD
    if keep is None:
        os.closerange(0, top)
    else:
        os.closerange(0, keep)
        os.closerange(keep + 1, top)


def reap() -> NoReturn:
    """The pool's init, in the child the zygote forked, non-dumpable, as the first process of a
    new pid namespace (``Zygote.fork``): reap what is reparented to it until it is killed. Never
    returns."""
    try:
        isolate.set_process_name(NAME)
        isolate.die_with_parent()
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # the one handler Python installs
        _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # what it inherits: reaped at its end
        _close_all_but(None)
        while True:
            _signal.pause()  # nothing ends this but the zygote's SIGKILL (or its death)
    finally:
        os._exit(SETUP_FAILED)


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
