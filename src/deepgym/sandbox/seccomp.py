"""The one seccomp filter of a session run as root: ``chown`` succeeds and changes nothing.

A task written for a container's root changes owners as it goes: ``tar -x`` as root gives each
file the owner the archive names, ``cp -a`` keeps them, an installer ``chown``s to its user.
In a session run as root (``Environment.user``), the sandbox's user namespace maps one uid, its
root (the host user's own uid), and root there has no capabilities: every such ``chown`` would
fail, and the task with it, though nothing about the answer is wrong. Docker's root would have
done it. So in that mode the ``chown`` family (``chown``, ``fchown``, ``lchown``, ``fchownat``)
returns success without running: every file stays root's, as it was (no other owner exists in
the namespace to give it to), and the task goes on as in its container.

Pure: ``chown_noop_filter`` is the classic BPF program bwrap loads with ``--seccomp FD``
(``policy``'s ``root_chown`` rule); ``filter_fd`` puts it in a memory file for that. Every other
system call, and every call of another architecture's ABI, is let through unchanged: the filter
grants nothing, it only turns a refusal the namespace would give into a success that does
nothing.
"""

from __future__ import annotations

import os
import platform
import struct

__all__ = ["CHOWN_CALLS", "chown_noop_filter", "filter_fd"]

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO_0 = 0x00050000  # SECCOMP_RET_ERRNO with errno 0: the call returns 0 without running
_ARCH, _NR = 4, 0  # offsets in struct seccomp_data

CHOWN_CALLS: dict[str, tuple[int, tuple[int, ...]]] = {
    # machine: (AUDIT_ARCH_*, the chown family's numbers)
    "x86_64": (0xC000003E, (92, 93, 94, 260)),  # chown, fchown, lchown, fchownat
    "aarch64": (0xC00000B7, (55, 54)),  # fchown, fchownat (no chown or lchown there)
}
"""The chown family's system call numbers, by machine."""


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def chown_noop_filter(machine: str | None = None) -> bytes:
    """The BPF program for ``machine`` (this one's by default): the chown family returns 0
    without running, everything else runs. ``ValueError`` for a machine it does not know."""
    name = machine or platform.machine()
    if name not in CHOWN_CALLS:
        raise ValueError(f"no chown filter for the machine {name!r}")
    arch, calls = CHOWN_CALLS[name]
    n = len(calls)
    program = [
        _op(_LD_W_ABS, 0, 0, _ARCH),
        _op(_JEQ_K, 0, n + 1, arch),  # another ABI: to the final ALLOW
        _op(_LD_W_ABS, 0, 0, _NR),
    ]
    for i, nr in enumerate(calls):
        program.append(_op(_JEQ_K, n - i, 0, nr))  # a match: past the rest and the ALLOW
    program += [_op(_RET_K, 0, 0, _ALLOW), _op(_RET_K, 0, 0, _ERRNO_0)]
    return b"".join(program)


def filter_fd(machine: str | None = None) -> int:
    """A descriptor of a memory file holding ``chown_noop_filter``, at its start, for bwrap's
    ``--seccomp``; the caller passes it to bwrap and closes it."""
    fd = os.memfd_create("deepgym-seccomp", os.MFD_CLOEXEC)
    os.write(fd, chown_noop_filter(machine))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
