"""Run a program as uid 0 of a new user namespace whose uid and gid maps the parent writes
(``deepgym.images.mapped``): ``python -I -S _mapped.py READY_FD GO_FD [--net] PROGRAM [ARG...]``.

The child makes the namespace (with ``--net``, a network namespace of its own too, owned by
it), says so on ``READY_FD``, waits for one byte on ``GO_FD`` (the maps are written, and the
network attached, by then; end of file means the parent gave up), becomes uid and gid 0 there,
and ``exec``s the program. Standard library only: it runs before anything of deepgym's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def main(argv: list[str]) -> int:
    ready, go = int(argv[1]), int(argv[2])
    program = argv[3:]
    flags = CLONE_NEWUSER
    if program[:1] == ["--net"]:
        flags |= CLONE_NEWNET
        program = program[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        err = ctypes.get_errno()
        names = "CLONE_NEWUSER | CLONE_NEWNET" if flags & CLONE_NEWNET else "CLONE_NEWUSER"
        sys.stderr.write(f"unshare({names}): {os.strerror(err)}\n")
        return 125
    os.write(ready, b"r")
    os.close(ready)
    if os.read(go, 1) != b"g":
        return 125
    os.close(go)
    with contextlib.suppress(PermissionError):  # setgroups denied here: keep the one group
        os.setgroups([])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    os.execvp(program[0], program)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
