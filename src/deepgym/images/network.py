"""How a build step reaches the network: a network namespace of its own, outbound only.

Threat model: a ``RUN`` line is the Dockerfile author's code (a Harbor task's, say), run on the
host while the image builds. It may fetch what the build needs (a package mirror, a registry),
as Docker's builds may, and must reach nothing on the host: a service that listens on the
host's loopback (``deepgym serve`` on 127.0.0.1, a database, a cloud agent) trusts that only
this machine's own users reach it. So, as in Docker, each step runs in a network namespace of
its own (``mapped.spawn(..., network=...)``: owned by the step's user namespace), in one of two
modes (``NETWORKS``):

- ``outbound`` (the default): slirp4netns (Debian's ``slirp4netns``) gives the namespace a tap
  device and carries its connections out through the host's sockets, without privileges, a
  bridge or a firewall rule. The step reaches what the host reaches on other machines, by name
  (its ``/etc/resolv.conf`` names slirp4netns's resolver, ``DNS``, which asks the host's) or
  by address. The host's loopback is out of reach: the namespace's 127.0.0.1 is its own, and
  ``--disable-host-loopback`` stops slirp4netns from taking its gateway (``GATEWAY``) to the
  host's 127.0.0.1, which it does by default. Two things stay reachable, by design: the host's
  resolver, for names, on its port 53 only (on the host's loopback where the host's
  ``/etc/resolv.conf`` names one there, as systemd-resolved's 127.0.0.53), and a service the
  host serves on its other addresses, as from any machine of its network (as from Docker's).
  slirp4netns parses the step's packets, so it runs in its own sandbox (``--enable-sandbox``:
  no capability but binding low ports, a mount namespace with only ``/etc`` and ``/run``; and
  ``--enable-seccomp``).
- ``none``: the namespace has only its own loopback (``bwrap --unshare-net``): for a build that
  fetches nothing, asked for by name (``build(..., network="none")``, ``deepgym image build
  --network none``).

Without slirp4netns an ``outbound`` step is refused (``ImageError``, naming the package and the
``none`` mode), never run on the host's network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deepgym.exceptions import ConfigError, ImageError

__all__ = [
    "DNS",
    "GATEWAY",
    "NETWORKS",
    "TOOL",
    "Outbound",
    "find_tool",
    "network_mode",
    "outbound",
    "slirp_argv",
]

NETWORKS = ("outbound", "none")
"""A build step's network: ``outbound`` (the default) or ``none``."""
TOOL = "slirp4netns"
"""The program that connects a step's namespace to the outside (Debian's package of the name)."""
GATEWAY = "10.0.2.2"
"""slirp4netns's gateway in the step's namespace; with ``--disable-host-loopback`` it leads to
no port of the host's loopback."""
DNS = "10.0.2.3"
"""slirp4netns's resolver in the step's namespace: it forwards each query to the host's."""
MTU = 65520
"""slirp4netns's largest MTU but one: fewer, larger packets through the user-mode stack."""
_STOP_S = 10.0


def network_mode(value: object) -> str:
    """``value`` if it is one of ``NETWORKS``; ``ConfigError`` naming ``network`` otherwise."""
    if not isinstance(value, str) or value not in NETWORKS:
        raise ConfigError(f"network must be one of {', '.join(NETWORKS)}, not {value!r}")
    return value


def find_tool() -> str:
    """The path of slirp4netns; ``ImageError`` naming the package, and the way without it."""
    path = shutil.which(TOOL)
    if path is None:
        raise ImageError(
            f"a build step reaches the network through {TOOL}, which is not installed here "
            f"(apt-get install {TOOL}); or build with network 'none' (--network none) when "
            "no step fetches anything"
        )
    return path


def slirp_argv(tool: str, pid: int, ready_fd: int, exit_fd: int) -> list[str]:
    """slirp4netns's command line for the namespaces of process ``pid``: the tap device set up
    (``10.0.2.100``, routed through ``GATEWAY``), the host's loopback out of reach, itself
    sandboxed; it writes to ``ready_fd`` once the device is up and exits when ``exit_fd``
    closes."""
    return [
        tool,
        "--configure",
        f"--mtu={MTU}",
        "--disable-host-loopback",
        "--enable-sandbox",
        "--enable-seccomp",
        f"--userns-path=/proc/{pid}/ns/user",
        f"--ready-fd={ready_fd}",
        f"--exit-fd={exit_fd}",
        str(pid),
        "tap0",
    ]


class Outbound:
    """slirp4netns for one step: ``attach(pid)`` connects the namespaces of ``pid`` (before the
    step runs), ``close()`` stops it. Its output goes to ``log``, for the error that says why
    it could not."""

    def __init__(self, tool: str, log: Path) -> None:
        self.tool = tool
        self.log = log
        self._proc: subprocess.Popen[bytes] | None = None
        self._exit_w: int | None = None

    def attach(self, pid: int) -> None:
        """Start slirp4netns on ``pid``'s namespaces and wait until the device is up;
        ``ImageError`` (with slirp4netns's words) where it could not."""
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()
        try:
            with self.log.open("wb") as out:
                self._proc = subprocess.Popen(
                    slirp_argv(self.tool, pid, ready_w, exit_r),
                    pass_fds=(ready_w, exit_r),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
        finally:
            os.close(ready_w)
            os.close(exit_r)
        with os.fdopen(ready_r, "rb") as ready:
            ok = ready.read(1) == b"1"  # end of file: it exited before the device was up
        if not ok:
            self.close()
            said = self.log.read_bytes()[-500:].decode(errors="replace").strip()
            raise ImageError(f"{TOOL} could not connect the build step's network: {said}")

    def close(self) -> None:
        """Stop slirp4netns (its exit descriptor closes) and wait for it."""
        if self._exit_w is not None:
            os.close(self._exit_w)
            self._exit_w = None
        if self._proc is not None:
            try:
                self._proc.wait(_STOP_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


@contextmanager
def outbound(log: Path) -> Iterator[Outbound]:
    """An ``Outbound`` (slirp4netns found first: ``find_tool``), closed when the block ends."""
    net = Outbound(find_tool(), log)
    try:
        yield net
    finally:
        net.close()
