"""The host's side of a run's solution processes (``strict`` and ``unsafe``).

The verifier never starts the answer itself: it asks the host over a socket (``spawn``, ``kill``,
``reap``, ``measure``), and the host starts each solution process as a sandbox of its own beside the
verifier's, hands the verifier the pipe ends and a pidfd (``SCM_RIGHTS``), and signals, reaps and
measures it on request. Because the host does the starting, it can start the run's first solution
process at the same time as the verifier's sandbox: the two interpreters start in parallel, and
the answer still runs none of its code until the verifier first uses it (the solution host loads
the answer on the first request). An unused early process is killed with the run.

The evidence for a time limit comes from the host's ``/proc`` where the verifier cannot see a
sibling sandbox (``measure``): the solution tree's CPU time and whether any of its threads is
runnable (``deepgym.judge.blame``); the verifier applies the rule. Where the run has a cgroup,
the verifier reads its CPU time from the group's counter instead, a descriptor the host opened.

Under bwrap, a solution's exit status comes from its sandbox's init (``deepgym.judge.init``),
which writes it on a pipe of its own before it exits: exactly, where bwrap's exit code would read
an answer's own exit code above 128 as a signal. A sandbox killed before its init could write is
read from bwrap's exit code (128 + the signal).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable
from typing import Any

from deepgym.judge import wire
from deepgym.judge.blame import read_tree, runnable
from deepgym.judge.codes import MSG_MAX, STATUS_FD_ENV
from deepgym.sandbox.spawn import end_process, start_process

ArgvFor = Callable[[str, list[str]], tuple[list[str], dict[str, str]]]
"""``(mode, args) -> (argv, environment)`` of a solution process."""


def _wait_status(returncode: int, through_bwrap: bool) -> int:
    """A ``waitpid``-style status for the judge (bwrap reports a child's signal as 128 + n)."""
    if returncode < 0:
        return -returncode
    if through_bwrap and returncode > 128:
        return returncode - 128
    return (returncode & 0xFF) << 8


class SolutionServer:
    """Starts, signals and reaps one run's solution processes for its verifier."""

    def __init__(
        self,
        sock: socket.socket,
        argv_for: ArgvFor,
        through_bwrap: bool,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.sock = sock
        self.pass_fds = pass_fds
        """Descriptors every solution process is given as well (a v2 group's ``cgroup.procs``)."""
        self.sock.setblocking(False)
        self.argv_for = argv_for
        self.through_bwrap = through_bwrap
        self.procs: dict[int, asyncio.subprocess.Process] = {}
        self.statuses: dict[int, int] = {}
        """The read end of each process's status pipe (under bwrap), by pid."""
        self.ahead: tuple[str, asyncio.subprocess.Process, list[int]] | None = None

    async def _spawn(
        self, mode: str, args: list[str]
    ) -> tuple[asyncio.subprocess.Process, list[int]]:
        pipes = [os.pipe() for _ in range(5)]
        (r_req, w_req), (r_rep, w_rep), (r_out, w_out), (r_err, w_err), (r_in, w_in) = pipes
        io_theirs, io_mine = (s.detach() for s in socket.socketpair())  # ``judge.files``
        r_status, w_status = os.pipe() if self.through_bwrap else (-1, -1)
        theirs = [fd for fd in (r_req, w_rep, io_theirs, w_status) if fd >= 0]
        argv, env = self.argv_for(mode, args)
        env = {**env, "DEEPGYM_RPC_FDS": f"{r_req},{w_rep},{io_theirs}"}
        if w_status >= 0:
            env[STATUS_FD_ENV] = str(w_status)
        try:
            proc = await start_process(
                *argv,
                stdin=r_in,
                stdout=w_out,
                stderr=w_err,
                pass_fds=(*theirs, *self.pass_fds),
                env=env,
                start_new_session=True,
            )
        except BaseException:
            for fd in (w_req, r_rep, r_out, r_err, w_in, io_mine, r_status):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            for fd in (*theirs, w_out, w_err, r_in):
                os.close(fd)
        self.procs[proc.pid] = proc
        if r_status >= 0:
            os.set_blocking(r_status, False)
            self.statuses[proc.pid] = r_status
        return proc, [w_req, r_rep, r_out, r_err, w_in, io_mine, os.pidfd_open(proc.pid)]

    async def start_ahead(self, mode: str) -> None:
        """Start the run's first solution process now, in parallel with the verifier's."""
        proc, fds = await self._spawn(mode, [])
        self.ahead = (mode, proc, fds)

    async def serve(self) -> None:
        """Answer the verifier's requests until it closes the socket (it exits)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(self.sock, MSG_MAX)
            except OSError:
                return
            if not data:
                return
            try:
                await self._handle(wire.loads(data.decode()))
            except (OSError, ValueError, KeyError) as exc:
                with contextlib.suppress(OSError):
                    self.sock.send(wire.encode({"error": str(exc), "status": -1}))

    async def _handle(self, req: dict[str, Any]) -> None:
        op = req.get("op")
        if op == "spawn":
            mode, args = str(req["mode"]), [str(a) for a in req.get("args") or []]
            if self.ahead is not None and self.ahead[0] == mode and not args:
                _, proc, fds = self.ahead
                self.ahead = None
            else:
                proc, fds = await self._spawn(mode, args)
            try:
                socket.send_fds(self.sock, [wire.encode({"pid": proc.pid})], fds)
            finally:
                for fd in fds:
                    os.close(fd)
            return
        proc = self.procs[int(req["pid"])]
        if op == "measure":
            cpu_ms, states = read_tree(proc.pid)
            self.sock.send(wire.encode({"cpu_ms": cpu_ms, "runnable": runnable(states)}))
            return
        cpu_ms = 0.0
        if op == "kill":
            cpu_ms = read_tree(proc.pid)[0]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        code = await proc.wait()
        del self.procs[proc.pid]
        status = self._status(proc.pid, code)
        self.sock.send(wire.encode({"status": status, "cpu_ms": cpu_ms}))

    def _status(self, pid: int, returncode: int) -> int:
        """The ended process's wait status: its init's record where it wrote one (its sandbox
        has ended, or was killed: what is not there now comes too late), else read from the
        exit code."""
        fd = self.statuses.pop(pid, None)
        if fd is not None:
            try:
                said = os.read(fd, 32)
            except BlockingIOError:
                said = b""
            finally:
                os.close(fd)
            if said.isdigit() and int(said) < 1 << 16:
                return int(said)
        return _wait_status(returncode, self.through_bwrap)

    async def close(self) -> None:
        """Kill and reap whatever is left (an unused early process, one the verifier left)."""
        if self.ahead is not None:
            for fd in self.ahead[2]:
                os.close(fd)
            self.ahead = None
        for proc in list(self.procs.values()):
            await end_process(proc)
        self.procs.clear()
        for fd in self.statuses.values():
            os.close(fd)
        self.statuses.clear()
        self.sock.close()
