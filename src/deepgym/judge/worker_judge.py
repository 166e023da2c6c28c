"""A pool worker's judging side: each job's verifier, and the launcher that has the worker's
zygote fork, end and reap the job's solution processes (``deepgym.judge.worker``).

The worker imports this module (and with it the verifier's harness, the RPC and the launchers)
only once its zygote is forked: the zygote never runs a verifier, and every page of memory it
holds is a page each fork copies the tables of and each solution's exit tears down.
"""

from __future__ import annotations

import _socket
import contextlib
import os
import signal

from . import harness, wire
from .blame import read_tree, runnable
from .codes import ANSWER_PATH, BEGAN, MSG_MAX
from .launch import Process, ServedLauncher, close_all, keep_tree_cpu, recv_fds, spawn_request

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any


def run_job(
    job: dict[str, Any], result_fd: int, marks_fd: int, zygote: _socket.socket, cpu_fd: int | None
) -> None:
    """Judge one job here, then have the zygote end anything of the run's still alive.
    ``cpu_fd``: the worker's cgroup CPU counter, which the judge reads its time limits on.

    The solution process a function or patch task will need is asked for first, so that the
    zygote forks it and it sets itself up while the verifier loads here (two cores, one run's
    latency). It loads nothing of the answer until the verifier's first call: the answer comes
    into play then, as with a process started at that call."""
    answer = job.pop("answer", None)
    program = job.pop("program_path", None)
    job["cpu_fd"] = cpu_fd
    if answer is not None:
        with open(ANSWER_PATH, "w", encoding="utf-8", newline="") as f:
            f.write(answer)  # the job names this path: the host takes it from here
    elif program is not None:  # a compiled language's program, built by the host
        with open(program, "rb") as src, open(ANSWER_PATH, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
    ahead = None
    if job.get("kind") != "script":
        ahead = spawn_request(job, "repo" if job.get("kind") == "patch" else "module", ())
        with _zygote_alive():
            zygote.send(b"S" + wire.encode(ahead))
    launcher = ZygoteLauncher(job, lambda: None, zygote, ahead)

    def make(job: dict[str, Any], on_start: Callable[[], None]) -> ZygoteLauncher:
        launcher.on_start = on_start  # the judge's, which marks the answer in play
        return launcher

    try:
        harness.judge(job, result_fd, make, done=True, marks_fd=marks_fd)
    finally:
        launcher.settle()
        launcher.close_host()
        if launcher.live:
            with _zygote_alive():
                zygote.send(b"X")
                if not zygote.recv(MSG_MAX):
                    raise ConnectionError("the zygote is gone")


@contextlib.contextmanager
def _zygote_alive() -> Iterator[None]:
    """Talk to the zygote; if it is gone, end this worker at once, by SIGKILL.

    The zygote never ends by itself and no answer can reach it (a pid namespace below it), so
    losing it is the pool's failure, not the answer's. Raised into the judge, the broken pipe
    would read as the run's solution failing in play (a 0); a worker killed by a signal reads
    as a worker that died (a run without a verdict), and the pool replaces it."""
    try:
        yield
    except (OSError, ValueError):  # a broken pipe, or an empty reply (EOF) that will not parse
        os.kill(os.getpid(), signal.SIGKILL)
        raise


class ZygoteLauncher(ServedLauncher):
    """Solution processes forked by the worker's zygote, over a terse protocol that keeps the
    zygote's own work per run (and so its copy-on-write faults after each fork) small:
    ``S`` + the spawn request, which only the forked child decodes; ``K``/``R`` + pid (kill or
    reap: ``status cpu_ms``); ``X`` (end all).

    ``ahead``: a spawn request already sent, whose reply is still to be read; the first start
    that asks for the same takes that process, and any other leaves it to ``settle``."""

    def __init__(
        self,
        job: dict[str, Any],
        on_start: Callable[[], None],
        ctl: Any,
        ahead: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(job, on_start, ctl)
        self.live: set[int] = set()
        self.inits: dict[int, int] = {}
        """Each live process's init's pidfd, by the process's pid."""
        self.ahead = ahead
        self.host: _socket.socket | None = None
        """The run's program host (``program_host``): its control socket, once started."""
        self.host_pid = 0
        self.host_pidfd = -1
        self._lines = b""

    def _reply(self) -> tuple[int, int | None, list[int]]:
        with _zygote_alive():
            data, fds = recv_fds(self.ctl, MSG_MAX, 8)
            if not data:
                raise ConnectionError("the zygote is gone")
        if not data.isdigit() or len(fds) != 8:
            close_all(fds)
            raise OSError(f"no solution process: {data[1:].decode(errors='replace')}")
        pid = int(data)
        self.live.add(pid)
        self.inits[pid] = fds.pop()  # its init's pidfd: the root of its namespace's tree
        return pid, None, fds  # numbered in the zygote's pid namespace: looked up if needed

    def _forget(self, pid: int) -> None:
        fd = self.inits.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def settle(self) -> None:
        """Read the reply to a request sent ahead and never taken (its process ends with the
        run's others)."""
        if self.ahead is not None:
            self.ahead = None
            try:
                pid, _, fds = self._reply()
            except OSError:
                return
            close_all(fds)
            self._forget(pid)

    def _ask_spawn(self, req: dict[str, Any]) -> tuple[int, int | None, list[int]]:
        if self.ahead is not None:
            if self.ahead == req:
                self.ahead = None
                return self._reply()
            self.settle()
        with _zygote_alive():
            self.ctl.send(b"S" + wire.encode(req))
        return self._reply()

    def _host_spawn(self, args: tuple[str, ...]) -> tuple[int, list[int]]:
        """A case's program, started by the run's program host (started first, if need be;
        and once more, on a new host, where the last could not clear what an earlier case left
        or is gone: a program host ends only by the kernel's hand, as its memory group's OOM
        kill for what an earlier case left running, or by a failure of ours). Its pid and its
        descriptors: stdout, stderr, stdin, a pidfd, and where the run reads files back, the
        io socket."""
        why = "the program host is gone"
        want = 5 if self.job.get("fetch") else 4
        request = b"S" + wire.encode({"args": list(args)})
        for _ in (0, 1):
            if self.host is None:
                self._start_host(args)
            assert self.host is not None
            try:
                self.host.sendall(request)
                data, fds = recv_fds(self.host, MSG_MAX, want)
            except OSError:
                data, fds = b"", []
            head, _, rest = data.partition(b"\n")
            if head.isdigit() and len(fds) == want:
                self._lines += rest
                return int(head), fds
            close_all(fds)
            if data[:1] not in (b"D", b""):  # its refusal: ours (the program never ran)
                break
            why = data[1:].decode(errors="replace").strip() or why
            self.end_host()
        raise OSError(f"no solution process: {why}")

    def _start_host(self, args: tuple[str, ...]) -> None:
        with _zygote_alive():
            self.settle()
            self.ctl.send(b"H" + wire.encode(spawn_request(self.job, "host", args)))
            data, fds = recv_fds(self.ctl, MSG_MAX, 7)
            if not data:
                raise ConnectionError("the zygote is gone")
        if not data.isdigit() or len(fds) != 7:
            close_all(fds)
            raise OSError(f"no program host: {data[1:].decode(errors='replace')}")
        self.host_pid = int(data)
        self.live.add(self.host_pid)
        w_req, r_rep, r_out, r_err, w_in, io, self.host_pidfd = fds
        close_all([w_req, r_rep, r_out, r_err, w_in])
        self.host = _socket.socket(fileno=io)
        message = {"files": self.job.get("files") or {}, "fetch": bool(self.job.get("fetch"))}
        self.host.sendall(b"F" + wire.encode(message))

    def end_host(self) -> int:
        """End the run's program host, if any (the zygote kills it: its namespace goes with
        it); its wait status (0: none was running)."""
        if self.host is None:
            return 0
        self.close_host()
        with _zygote_alive():
            self.settle()
            self.ctl.send(b"K%d" % self.host_pid)
            status = int(self.ctl.recv(MSG_MAX).split()[0])
        self.live.discard(self.host_pid)
        return status

    def _host_lost(self) -> int:
        """The host ended while a case's program was in play: the program's wait status.
        Killed by SIGKILL, which nothing in its namespace can send it (it is pid 1) and only
        the kernel does unasked (its memory group's OOM kill, the run's processes being the
        answer's), it took the program with it: the program's status is that kill, the
        answer's. Ended otherwise, it failed: ours (``OSError``)."""
        status = self.end_host()
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            return int(signal.SIGKILL)
        raise OSError(f"the program host failed (wait status {status}) during a case")

    def close_host(self) -> None:
        """Close this side of the host's channels (the host ends with the run's other
        processes: ``X``)."""
        if self.host is not None:
            self.host.close()
            self.host = None
            self._lines = b""
        if self.host_pidfd >= 0:
            os.close(self.host_pidfd)
            self.host_pidfd = -1

    def _host_line(self) -> bytes:
        assert self.host is not None
        while b"\n" not in self._lines:
            chunk = self.host.recv(MSG_MAX)
            if not chunk:
                raise OSError("the program host is gone")
            self._lines += chunk
        line, _, self._lines = self._lines.partition(b"\n")
        return line

    def _host_end(self, pid: int, kill: bool) -> tuple[int, float]:
        """A hosted case's end: its wait status and CPU ms, as the host reports it unasked
        (``P``), or (``kill``) as its reply to the kill says; a case the host reported before
        the kill reached it is answered ``-1``, after that report."""
        if kill:
            assert self.host is not None
            self.host.sendall(b"K%d\n" % pid)
        ended: tuple[int, float] | None = None
        while True:
            line = self._host_line()
            if line[:1] == b"P":
                got, status, cpu_ms = line[1:].split()
                if int(got) == pid:
                    ended = (int(status), float(cpu_ms))
                    if not kill:
                        return ended
                continue  # (another pid: a case no longer waited for, whose end is no one's)
            status, cpu_ms = line.split()
            if int(status) < 0 and ended is not None:
                return ended
            return int(status), float(cpu_ms)

    def _ask(self, proc: Process, op: str) -> None:
        if proc.hosted:
            if self.host is None:  # (ended with an earlier case unreaped: never so)
                raise OSError("the program host is gone")
            try:
                proc.status, proc.rusage_cpu_ms = self._host_end(proc.pid, op == "kill")
            except OSError:
                proc.status, proc.rusage_cpu_ms = self._host_lost(), 0.0
            keep_tree_cpu(proc)
            return
        self.settle()  # replies come in order: the one sent ahead first
        with _zygote_alive():
            self.ctl.send(b"%s%d" % (b"K" if op == "kill" else b"R", proc.pid))
            status, cpu_ms = self.ctl.recv(MSG_MAX).split()
        proc.status = int(status)
        proc.rusage_cpu_ms = float(cpu_ms)
        self.live.discard(proc.pid)
        self._forget(proc.pid)
        keep_tree_cpu(proc)

    def _spawn(self, mode: str, args: tuple[str, ...], keep_stdout: bool) -> Process:
        if mode != "exec":
            return super()._spawn(mode, args, keep_stdout)
        pid, fds = self._host_spawn(args)
        r_out, r_err, w_in, pidfd, *io = fds
        fdmap = {"out": r_out, "err": r_err, "in": w_in}
        if io:
            fdmap["io"] = io[0]
        # numbered in the host's pid namespace: looked up if needed
        proc = self._process(pid, None, pidfd, fdmap, keep_stdout)
        proc.hosted = True
        proc.marks = BEGAN  # its exec done (the host's posix_spawn returned): the answer's
        return proc

    def _local(self, proc: Process) -> Process:
        """``proc``, numbered as this worker's ``/proc`` numbers it (looked up once)."""
        if proc.proc_pid is None:
            proc.proc_pid = _proc_pid(proc.pidfd)
        return proc

    def measure(self, proc: Process) -> tuple[float, bool]:
        """The solution's whole namespace, read from this worker's ``/proc``: its own tree and
        its init's, which holds what the answer's processes orphaned there (the states of every
        process below the two count)."""
        local = self._local(proc).proc_pid
        assert local is not None
        if proc.hosted and self.host_pidfd >= 0:
            # a case's program: its host's tree but the host (what the program orphaned is
            # the host's; what earlier cases left is gone before a case starts)
            cpu_ms, states = read_tree(_proc_pid(self.host_pidfd), local, below=True)
            return cpu_ms, runnable(states)
        init_fd = self.inits.get(proc.pid)
        roots = (local,) if init_fd is None else (_proc_pid(init_fd), local)
        cpu_ms, states = read_tree(*roots)
        return cpu_ms, runnable(states)

    def _process_cpu_ms(self, proc: Process) -> float:
        """The solution's CPU clock, read here (as the base does)."""
        return super()._process_cpu_ms(self._local(proc))


def _proc_pid(pidfd: int) -> int:
    """The pid as the mounted ``/proc`` numbers it (the pidfd's ``Pid:`` in fdinfo)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise OSError(f"no pid for pidfd {pidfd}")
