"""Run a program as uid 0 of a new user namespace whose uid and gid maps the parent writes
(``deepgym.images.mapped``): ``python -I -S _mapped.py READY_FD GO_FD PROGRAM [ARG...]``.

The child makes the namespace, says so on ``READY_FD``, waits for one byte on ``GO_FD`` (the
maps are written by then; end of file means the parent gave up), becomes uid and gid 0 there,
and ``exec``s the program. Standard library only: it runs before anything of deepgym's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000


def main(argv: list[str]) -> int:
    ready, go = int(argv[1]), int(argv[2])
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER) != 0:
        err = ctypes.get_errno()
        sys.stderr.write(f"unshare(CLONE_NEWUSER): {os.strerror(err)}\n")
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
    os.execvp(argv[3], argv[3:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
