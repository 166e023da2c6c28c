"""A build step's changes, kept in an overlay's upper folder, applied to the working root.

A ``RUN`` step runs on an overlay (bwrap's ``--overlay``): the working root is its lower layer,
never written, and whatever the step changes lands in a folder of its own (the upper). That lets
the working root be a copy of the store's unpacked root whose files are hard links to it
(``deepgym.images.build``: no copy of a toolchain's gigabytes for each image built on it): a
step's writes go to the upper, never into a file the store's root shares. ``apply_upper`` then
moves the step's changes into the working root the way overlayfs shows them:

- a character device 0:0 is a whiteout: the entry is removed;
- a folder marked opaque (the ``user.overlay.opaque`` or ``trusted.overlay.opaque`` attribute)
  replaces the folder below it: what the working root held there is removed first;
- any other entry replaces the working root's (unlinked first, then moved in: never written in
  place); a folder's contents are applied one by one, then its mode, owner and times.

Paths the build's sandbox mounts (``diff.MOUNTED``) are left as the working root has them.
Only the upper a step wrote is read; nothing of the host is followed (links are moved as
links).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from deepgym.images.diff import MOUNTED

__all__ = ["OPAQUE_XATTRS", "apply_upper"]

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: Path) -> bool:
    for name in OPAQUE_XATTRS:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, _ in os.walk(path):
            for d in dirs:
                sub = os.path.join(folder, d)
                if not os.path.islink(sub):
                    os.chmod(sub, 0o700)
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _empty(folder: Path) -> None:
    for child in list(folder.iterdir()):
        _remove(child)


def apply_upper(upper: Path, root: Path, rel: str = "") -> None:
    """Move the changes in ``upper`` (an overlay's upper folder over ``root``) into ``root``."""
    for entry in sorted(
        os.scandir(upper / rel) if rel else os.scandir(upper), key=lambda e: e.name
    ):
        path = f"{rel}/{entry.name}" if rel else entry.name
        if path in MOUNTED:
            if not os.path.lexists(root / path) and entry.is_dir(follow_symlinks=False):
                (root / path).mkdir()  # as a build sandbox's mount point makes it
            continue
        source, target = upper / path, root / path
        st = entry.stat(follow_symlinks=False)
        if _is_whiteout(st):
            _remove(target)
        elif stat.S_ISDIR(st.st_mode):
            if os.path.lexists(target) and not (target.is_dir() and not target.is_symlink()):
                _remove(target)
            if not target.exists():
                target.mkdir()
            elif _opaque(source):
                _empty(target)
            target.chmod(0o700)  # writable while its entries move in
            apply_upper(upper, root, path)
            os.lchown(target, st.st_uid, st.st_gid)
            target.chmod(stat.S_IMODE(st.st_mode))
            os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            _remove(target)
            os.rename(source, target)
