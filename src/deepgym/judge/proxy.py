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

import _socket
import os
import select
import time

from . import wire
from .blame import tree_used_its_time
from .solution_host import READY, SETUP_FAILED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

# Linux signal numbers, without importing ``signal`` (and ``enum``) at sandbox start-up.
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


class AheadError(BaseException):
    """Requests sent ahead (``Session.ahead``) were not taken as planned: the verifier's own
    error, never the answer's (a ``BaseException``, so ``except Exception`` cannot score it)."""


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

    def text_head(self) -> str:
        return self.head.decode("utf-8", "replace").strip()[-300:] or "no word"


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
        self.proc_pid: int | None = pid
        """The pid as our ``/proc`` numbers it (differs across pid namespaces; None: not in it)."""
        self.tree_cpu_ms: float | None = None
        self.watch: _Watch | None = None


class _Watch:
    """What ``pump`` waits on for one process, kept across calls (a poller built per call was a
    fifth of a call's cost): the poller, the open output pipes, whether the process ended."""

    def __init__(self, proc: Process, want_line: bool) -> None:
        self.want_line = want_line
        self.poller = select.poll()
        self.sinks: dict[int, Stream | None] = {
            proc.fds["out"]: proc.out,
            proc.fds["err"]: proc.err,
        }
        if want_line:
            self.sinks[proc.fds["rep"]] = None
        for fd in (*self.sinks, proc.pidfd):
            self.poller.register(fd, select.POLLIN)
        self.exited = False


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


def keep_tree_cpu(proc: Process) -> None:
    if proc.tree_cpu_ms is not None and proc.tree_cpu_ms > (proc.rusage_cpu_ms or 0.0):
        proc.rusage_cpu_ms = proc.tree_cpu_ms


class LaunchError(BaseException):
    """Ours, not the answer's: the solution process could not be started. A ``BaseException``
    so that a verifier's ``except Exception`` cannot turn it into the answer's failure."""


class Launcher:
    """Starts solution processes and moves their output; subclasses say how they start.

    ``ServedLauncher`` (below) asks a server for each process: the host in ``strict`` and
    ``unsafe``, the zygote in a pool worker.
    """

    def __init__(self, job: dict[str, Any], on_start: Callable[[], None]) -> None:
        self.output_cap: int = int(job.get("output_cap", 16 * 1024 * 1024))
        self.on_start = on_start

    def start(self, mode: str, args: tuple[str, ...] = (), keep_stdout: bool = False) -> Process:
        """Start a solution process. The caller marks the answer in play (``on_start``) once the
        process is ready to run it: a failure before then is the sandbox's, never the answer's."""
        try:
            return self._spawn(mode, args, keep_stdout)
        except OSError as exc:
            raise LaunchError(f"the solution process could not start: {exc}") from exc

    def await_ready(self, proc: Process, deadline: float) -> None:
        """Wait for a serving process's ready line (set up, the answer not yet loaded)."""
        try:
            line = self.pump(proc, deadline, want_line=True)
        except TimeoutError:
            line = None
        if line is not None and line + b"\n" == READY:
            return
        self.kill(proc)
        why = proc.err.head.decode("utf-8", "replace").strip().splitlines()
        raise LaunchError(f"the solution process did not start: {why[-1] if why else 'no word'}")

    def _spawn(self, mode: str, args: tuple[str, ...], keep_stdout: bool) -> Process:
        raise NotImplementedError  # abstract

    def kill(self, proc: Process) -> None:
        raise NotImplementedError  # abstract

    def reap(self, proc: Process) -> None:
        raise NotImplementedError  # abstract

    def pump(self, proc: Process, deadline: float, want_line: bool) -> bytes | None:
        """Move output until a reply line (``want_line``) or the process's end, or the deadline.

        Returns the reply line, or None when the process ended first. Raises ``TimeoutError``
        at the deadline with the process still running. Waits in ``poll`` (pipes and a pidfd),
        never by sleeping.
        """
        watch = proc.watch
        if watch is None or watch.want_line != want_line:
            watch = proc.watch = _Watch(proc, want_line)
        poller, sinks = watch.poller, watch.sinks
        while True:
            if want_line and proc.newline >= 0:
                line = bytes(proc.buffer[: proc.newline])
                del proc.buffer[: proc.newline + 1]
                proc.newline = proc.buffer.find(b"\n")
                return line
            exited = watch.exited
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
                    watch.exited = True
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
        cpu_ms, states = _tree(proc.proc_pid or proc.pid)
        proc.tree_cpu_ms = cpu_ms
        return tree_used_its_time(cpu_ms, states, limit_ms)


def recv_fds(sock: Any, bufsize: int, maxfds: int) -> tuple[bytes, list[int]]:
    """One message and the descriptors sent with it (``SCM_RIGHTS``), from a raw socket."""
    import array

    fds = array.array("i")
    msg, ancdata, _, _ = sock.recvmsg(bufsize, _socket.CMSG_LEN(maxfds * fds.itemsize))
    for level, kind, data in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def spawn_request(job: dict[str, Any], mode: str, args: tuple[str, ...]) -> dict[str, Any]:
    """What a server needs to start one solution process of ``job``."""
    return {"mode": mode, "args": list(args), "job": {k: job.get(k) for k in SPAWN_KEYS}}


