"""How a pool worker reads a program host's replies (``judge.program_host``): a case's end comes
unasked (``P``), and a kill that reaches the host after it reported the case is answered ``-1``,
after that report."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from deepgym.judge.worker_judge import ZygoteLauncher


@pytest.fixture
def pair() -> Iterator[tuple[ZygoteLauncher, socket.socket]]:
    mine, host = socket.socketpair()
    launcher = ZygoteLauncher({}, lambda: None, ctl=None)
    launcher.host = mine
    try:
        yield launcher, host
    finally:
        mine.close()
        host.close()


def test_a_case_ends_unasked(pair: tuple[ZygoteLauncher, socket.socket]) -> None:
    launcher, host = pair
    host.sendall(b"P7 256 3.500\n")
    assert launcher._host_end(7, kill=False) == (256, 3.5)
    host.setblocking(False)
    with pytest.raises(BlockingIOError):  # nothing asked of the host
        host.recv(64)


def test_a_kill_is_answered(pair: tuple[ZygoteLauncher, socket.socket]) -> None:
    launcher, host = pair
    host.sendall(b"9 2.000\n")
    assert launcher._host_end(7, kill=True) == (9, 2.0)
    assert host.recv(64) == b"K7\n"


def test_a_case_reported_before_its_kill_keeps_that_report(
    pair: tuple[ZygoteLauncher, socket.socket],
) -> None:
    launcher, host = pair
    host.sendall(b"P7 0 1.250\n-1 0.000\nP8 0 4.000\n")  # (and the next case's, already)
    assert launcher._host_end(7, kill=True) == (0, 1.25)
    assert launcher._host_end(8, kill=False) == (0, 4.0)


def test_a_host_gone_is_an_error(pair: tuple[ZygoteLauncher, socket.socket]) -> None:
    launcher, host = pair
    host.sendall(b"P7 0")
    host.close()
    with pytest.raises(OSError, match="program host is gone"):
        launcher._host_end(7, kill=False)
