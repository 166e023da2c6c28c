"""The init of an answer's pid namespace: pid 1 is ours, so that the answer is an ordinary process.

The kernel drops every signal that reaches a pid namespace's first process (its init) from inside
the namespace without a handler to run: an answer that is pid 1 survives its own
``raise(SIGTERM)``, prints on after ``os.kill(os.getpid(), SIGTERM)``, and ends ``abort()`` by
SIGSEGV. So in both sandboxes pid 1 of the answer's namespace is an init of deepgym's own, and the
answer runs as pid 2 or higher (a pool's namespace may serve several runs in turn, one at a time,
when each leaves nothing behind), where signals act as on any host.

Threat model: the init shares the answer's uid and pid namespace, so nothing of it may be the
answer's to use:

- it is non-dumpable from its first instant among the answer's processes: the answer, which has
  no capability, can neither trace it nor reach its memory or descriptors (``ptrace``,
  ``process_vm_readv``, ``pidfd_getfd``, ``/proc/<pid>``), which is the attack of
  ``tests/languages/test_attacks.py``'s ``test_ptrace_of_the_parent_fails``;
- it holds no descriptor of its own (the pool's shares its zygote's table, so it keeps nothing
  open that the zygote closed; the strict one keeps the write end of its status pipe, which
  nothing of the answer's holds);
- it forwards no signal and runs no handler (the pool's runs no code of ours at all, only a few
  machine instructions; the strict one removes Python's ``SIGINT`` handler): as pid 1 it drops
  whatever the answer sends it, ``SIGKILL`` included, so the answer cannot stop, end or wake it;
- it dies with its parent, and when it ends the kernel ends every process of its namespace;
- what the answer orphans is reaped.

Two forms, one per sandbox:

- ``Maker`` (pool): the worker's zygote (``deepgym.judge.worker``) makes one before it forks a
  solution process, where no init is at hand (the last run's, whose namespace it left empty,
  serves the next: ``Zygote.end``): it enters a new pid namespace for its children (``unshare``)
  and clones, as that namespace's pid 1, a process that shares the zygote's memory and descriptor
  table (``CLONE_VM | CLONE_FILES``) and runs a few machine instructions: ignore ``SIGCHLD`` (the
  kernel then reaps what the answer orphans), reap what ended before that (on a loaded host an init
  may first run after an orphan of the answer's has ended), then wait for ever. It is the zygote's
  memory, which the zygote made non-dumpable, so it is non-dumpable from birth; it costs no copy of
  page tables or descriptors (a fork of the zygote cost about 1 ms of CPU per run). Its
  dispositions are a copy of the zygote's, which has no handler (the zygote ignores ``SIGINT``, the
  one Python installs), so every signal the answer sends it is dropped. The zygote then forks the
  solution process into the namespace, as its pid 2 (or higher, in a namespace that served a run
  before: ``enter``) and the zygote's own child (so its exit status and rusage reach the judge as
  they always did), goes back to its own namespace, and ends the init once a run leaves something
  behind in its namespace (``SIGKILL`` from the parent namespace, which an init cannot drop), then
  reaps it.
  The zygote is pid 1 of the pid namespace above: its end ends every init and run below it.
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
NAME_BYTES = NAME.encode()
STACK_BYTES = 4096
"""The page a pool's init starts on, its stack at the top (the C library's ``clone`` puts two
words there; the init's code uses none), the pidfd at the bottom."""
TOP_FD = 65536
"""Descriptors below this are closed (as a pool's solution process closes the zygote's)."""
WALL = 0x40000000
"""``__WALL``: wait for a child whatever its exit signal (an init's is none)."""
FOR_CHILDREN = "thread-self/ns/pid_for_children"
"""The pid namespace this thread's next children are born in, below ``/proc``."""

