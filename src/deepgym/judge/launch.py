"""Starting and supervising solution processes, on the verifier's side.

A ``Launcher`` starts a solution process (``start``), waits for its ready line, moves its output
(``pump``: a reply line, or the process's end, or the deadline, waiting in ``poll`` on its pipes
and a pidfd, never by sleeping), and kills and reaps it. ``wait`` is ``pump`` under the time
limits of a call into the answer or of one run of a program: each time a wait on the clock ends
it measures the answer's CPU time (``cpu_ms``: the run's cgroup counter, one ``pread``, where the
job names one; else the process's own CPU clock) and, past a limit on the clock, whether any of
its threads can run (``measure``, the process tree from ``/proc``), and applies ``blame``'s rule:
wait again, or ``SolutionTimeout`` (the answer's, or the host's when it held the answer back
past the backstop). ``ServedLauncher`` asks a server for each process over a socket: the host in
``strict`` and ``unsafe``, a pool worker's zygote in ``pool``. What is said to a started process,
and what its replies mean, is ``rpc``'s business.

Output is bounded twice, and the two bounds mean different things:

- what comes back: each stream keeps its first ``kept_output`` bytes (the environment's
  ``kept_output_kb``) and always its last ``OUTPUT_TAIL_BYTES`` (a traceback's end), never more
  (``Stream``), so a flood costs no more memory than that; what is judged (a script's stdout,
  kept whole) is never cut by it;
- the task's output limit: a process that writes more than ``output_cap`` (``MAX_OUTPUT_BYTES``)
  in all is killed (``limit = "output_size"``), the answer's own failure.
"""

from __future__ import annotations

import _socket
import os
import select
import time

from . import wire
from .blame import (
    BACKSTOP,
    OVER,
    STARVED,
    WAITING,
    Limit,
    counter_ms,
    cpu_time_check,
    host_cpus,
    process_cpu_ms,
    read_tree,
    runnable,
)
from .codes import KEPT_OUTPUT_BYTES, MAX_OUTPUT_BYTES, MSG_MAX, OUTPUT_TAIL_BYTES
from .errors import LaunchError, SolutionTimeout
from .solution_host import READY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class Stream:
    """Bounded capture of one output pipe: its first ``cap`` bytes, its last
    ``OUTPUT_TAIL_BYTES``, its size, and all of it where ``keep_all`` (a script's stdout, which
    is judged whole; the task's output limit bounds it)."""

    def __init__(self, keep_all: bool, cap: int = KEPT_OUTPUT_BYTES) -> None:
        self.keep_all = keep_all
        self.cap = cap
        self.chunks: list[bytes] = []
        self.head = bytearray()
        self.tail = b""
        """The last ``OUTPUT_TAIL_BYTES`` past the head (empty while the head holds it all)."""
        self.size = 0

    def add(self, data: bytes) -> None:
        """Count ``data``; keep what the head still has room for, the rest as the tail."""
        self.size += len(data)
        if self.keep_all:
            self.chunks.append(data)
        room = self.cap - len(self.head)
        if room > 0:
            if len(data) <= room:
                self.head += data
                return
            self.head += data[:room]
            data = data[room:]
        self.tail = (self.tail + data[-OUTPUT_TAIL_BYTES:])[-OUTPUT_TAIL_BYTES:]

    def text(self) -> str:
        """Everything kept (``keep_all``), as text."""
        return b"".join(self.chunks).decode("utf-8", "replace")

    def kept(self) -> str:
        """What comes back of the stream: all of it up to ``cap`` bytes; past that its first
        part, a line saying how many bytes were left out, and its end, in ``cap`` bytes."""
        if self.size <= self.cap:
            return self.head.decode("utf-8", "replace")
        return cut(bytes(self.head), self.tail, self.size, self.cap).decode("utf-8", "replace")

    def last_words(self, chars: int = 200) -> str:
        """Its last ``chars`` characters with words on them, for a case's message: a Python
        traceback's error; where a stack's frames follow the error (Node.js, a JVM, Ruby), the
        error and its first frame."""
        end = (bytes(self.head[-OUTPUT_TAIL_BYTES:]) + self.tail).decode("utf-8", "replace")
        lines = end.strip().splitlines()
        last = len(lines)
        while last > 1 and (_frame(lines[last - 1]) or not lines[last - 1].strip()):
            last -= 1
        return "\n".join(lines[: min(last + 1, len(lines))]).strip()[-chars:]

    def text_head(self) -> str:
        """The start's last words, for a message."""
        start = bytes(self.head[:OUTPUT_TAIL_BYTES])
        return start.decode("utf-8", "replace").strip()[-300:] or "no word"


