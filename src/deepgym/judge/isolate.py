"""Isolate a forked solution process without exec (the pool's fast path). Linux only.

The same guarantees as the strict sandbox's nested bwrap, applied with system calls by a pool
worker's zygote and the solution processes it forks: new pid, mount and ipc namespaces, uid 65534
with no capabilities (an empty bounding set included) and no-new-privileges, a seccomp filter
against new user namespaces, a size-capped tmpfs work dir holding only the answer, tmpfs over
every folder of the verifier's (``/judge``, ``/proc``, ``/cg``) and everything else read-only,
and death with its parent. (The init above each solution, ``judge.init``, is made non-dumpable
here too: ``dumpable``.)
"""

from __future__ import annotations

import ctypes
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLONE_VM = 0x00000100
CLONE_FILES = 0x00000400
CLONE_PIDFD = 0x00001000
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
CAP_LAST_CAP = 63
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SIGKILL = 9
EINVAL = 22

_libc: Any = None


def libc() -> Any:
    """The C library, loaded once (ctypes)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def prepare() -> None:
    """Resolve, once, every C function a solution's set-up calls and build its seccomp program,
    so a process forked after this finds them ready (and copies fewer pages doing so)."""
    lib = libc()
    for name in ("unshare", "setns", "mount", "prctl", "capset", "sethostname"):
        getattr(lib, name)
    _seccomp_program()
    _no_caps()
    global _LAST_CAP
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            _LAST_CAP = min(int(f.read()), CAP_LAST_CAP)
    except (OSError, ValueError):
        pass


_LAST_CAP = CAP_LAST_CAP
"""The kernel's highest capability number (``prepare`` reads it): the bounding set ends there."""


def c_error(what: str) -> OSError:
    """The error of the C library's last failed call (``what``), from its ``errno``."""
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise c_error(what)


