"""Try, in this process, the steps bwrap takes to make a sandbox's namespaces; print how far it got.

Run as a throwaway child (``python -I -S _nsprobe.py``) by ``deepgym.sandbox.userns``: the
namespaces it makes die with it. It prints one JSON line, ``{"step": ..., "errno": ...}``:
the first step that failed (``errno`` > 0), or ``"done"`` (``errno`` 0). The steps, in order:

- ``user``: ``unshare(CLONE_NEWUSER)`` (refused by the sysctls, by seccomp, EINVAL without
  kernel support);
- ``maps``: write ``setgroups``, ``uid_map`` and ``gid_map`` (refused where AppArmor restricts
  unprivileged user namespaces: the namespace is made, but without capabilities);
- ``others``: ``unshare`` of mount, pid, network, ipc and uts namespaces inside it.

Nothing here reads or changes anything outside the child's own namespaces.
"""

from __future__ import annotations

import ctypes
import json
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000


def _unshare(libc: ctypes.CDLL, flags: int) -> int:
    """``unshare(flags)``: 0, or the errno it failed with."""
    return 0 if libc.unshare(flags) == 0 else ctypes.get_errno()


def _write(path: str, text: str) -> int:
    """Write ``text`` to a proc file: 0, or the errno it failed with."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as exc:
        return exc.errno or 1
    return 0


def probe() -> tuple[str, int]:
    """(the first step that failed, its errno), or ``("done", 0)``."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    err = _unshare(libc, CLONE_NEWUSER)
    if err:
        return "user", err
    for path, text in (
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", f"0 {uid} 1"),
        ("/proc/self/gid_map", f"0 {gid} 1"),
    ):
        err = _write(path, text)
        if err:
            return "maps", err
    others = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    err = _unshare(libc, others)
    if err:
        return "others", err
    return "done", 0


if __name__ == "__main__":
    step, errno = probe()
    print(json.dumps({"step": step, "errno": errno}))