FRAME_STARTS = ("at ", "from ")
"""How a frame's line of a stack starts, after its indent (Node.js's and a JVM's ``at``, Ruby's
``from``)."""


def _frame(line: str) -> bool:
    """Whether ``line`` of a program's stderr is a stack frame's, or Node.js's version line
    that ends its report of an uncaught error."""
    text = line.lstrip()
    return (text != line and text.startswith(FRAME_STARTS)) or line.startswith("Node.js v")


def _char_start(data: bytes, i: int) -> int:
    """``i``, or moved back to the first byte of the UTF-8 character it falls inside, so that a
    cut there splits no character."""
    j = i
    while 0 < j < len(data) and i - j < 3 and data[j] & 0xC0 == 0x80:
        j -= 1
    return j


def _continued(data: bytes) -> int:
    """How many bytes at the start of ``data`` end a character that began before it."""
    n = 0
    while n < min(3, len(data)) and data[n] & 0xC0 == 0x80:
        n += 1
    return n


def cut(head: bytes, tail: bytes, size: int, cap: int) -> bytes:
    """A stream of ``size`` bytes (``head`` its start, ``tail`` its end) in ``cap`` bytes: the
    start, a line naming how many bytes were left out, and the end (up to half of ``cap``),
    each cut between characters."""
    tail = tail[len(tail) - min(len(tail), max(cap // 2, 1)) :]
    tail = tail[_continued(tail) :]
    widest = len(f"\n[... {size} bytes left out ...]\n")
    keep = cap - len(tail) - widest
    if keep < 0:  # a cap too small to say it: the end alone
        return tail[len(tail) - min(len(tail), cap) :]
    keep = _char_start(head, keep)
    return head[:keep] + f"\n[... {size - keep - len(tail)} bytes left out ...]\n".encode() + tail


class Process:
    """One started solution process and its pipes."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        fds: dict[str, int],
        keep_stdout: bool,
        kept: int = KEPT_OUTPUT_BYTES,
    ) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.fds = fds
        self.out = Stream(keep_all=keep_stdout, cap=kept)
        self.err = Stream(keep_all=False, cap=kept)
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
        self.cpu_seen_ms = 0.0
        """The most CPU time read of it (``Launcher.cpu_ms`` without a cgroup counter)."""
        self.read_at = (0.0, 0.0)
        """(when, the CPU counter then) at the end of its last ``wait``."""
        self.hosted = False
        """Started by the run's program host (``judge.program_host``), which put the run's
        files in its work dir: nothing to send on its io socket, and no reply pipe."""
        self.marks = b""
        """What a script's or a program's process said on its reply pipe (``codes.BEGAN``, then
        ``codes.EXEC_FAILED`` where its exec failed), read when it is reaped; a hosted
        program's is ``BEGAN`` from its start (the host's ``posix_spawn`` returns once its
        exec is done, and fails where the exec fails)."""


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


def keep_tree_cpu(proc: Process) -> None:
    """Report the larger of the reaped process's own CPU time and its tree's, read before the
    kill (``wait4`` counts only reaped children)."""
    if proc.tree_cpu_ms is not None and proc.tree_cpu_ms > (proc.rusage_cpu_ms or 0.0):
        proc.rusage_cpu_ms = proc.tree_cpu_ms


class Launcher:
    """Starts solution processes and moves their output; subclasses say how they start.

    ``ServedLauncher`` (below) asks a server for each process: the host in ``strict`` and
    ``unsafe``, the zygote in a pool worker.
    """

    def __init__(self, job: dict[str, Any], on_start: Callable[[], None]) -> None:
        self.output_cap: int = MAX_OUTPUT_BYTES
        """The task's output limit (``codes.MAX_OUTPUT_BYTES``)."""
        self.kept: int = int(job.get("kept_output") or KEPT_OUTPUT_BYTES)
        """How much of each stream comes back (the environment's ``kept_output_kb``)."""
        self.on_start = on_start
        fd = job.get("cpu_fd")
        self.counter: int | None = int(fd) if fd is not None else None
        """The run's cgroup CPU counter (a read-only descriptor), or None: no cgroup per run."""
        self.cpus = host_cpus()
        self.run_limit_ms = float(job.get("timeout", 0.0)) * 1000.0
        """The run's limit: the answer's CPU time over all its calls (or program runs)."""
        self.run_used_ms = 0.0
        """CPU time the answer used in its calls so far."""
        self.run_elapsed_ms = 0.0
        """Time on the clock its calls took so far."""
        self.starved: str | None = None
        """Why the host held the answer back past a backstop, if it did: the run has no verdict."""
        self._reading = 0.0

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
        why = proc.err.last_words().splitlines()
        raise LaunchError(f"the solution process did not start: {why[-1] if why else 'no word'}")

    def _spawn(self, mode: str, args: tuple[str, ...], keep_stdout: bool) -> Process:
        raise NotImplementedError  # abstract

    def kill(self, proc: Process) -> None:
        """Kill ``proc`` (if it still runs) and reap it."""
        raise NotImplementedError  # abstract

    def reap(self, proc: Process) -> None:
        """Wait for ``proc``'s end, record its status and CPU time, close its descriptors."""
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

    def cpu_ms(self, proc: Process) -> float:
        """The answer's CPU time now, in ms: the run's cgroup counter (all its processes, one
        ``pread``), else ``proc``'s own (its CPU clock while it runs; what its end reported once
        reaped). Only differences between two readings of one process mean anything."""
        if self.counter is not None:
            return counter_ms(self.counter)
        if proc.status is None:
            try:
                proc.cpu_seen_ms = max(proc.cpu_seen_ms, self._process_cpu_ms(proc))
            except OSError:  # ended meanwhile: what was last read of it
                pass
            return proc.cpu_seen_ms
        return max(proc.cpu_seen_ms, proc.rusage_cpu_ms or 0.0)

    def _process_cpu_ms(self, proc: Process) -> float:
        return process_cpu_ms(proc.proc_pid or proc.pid)

    def measure(self, proc: Process) -> tuple[float, bool]:
        """``proc``'s tree now, from ``/proc``: its CPU time in ms (what it reaped of its
        children included), and whether any of its threads is runnable (``blame.runnable``)."""
        cpu_ms, states = read_tree(proc.proc_pid or proc.pid)
        return cpu_ms, runnable(states)

    def wait(
        self, proc: Process, limit_s: float, since: float, cpu0: float, want_line: bool
    ) -> bytes | None:
        """``pump`` for one call into the answer (``want_line``: its reply) or one run of a
        program (its end), under two CPU-time limits (``blame``): the call's own, ``limit_s`` of
        the answer's CPU time from ``since`` (when ``cpu_ms`` read ``cpu0``), and what is left
        of the run's (its CPU time and clock summed over its calls). Each time a wait on the
        clock ends the rule decides: wait again, or ``SolutionTimeout`` (the process still runs:
        the caller kills it). A process that ended is reaped here. The call's CPU time and clock
        are added to the run's, and its end noted in ``proc.read_at``."""
        limit_ms = limit_s * 1000.0
        # The rule's first wait for each limit, as it stands when the call begins. Most calls
        # end within it: the two limits are made only when a wait on the clock runs out.
        first_ms = min(
            cpu_time_check(0.0, limit_ms, 0.0, True, self.cpus)[1],
            cpu_time_check(
                self.run_used_ms, self.run_limit_ms, self.run_elapsed_ms, True, self.cpus
            )[1],
        )
        due = since + first_ms / 1000.0
        limits: tuple[Limit, Limit] | None = None
        self._reading = cpu0
        try:
            while True:
                try:
                    line = self.pump(proc, due, want_line)
                    break
                except TimeoutError:
                    call, run = limits = limits or self._limits(limit_ms, cpu0, since)
                    self._check(proc, call, run)
                    due = min(call.due, run.due)
            if line is None:
                self.reap(proc)
            self._reading = self.cpu_ms(proc)
            return line
        finally:
            end = time.monotonic()
            cpu = self._reading
            self.run_used_ms += max(cpu - cpu0, 0.0)
            self.run_elapsed_ms += (end - since) * 1000.0
            proc.read_at = (end, cpu)

    def _limits(self, limit_ms: float, cpu0: float, since: float) -> tuple[Limit, Limit]:
        """A call's two limits, counting from its start (``cpu0``, ``since``): its own, and the
        run's with what its earlier calls used carried in."""
        run_cpu0 = cpu0 - self.run_used_ms
        run_t0 = since - self.run_elapsed_ms / 1000.0
        return (
            Limit(limit_ms, cpu0, since, self.cpus),
            Limit(self.run_limit_ms, run_cpu0, run_t0, self.cpus),
        )

    def _check(self, proc: Process, call: Limit, run: Limit) -> None:
        """Apply the rule to both limits now (the reading kept in ``_reading``); raise
        ``SolutionTimeout`` where it ends the wait."""
        now = time.monotonic()
        cpu = self.cpu_ms(proc)
        held = True
        if self.counter is None or call.needs_states(now) or run.needs_states(now):
            # What the tree used before it is killed (wait4 counts only reaped children, and a
            # sandbox wrapper's own descendants die unreaped with it), and whether it can run.
            tree_ms, held = self.measure(proc)
            proc.tree_cpu_ms = tree_ms
            if self.counter is None:  # its children's CPU time counts too
                cpu = max(cpu, tree_ms)
        self._reading = cpu
        verdicts = (
            ("run", run, run.check(cpu, now, held)),
            ("call", call, call.check(cpu, now, held)),
        )
        for scope, limit, what in verdicts:
            if what in (OVER, WAITING):
                why = _why(what, scope, limit, cpu, now)
                raise SolutionTimeout(why, blame_solution=True, whole_run=scope == "run")
        for scope, limit, what in verdicts:
            if what == STARVED:
                self.starved = _why(what, scope, limit, cpu, now)
                raise SolutionTimeout(self.starved, blame_solution=False, whole_run=True)


def _why(what: str, scope: str, limit: Limit, cpu_ms: float, now: float) -> str:
    """What happened to a CPU-time limit (the rule's ``what``; ``scope``: ``call`` or
    ``run``), in words that follow "the call" or "the program"."""
    used_s = (cpu_ms - limit.cpu0) / 1000.0
    whose = "its" if scope == "call" else "the run's"
    limit_s = limit.limit_ms / 1000.0
    if what == OVER:
        return f"used {whose} {limit_s:.3g} s of CPU time"
    if what == WAITING:
        return f"waited past {whose} {limit_s:.3g} s limit ({used_s:.3g} s of CPU time used)"
    return (
        f"was held back by the host: {used_s:.3g} s of CPU time of {whose} {limit_s:.3g} s in "
        f"{limit.elapsed_ms(now) / 1000.0:.3g} s on the clock, past the {BACKSTOP:g}x backstop"
    )


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
    """Close every descriptor of ``fds`` (ones received for a process that will not run)."""
    for fd in fds:
        os.close(fd)


SPAWN_KEYS = ("answer_path", "limits_json", "work_bytes", "runtime")
"""What of the job a pool's solution process reads (a strict host reads only mode and args)."""


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
        w_req, r_rep, r_out, r_err, w_in, io, pidfd = fds
        fdmap = {"req": w_req, "rep": r_rep, "out": r_out, "err": r_err, "in": w_in, "io": io}
        return self._process(pid, proc_pid, pidfd, fdmap, keep_stdout)

    def _process(
        self, pid: int, proc_pid: int | None, pidfd: int, fdmap: dict[str, int], keep_stdout: bool
    ) -> Process:
        """A started process from what its server handed back (the pipes read from made
        non-blocking); ``proc_pid`` None: not in our ``/proc``, or numbered otherwise there."""
        for name in ("rep", "out", "err"):
            if name in fdmap:
                os.set_blocking(fdmap[name], False)
        proc = Process(pid, pidfd, fdmap, keep_stdout, self.kept)
        proc.proc_pid = proc_pid
        return proc

    def _ask_spawn(self, req: dict[str, Any]) -> tuple[int, int | None, list[int]]:
        """Have the server start one: (pid, pid in our ``/proc`` if known, its seven fds: the
        call pipes, stdout, stderr, stdin, the io socket and a pidfd)."""
        self.ctl.send(wire.encode({"op": "spawn", **req}))
        data, fds = recv_fds(self.ctl, MSG_MAX, 7)
        reply = wire.loads(data.decode())
        if "error" in reply or len(fds) != 7:
            close_all(fds)
            raise OSError(f"no solution process: {reply.get('error', 'no descriptors')}")
        return int(reply["pid"]), reply.get("proc_pid"), fds

    def kill(self, proc: Process) -> None:
        """Have the server kill ``proc`` (if it still runs), then reap it."""
        if proc.status is None:
            self._ask(proc, "kill")
        self.reap(proc)

    def reap(self, proc: Process) -> None:
        """Have the server reap ``proc`` (if not yet), then close its descriptors (what a
        script's or a program's process said on its reply pipe kept first: ``Process.marks``)."""
        if proc.status is None:
            self._ask(proc, "reap")
        rep = proc.fds.get("rep")
        if rep is not None and (proc.watch is None or not proc.watch.want_line):
            try:
                proc.marks = os.read(rep, 64)
            except OSError:  # nothing said (BlockingIOError): the set-up never ended
                pass
        for fd in (*proc.fds.values(), proc.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        proc.fds = {}

    def measure(self, proc: Process) -> tuple[float, bool]:
        """As the base does where ``proc`` is in our ``/proc``; else the server's reading."""
        if proc.proc_pid is not None:
            return super().measure(proc)
        reply = self._request({"op": "measure", "pid": proc.pid})
        return float(reply.get("cpu_ms") or 0.0), bool(reply.get("runnable"))

    def _process_cpu_ms(self, proc: Process) -> float:
        """As the base does where ``proc`` is in our ``/proc``; else the server's reading of its
        tree (a host without a cgroup per run)."""
        if proc.proc_pid is not None:
            return super()._process_cpu_ms(proc)
        return self.measure(proc)[0]

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
