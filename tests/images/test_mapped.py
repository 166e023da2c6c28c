"""A build step's user namespace (``deepgym.images.mapped``): many ids, without a daemon."""

from __future__ import annotations

import os
import subprocess

import pytest

from deepgym.exceptions import ImageError
from deepgym.images.mapped import ROOT_RANGE, id_ranges, spawn, subordinate_range

SUBUID = "other:200000:65536\nalice:100000:65536\n"


def test_root_maps_its_own_ids() -> None:
    maps = id_ranges(0, 0, "root", "", "")
    assert maps.direct and maps.uids == ((0, 0, ROOT_RANGE),) == maps.gids


def test_a_user_maps_itself_and_its_subordinate_range() -> None:
    maps = id_ranges(1000, 1000, "alice", SUBUID, "1000:300000:1000\n")
    assert not maps.direct
    assert maps.uids == ((0, 1000, 1), (1, 100000, 65536))
    assert maps.gids == ((0, 1000, 1), (1, 300000, 1000))  # by uid, as shadow-utils allows


def test_a_user_without_a_range_is_told_where_to_add_one() -> None:
    with pytest.raises(ImageError, match=r"/etc/subuid \(add a line 'bob:100000:65536'"):
        id_ranges(1001, 1001, "bob", SUBUID, SUBUID)
    assert subordinate_range("bob:x:1\nbob:5:0\n", "bob", 1001) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="the direct maps need root; others use newuidmap")
def test_the_program_runs_as_root_of_a_namespace_with_many_ids() -> None:
    proc = spawn(
        ["/bin/sh", "-c", "id -u; cat /proc/self/uid_map"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = proc.communicate(timeout=10)
    lines = out.decode().split()
    assert proc.returncode == 0 and lines[:4] == ["0", "0", "0", str(ROOT_RANGE)], out


@pytest.mark.skipif(os.geteuid() != 0, reason="the direct maps need root; others use newuidmap")
def test_a_network_is_attached_to_the_programs_own_namespace_before_it_runs() -> None:
    seen: list[str] = []

    def attach(pid: int) -> None:
        seen.append(os.readlink(f"/proc/{pid}/ns/net"))

    proc = spawn(["readlink", "/proc/self/ns/net"], network=attach, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and out.decode().strip() == seen[0]
    assert seen[0] != os.readlink("/proc/self/ns/net")

    def refuse(pid: int) -> None:
        raise ImageError("no way out")

    with pytest.raises(ImageError, match="no way out"):
        spawn(["/bin/sh", "-c", "echo ran"], network=refuse, stdout=subprocess.PIPE)
