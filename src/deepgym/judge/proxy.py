"""The verifier's side of the solution process: start it lazily, call into it, bound its time.

``SolutionProxy`` is what a ``verify(solution, test_cases)`` function receives: attribute access
names a function of the answer's module, calling it is an RPC with its own time limit, and a
returned object (a class instance, a generator) comes back as a ``RemoteObject`` whose methods
and iteration are RPCs too. Failures surface as:

- ``SolutionError`` (an ``Exception``): the answer raised, or returned something that cannot cross;
- ``SolutionDied`` (an ``Exception``): the solution process ended (crash, kill, memory limit);
- ``SolutionTimeout`` (a ``BaseException``): a call ran past its limit. It derives from
  ``BaseException`` so that a verifier's ``except Exception`` cannot swallow it.
"""

from __future__ import annotations

import os
import select
import time

from . import wire
from .blame import solution_used_its_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

# Linux signal numbers, without importing ``signal`` (and ``enum``) at sandbox start-up.
SIGKILL = 9
SIGXCPU = 24
SIGXFSZ = 25

EXCERPT = 4096


class SolutionError(Exception):
    """The answer raised (``exc_type`` names its exception) or sent something malformed."""

    def __init__(self, message: str, exc_type: str = "", tb: str = "") -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.traceback = tb


