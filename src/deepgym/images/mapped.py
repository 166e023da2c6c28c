"""Start a program in a user namespace that maps many uids, so that an image's build steps
(``apt-get install`` running ``chown`` to a package's own user) work without root or a daemon.

``id_ranges()`` decides the maps (pure, from the host's facts): run as root, uids and gids
0..65535 map to themselves; run as another user, uid 0 inside is that user and 1..n come from
its ``/etc/subuid`` and ``/etc/subgid`` ranges, written by the setuid helpers ``newuidmap``
and ``newgidmap`` (Debian's ``uidmap``), as rootless Podman does. A user with no range gets
``ImageError`` naming the file to add it to; ``deepgym doctor`` reports the same fact.

``spawn(argv)`` starts ``_mapped.py`` (which makes the namespace), writes the maps, then lets it
``exec`` ``argv`` as uid 0 there. ``spawn(argv, network=attach)`` gives the program a network
namespace of its own too, and calls ``attach(pid)`` before it starts
(``deepgym.images.network``: a build step's way out).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym.exceptions import ImageError

__all__ = ["IdMaps", "host_maps", "id_ranges", "spawn", "subordinate_range"]

_CHILD = Path(__file__).with_name("_mapped.py")
ROOT_RANGE = 65536
"""The ids a root caller maps to themselves: the ones Debian's packages use."""


@dataclass(frozen=True)
class IdMaps:
    """``(inside, outside, count)`` lines of a namespace's uid and gid maps, and whether the
    caller writes them itself (root) or through ``newuidmap``/``newgidmap``."""

    uids: tuple[tuple[int, int, int], ...]
    gids: tuple[tuple[int, int, int], ...]
    direct: bool


def subordinate_range(text: str, user: str, uid: int) -> tuple[int, int] | None:
    """The first ``start, count`` of ``user`` (or its uid) in ``/etc/subuid``-style ``text``."""
    for line in text.splitlines():
        parts = line.strip().split(":")
        ok = len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit()
        if ok and parts[0] in (user, str(uid)) and int(parts[2]) > 0:
            return int(parts[1]), int(parts[2])
    return None


def id_ranges(uid: int, gid: int, user: str, subuid: str, subgid: str) -> IdMaps:
    """The maps for a caller with ``uid``/``gid`` named ``user``, given the text of
    ``/etc/subuid`` and ``/etc/subgid``; ``ImageError`` when it has no range."""
    if uid == 0:
        whole = ((0, 0, ROOT_RANGE),)
        return IdMaps(whole, whole, direct=True)
    uids, gids = subordinate_range(subuid, user, uid), subordinate_range(subgid, user, uid)
    if uids is None or gids is None:
        missing = "/etc/subuid" if uids is None else "/etc/subgid"
        raise ImageError(
            f"building an image needs a range of subordinate ids for {user} in {missing} "
            f"(add a line '{user}:100000:65536' as root; Debian's uidmap package maps them)"
        )
    return IdMaps(
        ((0, uid, 1), (1, uids[0], uids[1])), ((0, gid, 1), (1, gids[0], gids[1])), direct=False
    )


def host_maps() -> IdMaps:
    """This host's maps for the calling user (``id_ranges`` on its facts)."""
    uid, gid = os.getuid(), os.getgid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)

    def read(path: str) -> str:
        try:
            return Path(path).read_text(encoding="utf-8")
        except OSError:
            return ""

    return id_ranges(uid, gid, user, read("/etc/subuid"), read("/etc/subgid"))


def _write(pid: int, maps: IdMaps) -> None:
    if maps.direct:
        Path(f"/proc/{pid}/uid_map").write_text(
            "".join(f"{a} {b} {c}\n" for a, b, c in maps.uids), encoding="ascii"
        )
        Path(f"/proc/{pid}/setgroups").write_text("allow", encoding="ascii")
        Path(f"/proc/{pid}/gid_map").write_text(
            "".join(f"{a} {b} {c}\n" for a, b, c in maps.gids), encoding="ascii"
        )
        return
    for tool, lines in (("newuidmap", maps.uids), ("newgidmap", maps.gids)):
        path = shutil.which(tool)
        if path is None:
            raise ImageError(f"building an image needs {tool} (apt-get install uidmap)")
        args = [str(n) for line in lines for n in line]
        done = subprocess.run([path, str(pid), *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise ImageError(f"{tool} refused the maps: {done.stderr.strip()}")


def spawn(
    argv: Sequence[str],
    maps: IdMaps | None = None,
    *,
    network: Callable[[int], None] | None = None,
    **popen: Any,
) -> subprocess.Popen[Any]:
    """Start ``argv`` as uid 0 of a new user namespace with ``maps`` (this host's by default);
    ``popen`` goes to ``subprocess.Popen``. ``ImageError`` where the maps cannot be made.

    With ``network``, the namespace has a network namespace of its own, and ``network(pid)``
    is called once the maps are written and before ``argv`` starts, to connect it; what it
    raises stops the program before it ran."""
    maps = maps or host_maps()
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    net = ["--net"] if network is not None else []
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_CHILD), str(ready_w), str(go_r), *net, *argv],
            pass_fds=(ready_w, go_r),
            **popen,
        )
    finally:
        os.close(ready_w)
        os.close(go_r)
    try:
        with os.fdopen(ready_r, "rb") as ready:
            if ready.read(1) != b"r":
                proc.wait()
                raise ImageError(
                    f"could not make a user namespace (exit {proc.returncode}): "
                    "is unprivileged user namespace creation allowed? (deepgym doctor)"
                )
        _write(proc.pid, maps)
        if network is not None:
            network(proc.pid)
        os.write(go_w, b"g")
    except BaseException:
        proc.kill()
        with proc:  # closes its pipes, and waits for it
            pass
        raise
    finally:
        os.close(go_w)
    return proc