INIT_CODE = {
    # rt_sigaction(SIGCHLD, &{SIG_IGN}, NULL, 8); wait4(-1, NULL, WNOHANG | __WALL, NULL) while
    # it reaps one; then pause() for ever. The action: four words, the handler SIG_IGN (1) and
    # the rest 0. (Assembled from the source in ``Maker``'s docstring; tests/judge/test_init.py
    # and tests/languages/test_signals.py check the init.)
    "x86_64": (
        "b80d000000bf11000000488d352f00000031d241ba080000000f05b83d000000bfffffffff31f6ba"
        "010000404531d20f0585c07fe6b8220000000f05ebf76690"
        "0100000000000000000000000000000000000000000000000000000000000000"
    ),
    # the same with ppoll(NULL, 0, NULL, NULL, 0) for pause, which arm64 does not have (run
    # under qemu-aarch64 after a forked child had ended: it reaped it, then waited)
    "aarch64": (
        "200280d2e1020010020080d2030180d2c81080d2010000d400008092010080d2220080d20200a8f2"
        "030080d2882080d2010000d41f0000f10cffff54000080d2010080d2020080d2030080d2040080d2"
        "280980d2010000d4f9ffff171f2003d5"
        "0100000000000000000000000000000000000000000000000000000000000000"
    ),
}
"""The pool's init, as machine code, by ``uname -m`` (the seccomp filter, ``isolate``, has the
same two)."""


def _close_all_but(keep: int | None) -> None:
    top = TOP_FD
    if keep is None:
        os.closerange(0, top)
    else:
        os.closerange(0, keep)
        os.closerange(keep + 1, top)