class SolutionDied(Exception):
    """The solution process ended before it replied."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


class SolutionTimeout(BaseException):
    """A call into the answer ran past its time limit (cannot be caught by ``except Exception``)."""

    def __init__(self, message: str, blame_solution: bool = True) -> None:
        super().__init__(message)
        self.blame_solution = blame_solution


class Stream:
    """Bounded capture of one output pipe: an excerpt, a byte count, and the full text if kept."""

    def __init__(self, keep_all: bool) -> None:
        self.keep_all = keep_all
        self.chunks: list[bytes] = []
        self.head = b""
        self.size = 0

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if len(self.head) < EXCERPT:
            self.head += data[: EXCERPT - len(self.head)]
        if self.keep_all:
            self.chunks.append(data)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


class Process:
    """One started solution process and its pipes."""

    def __init__(self, pid: int, pidfd: int, fds: dict[str, int], keep_stdout: bool) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.fds = fds
        self.out = Stream(keep_all=keep_stdout)
        self.err = Stream(keep_all=False)
        self.buffer = bytearray()
        self.newline = -1
        """Index of the first newline in ``buffer`` (-1: none yet): no rescans of a flood."""
        self.status: int | None = None
        self.rusage_cpu_ms: float | None = None
        self.limit: str | None = None
        self.proc_pid = pid
        """The pid as ``/proc`` numbers it (differs from ``pid`` across pid namespaces)."""
        self.tree_cpu_ms: float | None = None


def _tree(pid: int) -> tuple[float, list[str]]:
    """CPU milliseconds and states of ``pid`` and its descendants, read from ``/proc``."""
    ppid: dict[int, int] = {}
    info: dict[int, tuple[float, str]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read().decode()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        p = int(name)
        ppid[p] = int(fields[1])
        info[p] = ((int(fields[11]) + int(fields[12])) * 1000.0 / tick, fields[0])
    tree = {pid}
    changed = True
    while changed:
        changed = False
        for p, parent in ppid.items():
            if parent in tree and p not in tree:
                tree.add(p)
                changed = True
    cpu = sum(info[p][0] for p in tree if p in info)
    return cpu, [info[p][1] for p in tree if p in info and p != pid]


def _keep_tree_cpu(proc: Process) -> None:
    if proc.tree_cpu_ms is not None and proc.tree_cpu_ms > (proc.rusage_cpu_ms or 0.0):
        proc.rusage_cpu_ms = proc.tree_cpu_ms


class LaunchError(BaseException):
    """Ours, not the answer's: the solution process could not be started. A ``BaseException``
    so that a verifier's ``except Exception`` cannot turn it into the answer's failure."""


class Launcher:
    """Starts solution processes with a command prefix chosen by the host (sandboxed or not)."""

    def __init__(self, job: dict[str, Any], on_start: Callable[[], None]) -> None:
        self.prefix: list[str] = list(job.get("solution_argv") or [])
        self.env: dict[str, str] = dict(job.get("solution_env") or {})
        self.cgroup_procs: list[str] = list(job.get("cgroup_procs") or [])
        self.setsid: bool = bool(job.get("solution_setsid", False))
        self.limits = job.get("limits_json", "{}")
        self.path: str = job["solution_path"]
        self.output_cap: int = int(job.get("output_cap", 16 * 1024 * 1024))
        self.on_start = on_start

    def start(self, mode: str, args: tuple[str, ...] = (), keep_stdout: bool = False) -> Process:
        """Start a solution process; the answer is in play from the moment it exists."""
        try:
            proc = self._spawn(mode, args, keep_stdout)
        except OSError as exc:
            raise LaunchError(f"the solution process could not start: {exc}") from exc
        self.on_start()
        return proc

    def _spawn(self, mode: str, args: tuple[str, ...], keep_stdout: bool) -> Process:
        argv = [*self.prefix, "solution", mode, self.path, self.limits, *args]
        r_req, w_req = os.pipe()
        r_rep, w_rep = os.pipe()
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        r_in, w_in = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child execs at once
            try:
                for procs in self.cgroup_procs:
                    with open(procs, "w") as f:
                        f.write("0")
                if self.setsid:
                    os.setsid()
                # Lift every source above the targets first: a pipe may already sit on 0-4.
                high = [
                    os.dup2(src, 100 + i)
                    for i, src in enumerate((r_in, w_out, w_err, r_req, w_rep))
                ]
                for dst, src in enumerate(high):
                    os.dup2(src, dst)
                os.closerange(5, 65536)
                os.execve(argv[0], argv, self.env)
            finally:
                os._exit(127)
        for fd in (r_req, w_rep, w_out, w_err, r_in):
            os.close(fd)
        fds = {"req": w_req, "rep": r_rep, "out": r_out, "err": r_err, "in": w_in}
        for fd in (r_rep, r_out, r_err):
            os.set_blocking(fd, False)
        return Process(pid, os.pidfd_open(pid), fds, keep_stdout)

    def kill(self, proc: Process) -> None:
        if proc.status is None:
            try:
                if self.setsid:
                    os.killpg(proc.pid, SIGKILL)
                os.kill(proc.pid, SIGKILL)
            except ProcessLookupError:
                pass
        self.reap(proc)
        _keep_tree_cpu(proc)

    def reap(self, proc: Process) -> None:
        if proc.status is None:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.status = status
            proc.rusage_cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000.0
        for fd in (*proc.fds.values(), proc.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        proc.fds = {}

    def pump(self, proc: Process, deadline: float, want_line: bool) -> bytes | None:
        """Move output until a reply line (``want_line``) or the process's end, or the deadline.

        Returns the reply line, or None when the process ended first. Raises ``TimeoutError``
        at the deadline with the process still running. Waits in ``poll`` (pipes and a pidfd),
        never by sleeping.
        """
        poller = select.poll()
        sinks: dict[int, Stream | None] = {proc.fds["out"]: proc.out, proc.fds["err"]: proc.err}
        if want_line:
            sinks[proc.fds["rep"]] = None
        for fd in (*sinks, proc.pidfd):
            poller.register(fd, select.POLLIN)
        exited = False
        while True:
            if want_line and proc.newline >= 0:
                line = bytes(proc.buffer[: proc.newline])
                del proc.buffer[: proc.newline + 1]
                proc.newline = proc.buffer.find(b"\n")
                return line
            if exited and not sinks:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not exited:
                raise TimeoutError
            events = poller.poll(0 if exited else max(remaining, 0.0) * 1000.0)
            if exited and not events:
                return None
            for fd, _ in events:
                if fd == proc.pidfd:
                    exited = True
                    poller.unregister(fd)
                    continue
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                sink = sinks.get(fd)
                if not data:
                    poller.unregister(fd)
                    sinks.pop(fd, None)
                elif sink is None:
                    if proc.newline < 0 and b"\n" in data:
                        proc.newline = len(proc.buffer) + data.index(b"\n")
                    proc.buffer += data
                    if len(proc.buffer) > self.output_cap:  # a reply past any sane size
                        proc.limit = "output_size"
                        self.kill(proc)
                        return None
                else:
                    sink.add(data)
                    if proc.out.size + proc.err.size > self.output_cap:
                        proc.limit = "output_size"
                        self.kill(proc)
                        return None

    def timeout_blame(self, proc: Process, limit_ms: float) -> bool:
        # What the tree used before it is killed: wait4 counts only reaped children, and a
        # sandbox wrapper's own descendants die unreaped with it.
        cpu_ms, states = _tree(proc.proc_pid)
        proc.tree_cpu_ms = cpu_ms
        runnable = any(s in ("R", "D") for s in states)
        return solution_used_its_time(cpu_ms, limit_ms, None if runnable else "S")


class Session:
    """The run's serving solution process: started at first use, restarted after a death.

    ``mode`` is ``module`` (import the answer) or ``repo`` (a patch task: import nothing);
    ``prelude``, when set, is the request every fresh process gets first (a patch task's
    ``write_files``), so a restart after a death serves the same files.
    """

    def __init__(self, launcher: Launcher, case_timeout: float, deadline: float) -> None:
        self.launcher = launcher
        self.case_timeout = case_timeout
        self.deadline = deadline
        self.proc: Process | None = None
        self.timed_out = False
        self.last_death: SolutionDied | None = None
        self.mode = "module"
        self.prelude: dict[str, Any] | None = None

    def _ensure(self) -> Process:
        if self.proc is None or self.proc.status is not None:
            self.proc = self.launcher.start(self.mode)
            if self.prelude is not None:
                self._exchange(self.proc, self.prelude, None)
        return self.proc

    def request(self, req: dict[str, Any], deref: Callable[[int], Any]) -> Any:
        return self._exchange(self._ensure(), req, deref)

    def _exchange(
        self, proc: Process, req: dict[str, Any], deref: Callable[[int], Any] | None
    ) -> Any:
        try:
            os.write(proc.fds["req"], wire.encode(req))
        except (BrokenPipeError, KeyError):
            pass  # it died; pump reports how
        limit = min(self.case_timeout, max(self.deadline - time.monotonic(), 0.0))
        try:
            line = self.launcher.pump(proc, time.monotonic() + limit, want_line=True)
        except TimeoutError:
            blame = self.launcher.timeout_blame(proc, limit * 1000.0)
            self.launcher.kill(proc)
            proc.limit = "case_time"
            self.timed_out = True
            raise SolutionTimeout(f"call ran past its {limit:.3g}s limit", blame) from None
        if line is None:
            self.launcher.reap(proc)
            self.last_death = self._death(proc)
            raise self.last_death
        try:
            reply = wire.decode(line, deref)
        except wire.WireError as exc:
            raise SolutionError(f"malformed reply from the solution: {exc}") from None
        if not isinstance(reply, dict):
            raise SolutionError("malformed reply from the solution")
        if "err" in reply:
            err = reply["err"] if isinstance(reply["err"], dict) else {}
            raise SolutionError(
                f"{err.get('type', 'Error')}: {err.get('message', '')}",
                str(err.get("type", "")),
                str(err.get("traceback", "")),
            )
        if reply.get("stop"):
            raise StopIteration
        return reply.get("ok")

    def _death(self, proc: Process) -> SolutionDied:
        status = proc.status or 0
        limit = proc.limit
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            limit = limit or {SIGXCPU: "cpu_time", SIGXFSZ: "file_size"}.get(sig)
            return SolutionDied(f"solution process killed by signal {sig}", limit)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        return SolutionDied(f"solution process exited with code {code}", limit)

    def close(self) -> None:
        if self.proc is not None:
            self.launcher.kill(self.proc)


class RemoteObject:
    """An object that lives in the solution process; methods and iteration are RPCs."""

    def __init__(self, session: Session, ref: int) -> None:
        self._session = session
        self._ref = ref

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            req = {
                "op": "method",
                "ref": self._ref,
                "name": name,
                "args": list(args),
                "kwargs": kwargs,
            }
            return self._session.request(req, self._deref)

        return method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        req = {"op": "call_ref", "ref": self._ref, "args": list(args), "kwargs": kwargs}
        return self._session.request(req, self._deref)

    def __iter__(self) -> Iterator[Any]:
        it = self._session.request({"op": "iter", "ref": self._ref}, self._deref)
        return it if isinstance(it, RemoteObject) else iter(it)

    def __next__(self) -> Any:
        return self._session.request({"op": "next", "ref": self._ref}, self._deref)

    def _deref(self, ref: int) -> RemoteObject:
        return RemoteObject(self._session, ref)

    def __repr__(self) -> str:
        return f"<remote object {self._ref}>"


class SolutionProxy:
    """The answer's module, seen from the verifier: ``solution.add(1, 2)`` is an RPC."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            req = {"op": "call", "name": name, "args": list(args), "kwargs": kwargs}
            return self._session.request(req, self._deref)

        return call

    def __getitem__(self, name: str) -> Callable[..., Any]:
        """``solution["package.module:function"](...)``: a call by import path (patch tasks)."""
        return self.__getattr__(name)

    def get(self, name: str) -> Any:
        """The value of a module attribute (a constant, or a reference to a class or function)."""
        return self._session.request({"op": "getattr", "name": name}, self._deref)

    def _deref(self, ref: int) -> RemoteObject:
        return RemoteObject(self._session, ref)