def close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


SPAWN_KEYS = ("answer_path", "limits_json", "work_bytes")
"""What of the job a pool's solution process reads (a strict host reads only mode and args)."""
MSG_MAX = 65536


class ServedLauncher(Launcher):
    """Solution processes started, signalled and reaped by a server on request, over a socket:
    the host (``strict``: each answer in a sandbox of its own beside the verifier's) or a pool
    worker's zygote. The pipe ends and a pidfd come back with ``SCM_RIGHTS``."""

    def __init__(self, job: dict[str, Any], on_start: Callable[[], None], ctl: Any) -> None:
        super().__init__(job, on_start)
        self.job = job
        self.ctl = ctl

    def _spawn(self, mode: str, args: tuple[str, ...], keep_stdout: bool) -> Process:
        pid, proc_pid, fds = self._ask_spawn(spawn_request(self.job, mode, args))
        w_req, r_rep, r_out, r_err, w_in, pidfd = fds
        for fd in (r_rep, r_out, r_err):
            os.set_blocking(fd, False)
        fdmap = {"req": w_req, "rep": r_rep, "out": r_out, "err": r_err, "in": w_in}
        proc = Process(pid, pidfd, fdmap, keep_stdout)
        proc.proc_pid = proc_pid  # None: not in our /proc, or numbered otherwise there
        return proc

    def _ask_spawn(self, req: dict[str, Any]) -> tuple[int, int | None, list[int]]:
        """Have the server start one: (pid, pid in our ``/proc`` if known, its six fds)."""
        self.ctl.send(wire.encode({"op": "spawn", **req}))
        data, fds = recv_fds(self.ctl, MSG_MAX, 6)
        reply = wire.loads(data.decode())
        if "error" in reply or len(fds) != 6:
            close_all(fds)
            raise OSError(f"no solution process: {reply.get('error', 'no descriptors')}")
        return int(reply["pid"]), reply.get("proc_pid"), fds

    def kill(self, proc: Process) -> None:
        if proc.status is None:
            self._ask(proc, "kill")
        self.reap(proc)

    def reap(self, proc: Process) -> None:
        if proc.status is None:
            self._ask(proc, "reap")
        for fd in (*proc.fds.values(), proc.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        proc.fds = {}

    def timeout_blame(self, proc: Process, limit_ms: float) -> bool:
        if proc.proc_pid is not None:
            return super().timeout_blame(proc, limit_ms)
        reply = self._request({"op": "blame", "pid": proc.pid, "limit_ms": limit_ms})
        proc.tree_cpu_ms = float(reply.get("cpu_ms") or 0.0)
        return bool(reply.get("blame"))

    def _request(self, msg: dict[str, Any]) -> dict[str, Any]:
        self.ctl.send(wire.encode(msg))
        reply: dict[str, Any] = wire.loads(self.ctl.recv(MSG_MAX).decode())
        return reply

    def _ask(self, proc: Process, op: str) -> None:
        reply = self._request({"op": op, "pid": proc.pid})
        proc.status = int(reply["status"])
        proc.rusage_cpu_ms = float(reply.get("cpu_ms") or 0.0)
        keep_tree_cpu(proc)


def served_by(ctl: Any) -> Callable[..., ServedLauncher]:
    """A launcher factory for ``harness.judge`` whose processes come from the server at ``ctl``."""

    def make(job: dict[str, Any], on_start: Callable[[], None]) -> ServedLauncher:
        return ServedLauncher(job, on_start, ctl)

    return make


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
        self.unanswered = 0
        """Requests sent ahead whose replies are still to be taken (``Ahead``)."""

    def _ensure(self) -> Process:
        if self.proc is None or self.proc.status is not None:
            self.proc = self.launcher.start(self.mode)
            self.launcher.await_ready(self.proc, time.monotonic() + self.case_timeout)
            self.launcher.on_start()  # the answer loads with the next request
            if self.prelude is not None:
                self._exchange(self.proc, self.prelude, None)
        return self.proc

    def request(self, req: dict[str, Any]) -> Any:
        if self.unanswered:
            raise AheadError("a request while replies sent ahead are still to be taken")
        return self._exchange(self._ensure(), req, self.deref)

    def deref(self, ref: int) -> RemoteObject:
        """A reference in a reply: the object it names, in the solution process."""
        return RemoteObject(self, ref)

    def ahead(self, reqs: list[dict[str, Any]]) -> Ahead:
        """``reqs`` sent ahead of their replies, which ``Ahead.take`` returns one by one."""
        return Ahead(self, reqs)

    def _send(self, proc: Process, data: bytes) -> None:
        try:
            os.write(proc.fds["req"], data)
        except (BrokenPipeError, KeyError):
            pass  # it died; pump reports how

    def _exchange(
        self, proc: Process, req: dict[str, Any], deref: Callable[[int], Any] | None
    ) -> Any:
        self._send(proc, wire.encode(req))
        return self._receive(proc, deref, time.monotonic())

    def _receive(self, proc: Process, deref: Callable[[int], Any] | None, since: float) -> Any:
        """The reply to the request the process serves next, which it began at ``since`` at
        the latest: its time limit counts from there."""
        limit = min(self.case_timeout, max(self.deadline - since, 0.0))
        try:
            line = self.launcher.pump(proc, since + limit, want_line=True)
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
        if os.WIFEXITED(proc.status or 0) and os.WEXITSTATUS(proc.status or 0) == SETUP_FAILED:
            raise LaunchError("the solution process's set-up failed")
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


def call_request(name: str, args: Any, kwargs: Any) -> dict[str, Any]:
    """The request that calls the answer's ``name`` with ``args`` and ``kwargs``, as a call
    through ``solution.<name>`` checks it: no dunder name, keywords that are strings."""
    if name.startswith("__"):
        raise AttributeError(name)
    return {"op": "call", "name": name, "args": [*args], "kwargs": dict(**kwargs)}


AHEAD_BYTES = 4096
"""Requests sent ahead go in writes of at most this size (``PIPE_BUF``): each fits an empty
pipe of any size, so the verifier never blocks writing while the solution blocks replying."""


class Ahead:
    """Requests whose arguments are known before any reply (a task's test cases), sent ahead:
    the solution process serves them in order, exactly as it would one at a time, but without
    a round trip between them. ``take`` returns each reply in turn, or raises what a request
    made alone would, with the same time limit (counted from when the call could start: the
    previous reply, or the write). If the process dies or times out, the requests it had not
    served are void: each is then made alone, of the process that replaces it, as it would
    have been. Every request must be taken, in order, before any other request."""

    def __init__(self, session: Session, reqs: list[dict[str, Any]]) -> None:
        self.session = session
        self.reqs = reqs
        self.taken = 0
        self.sent = 0
        self.proc: Process | None = None
        self.since = 0.0

    def take(self) -> Any:
        s = self.session
        i = self.taken
        if i >= len(self.reqs):
            raise AheadError("more replies taken than requests sent ahead")
        proc = self.proc
        if proc is None or proc is not s.proc or proc.status is not None:
            s.unanswered -= self.sent - i  # sent to a process that has ended: void
            self.sent = i
        if self.sent == i:
            self._send_from(i)
            proc = self.proc
        assert proc is not None
        self.taken = i + 1
        s.unanswered -= 1
        try:
            return s._receive(proc, s.deref, self.since)
        finally:
            self.since = time.monotonic()  # the next call began by now, at the latest

    def _send_from(self, i: int) -> None:
        s = self.session
        if s.unanswered:
            raise AheadError("requests sent ahead of others not yet taken")
        proc = self.proc = s._ensure()
        data = [wire.encode(self.reqs[i])]
        size, j = len(data[0]), i + 1
        while j < len(self.reqs):
            more = wire.encode(self.reqs[j])
            if size + len(more) > AHEAD_BYTES:
                break
            data.append(more)
            size += len(more)
            j += 1
        s._send(proc, b"".join(data))
        self.since = time.monotonic()
        s.unanswered += j - i
        self.sent = j


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
            return self._session.request(req)

        return method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        req = {"op": "call_ref", "ref": self._ref, "args": list(args), "kwargs": kwargs}
        return self._session.request(req)

    def __iter__(self) -> Iterator[Any]:
        it = self._session.request({"op": "iter", "ref": self._ref})
        return it if isinstance(it, RemoteObject) else iter(it)

    def __next__(self) -> Any:
        return self._session.request({"op": "next", "ref": self._ref})

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
            return self._session.request(call_request(name, args, kwargs))

        return call

    def __getitem__(self, name: str) -> Callable[..., Any]:
        """``solution["package.module:function"](...)``: a call by import path (patch tasks)."""
        return self.__getattr__(name)

    def ahead(self, name: str, calls: list[tuple[list[Any], dict[str, Any]]]) -> Callable[..., Any]:
        """``name`` to be called with each ``(args, kwargs)`` of ``calls``, in that order, all
        sent at once (``Ahead``): the function returned makes those calls, each returning its
        reply or raising what a plain call would. A call other than the next one planned is the
        verifier's error (``AheadError``), as is any other call into the answer before the
        last planned one. For calls whose arguments do not depend on earlier replies."""
        reqs = [call_request(name, a, k) for a, k in calls]
        pending = self._session.ahead(reqs)

        def call(*args: Any, **kwargs: Any) -> Any:
            i = pending.taken
            if i >= len(reqs) or [*args] != reqs[i]["args"] or kwargs != reqs[i]["kwargs"]:
                raise AheadError(f"call {i} of {name!r} is not the one sent ahead")
            return pending.take()

        return call

    def get(self, name: str) -> Any:
        """The value of a module attribute (a constant, or a reference to a class or function)."""
        return self._session.request({"op": "getattr", "name": name})