class Maker:
    """Makes a pool's inits, in the zygote: ``Maker()()`` enters a new pid namespace for this
    process's children and clones its pid 1 (``CLONE_VM | CLONE_FILES | CLONE_PIDFD``, no exit
    signal), running ``INIT_CODE``; it returns the init's pidfd, with this process's children
    still born in that namespace (the caller forks the solution there, then calls ``leave``).

    The code, for x86-64 (GNU as; arm64's is alike, with ``svc`` and ``ppoll``)::

            mov $13, %eax              # rt_sigaction(SIGCHLD, &ign, NULL, 8)
            mov $17, %edi
            lea ign(%rip), %rsi
            xor %edx, %edx
            mov $8, %r10d
            syscall
        1:  mov $61, %eax              # wait4(-1, NULL, WNOHANG | __WALL, NULL): what
            mov $-1, %edi              # ended before the line above
            xor %esi, %esi
            mov $0x40000001, %edx
            xor %r10d, %r10d
            syscall
            test %eax, %eax
            jg 1b                      # one reaped: the next
        2:  mov $34, %eax              # pause(), for ever
            syscall
            jmp 2b
            .balign 8
        ign: .quad 1, 0, 0, 0

    It is written once to a page of its own that is then made read-only and executable. The init
    touches no memory of the zygote's but that page and the stack below (what the C library's
    ``clone`` writes there before the call is the same for every init, and nothing reads it
    back). Its exit signal is none, so it is reaped only by ``reap`` (``__WALL``)."""

    def __init__(self) -> None:
        import ctypes
        import mmap

        with open("/proc/self/status") as f:
            caught = next((line.split()[1] for line in f if line.startswith("SigCgt:")), "0")
        if int(caught, 16):  # an init would copy the handler, and run it in this memory
            raise OSError(f"signals with a handler (mask {caught}): no init may be made here")
        machine = os.uname().machine
        if machine not in INIT_CODE:
            raise OSError(f"no init for {machine}")
        code = bytes.fromhex(INIT_CODE[machine])
        self.page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.page.write(code)
        view = ctypes.c_char.from_buffer(self.page)
        lib = isolate.libc()
        lib.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        entry = ctypes.addressof(view)
        del view  # (the page stays mapped: ``self.page`` holds it)
        if lib.mprotect(entry, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            raise isolate.c_error("mprotect")
        self.entry = ctypes.c_void_p(entry)
        self.clone = lib.clone  # (returns an int, as ctypes assumes)
        # The init's stack and the pidfd the kernel writes: a page no fork copies, so neither
        # write lands on a page this process shares with its live children (a copy-on-write
        # fault per run each, in an init or here).
        self.scratch = mmap.mmap(-1, STACK_BYTES, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.scratch.madvise(mmap.MADV_DONTFORK)
        self.pidfd = ctypes.c_int.from_buffer(self.scratch)  # (its first bytes; the stack is above)
        # The arguments, made once as the C types ``clone`` takes (``clone(fn, stack, flags,
        # arg, pidfd)``), go as they are: no ``argtypes``, whose converters would be code and
        # memory this process touches per run and no other of its calls does (4 faults a run).
        self.top = ctypes.c_void_p((ctypes.addressof(self.pidfd) + STACK_BYTES) & ~15)  # aligned
        self.pidfd_ref = ctypes.byref(self.pidfd)
        self.flags = ctypes.c_int(
            isolate.CLONE_VM | isolate.CLONE_FILES | isolate.CLONE_PIDFD
        )  # (no exit signal)
        self.prctl = lib.prctl
        # ``unshare`` and ``setns`` called here, not through ``isolate``'s wrappers: each Python
        # function a cycle calls writes its own pages (reference counts), which this process
        # shares with its live children (two faults a run each).
        self.unshare = lib.unshare
        self.setns = lib.setns
        self.pids: dict[int, int] = {}
        """Each live init's pid (in this process's namespace), by its pidfd."""
        self.namespaces: dict[int, int] = {}
        """Each live init's pid namespace (a descriptor ``enter`` joins), by its pidfd."""
        self.own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
        # Each new namespace is opened through this, as this process's own: a zygote covers
        # ``/proc`` once sealed, and an init's ``/proc/<pid>/ns`` is not this process's to open
        # (the init is non-dumpable).
        self.proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)

    def __call__(self, name: bytes) -> int:
        """A new init's pidfd; this process's next children are born in its namespace.
        ``name``: this process's own name (bytes, at most 15), set back once the init has copied
        ``NAME``."""
        if self.unshare(isolate.CLONE_NEWPID) != 0:
            raise isolate.c_error("unshare")
        try:
            self.prctl(isolate.PR_SET_NAME, NAME_BYTES, 0, 0, 0)  # the init copies its name
            try:
                pid = self.clone(self.entry, self.top, self.flags, None, self.pidfd_ref)
            finally:
                self.prctl(isolate.PR_SET_NAME, name, 0, 0, 0)
            if pid < 0:
                raise isolate.c_error("clone")
        except BaseException:
            self.leave()
            raise
        pidfd = self.pidfd.value
        try:  # (a namespace can be opened once its first process is born)
            self.namespaces[pidfd] = os.open(FOR_CHILDREN, os.O_RDONLY, dir_fd=self.proc)
        except BaseException:
            self.leave()
            _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
            os.waitpid(pid, WALL)
            os.close(pidfd)
            raise
        self.pids[pidfd] = pid
        return pidfd

    def enter(self, pidfd: int) -> None:
        """This process's next children are born in the namespace of a live init this made, as
        after the call that made it (``leave`` then, as after that call). For a namespace that
        holds nothing but its init: the caller knows (``Zygote.end``)."""
        if self.setns(self.namespaces[pidfd], isolate.CLONE_NEWPID) != 0:
            raise isolate.c_error("setns")

    def leave(self) -> None:
        """Children are born in this process's own pid namespace again."""
        if self.setns(self.own_pid_ns, isolate.CLONE_NEWPID) != 0:
            raise isolate.c_error("setns")

    def reap(self, pidfd: int) -> None:
        """Wait for the end of an init this made (ended by ``SIGKILL`` from its parent's
        namespace: it ends once every other process of its namespace is gone), reap it, and
        close its pidfd. By its pid: ``waitpid`` makes no result object, as ``waitid`` on the
        pidfd does (fewer pages written per run)."""
        pid = self.pids.pop(pidfd)
        try:
            os.waitpid(pid, WALL)
        finally:
            os.close(pidfd)
            os.close(self.namespaces.pop(pidfd))


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