def unshare(flags: int) -> None:
    """``unshare(2)``: new namespaces of ``flags`` for this process."""
    _check(libc().unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    """``setns(2)``: join the namespace ``fd`` refers to."""
    _check(libc().setns(fd, nstype), "setns")


def new_user_namespace(uid: int, gid: int, inner_id: int, extra_flags: int = 0) -> None:
    """A new user namespace (with ``extra_flags`` namespaces) mapping ``inner_id`` to us."""
    unshare(CLONE_NEWUSER | extra_flags)
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{inner_id} {uid} 1"),
        ("gid_map", f"{inner_id} {gid} 1"),
    ):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def die_with_parent() -> None:
    """Be killed (SIGKILL) when the parent dies: nothing outlives its supervisor."""
    _check(libc().prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")


def dumpable(flag: bool) -> None:
    """Whether this process is dumpable. A process that is not cannot be traced, nor its memory
    or descriptors reached (``ptrace``, ``process_vm_readv``, ``pidfd_getfd``, ``/proc/<pid>``),
    by a process without ``CAP_SYS_PTRACE``, even of its own uid. A fork inherits the flag; an
    exec sets it again."""
    _check(libc().prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0), "prctl(DUMPABLE)")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    ret = libc().mount(
        source.encode(),
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(ret, f"mount {target}")


MNT_DETACH = 2


def umount(target: str) -> None:
    """Unmount ``target`` (lazily: ``MNT_DETACH``), uncovering what it was mounted over."""
    _check(libc().umount2(target.encode(), MNT_DETACH), f"umount {target}")


def make_private() -> None:
    """Make every mount private, so nothing mounted here propagates out."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)


def tmpfs(target: str, size_bytes: int, mode: str = "0755") -> None:
    """Mount a size-capped tmpfs (no setuid, no devices) at ``target``."""
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_bytes},mode={mode}")


VERIFIER_FOLDERS = ("/judge", "/cg", "/proc")
"""The worker's folders that no process of an answer's may see: the judge and the environments'
files (their test data), the cgroup mounts, and ``/proc``."""


def hide(folders: tuple[str, ...]) -> None:
    """Cover each of ``folders`` that exists with an empty, read-only tmpfs (in a private mount
    namespace of this process's own: ``make_private`` first)."""
    for folder in folders:
        if os.path.isdir(folder):
            tmpfs(folder, 4096, "0555")


def read_only(target: str, bind_first: bool = False) -> None:
    """Make ``target`` read-only (a file or a folder; ``bind_first`` for one not yet a mount)."""
    if bind_first:
        _mount(target, target, None, MS_BIND, None)
    _mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def bind_read_only(source: str, target: str) -> None:
    """Mount the folder ``source`` at ``target``, read-only."""
    _mount(source, target, None, MS_BIND, None)
    read_only(target)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_NO_CAPS: tuple[Any, Any] | None = None


def _no_caps() -> tuple[Any, Any]:
    """``capset``'s arguments for empty sets (made once per process)."""
    global _NO_CAPS
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _NO_CAPS = (ctypes.byref(header), ctypes.byref(data))  # each keeps its object alive
    return _NO_CAPS


def drop_bounding_set() -> None:
    """Empty the capability bounding set (inherited by every child: a pool's zygote does it
    once, so that each solution it forks starts with it empty)."""
    lib = libc()
    for cap in range(_LAST_CAP + 1):
        if lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != EINVAL:
            _check(-1, "prctl(CAPBSET_DROP)")  # EINVAL: past the kernel's last capability


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets."""
    header, data = _NO_CAPS or _no_caps()
    _check(libc().capset(header, data), "capset")


def drop_privileges() -> None:
    """Empty every capability set, the bounding set included; set no-new-privileges."""
    drop_bounding_set()
    drop_capabilities()
    no_new_privileges()


def lock() -> None:
    """What every process forked from here keeps and none can undo: an empty bounding set,
    no-new-privileges and the seccomp filter against new user namespaces (the capabilities this
    process holds now stay: a pool's zygote still makes pid namespaces)."""
    drop_bounding_set()
    no_new_privileges()
    no_new_user_namespaces()


def no_new_privileges() -> None:
    """No exec may grant privileges again (set-id bits and file capabilities are ignored)."""
    _check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


PR_SET_NAME = 15


def set_process_name(name: str) -> None:
    """The name ``ps`` and ``top`` show (at most 15 bytes); best effort."""
    libc().prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def sethostname(name: str) -> None:
    """Set the hostname (of this process's own uts namespace)."""
    raw = name.encode()
    _check(libc().sethostname(raw, len(raw)), "sethostname")


# -- no new user namespaces (seccomp) -------------------------------------------------------------
# What bwrap's --disable-userns gives the strict sandbox: the answer may not make a user
# namespace (the way to the kernel's less-trodden paths). A classic BPF filter: unshare() and
# clone() with CLONE_NEWUSER fail with EPERM, and clone3() (whose flags a filter cannot read)
# fails with ENOSYS, so the C library falls back to clone(). Any other architecture: refused.
_SYSCALLS = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K = 0x20, 0x15, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_EPERM, _ENOSYS = 1, 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_PROGRAM: Any = None


def _seccomp_program() -> Any:
    """The filter below as the kernel takes it (built once per process)."""
    global _PROGRAM
    if _PROGRAM is not None:
        return _PROGRAM
    machine = os.uname().machine
    if machine not in _SYSCALLS:
        raise OSError(f"no seccomp filter for {machine}: refusing to run without one")
    arch, nr_unshare, nr_clone, nr_clone3 = _SYSCALLS[machine]
    program = [
        (_LD_W_ABS, 0, 0, 4),  # arch
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _RET_KILL),
        (_LD_W_ABS, 0, 0, 0),  # syscall number
        (_JEQ_K, 3, 0, nr_unshare),
        (_JEQ_K, 2, 0, nr_clone),
        (_JEQ_K, 5, 0, nr_clone3),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_LD_W_ABS, 0, 0, 16),  # the flags: the low half of the first argument
        (_JSET_K, 0, 1, CLONE_NEWUSER),
        (_RET_K, 0, 0, _RET_ERRNO | _EPERM),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_ERRNO | _ENOSYS),  # clone3
    ]
    filters = (_SockFilter * len(program))(*[_SockFilter(*ins) for ins in program])
    _PROGRAM = (filters, _SockFprog(len(program), filters))  # the array lives as long
    return _PROGRAM


def no_new_user_namespaces() -> None:
    """Install the filter (needs no-new-privileges first; see ``drop_privileges``)."""
    _, prog = _seccomp_program()
    _check(
        libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
        "prctl(SECCOMP)",
    )
