"""A pool worker: a long-lived process in its own sandbox, and its clean zygote.

The worker runs inside a bwrap of its own. At start it takes a user namespace of its own,
imports what answers and verifiers commonly use, freezes that heap for the garbage collector
(fewer copy-on-write faults in forked children), and forks a **zygote**: pid 1 of a pid namespace
that the worker's user namespace owns, so that it may make a fresh pid namespace for every child.
The worker then drops its capabilities and serves jobs.

Per job (one at a time, a JSON line on stdin) the worker runs the judge itself: the verifier is
trusted code, and it loads the test data here. The answer never runs here. When the verifier
first uses the answer, the worker asks the zygote for a solution process; the zygote forks it
from its own memory, which has never held test data or an answer, as pid 1 of a fresh pid
namespace; the child isolates itself (``isolate``: new user, mount, ipc and uts namespaces,
uid 65534 without capabilities, a tmpfs work dir holding only the answer, the verifier's folders
covered, the run's cgroups and rlimits) and serves the answer. Its pipe ends and a pidfd come
back over a socket (``SCM_RIGHTS``); the zygote signals and reaps it on request. The answer
shares the worker's network namespace: no interface but loopback, nothing listening.

Events go to the host on the result fd: ``ready`` once, then per job the judge's own events and a
final ``done`` with the verifier's exit code.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys

from . import harness, isolate, solution_host, wire
from .proxy import MSG_MAX, served_by

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Modules answers commonly import, loaded once here so a forked solution starts with them.
PRELOAD = (
    "collections",
    "itertools",
    "functools",
    "math",
    "heapq",
    "bisect",
    "string",
    "re",
    "typing",
    "dataclasses",
    "fractions",
    "decimal",
    "statistics",
    "random",
    "copy",
    "operator",
    "json",
    "hashlib",
)
VERIFIER_PRELOAD = ("ast", "traceback")
"""The verifier's own imports: loaded after the zygote is forked, which never needs them."""
SOLUTION_ID = 65534


def run_job(job: dict[str, Any], result_fd: int, zygote: socket.socket) -> None:
    """Judge one job here, then have the zygote end anything of the run's still alive."""
    try:
        code = harness.judge(job, result_fd, served_by(zygote))
    finally:
        zygote.send(wire.encode({"op": "reset"}))
        zygote.recv(MSG_MAX)
    os.write(result_fd, wire.encode({"event": "done", "exit_code": code}))


# -- the zygote ---------------------------------------------------------------------------------
def _become_solution(job: dict[str, Any], req: dict[str, Any], fds: list[int]) -> int:
    """Runs in the forked child, pid 1 of a fresh pid namespace: isolate, then serve the answer."""
    isolate.set_process_name("dg-solution")
    isolate.die_with_parent()
    os.setsid()  # a group of its own: kill(0) and killpg(0) reach nothing of the worker's
    for procs in job.get("cgroup_procs") or []:
        with open(procs, "w") as f:
            f.write("0")
    with open(job["answer_path"], "rb") as f:
        answer = f.read()
    solution_host.move_fds(fds, 0)
    os.closerange(5, 65536)
    isolate.new_user_namespace(
        os.getuid(),
        os.getgid(),
        SOLUTION_ID,
        isolate.CLONE_NEWNS | isolate.CLONE_NEWIPC | isolate.CLONE_NEWUTS,
    )
    isolate.make_private()
    size = int(job.get("work_bytes") or 128 * 2**20)
    for hidden in ("/judge", "/cg", "/proc"):
        if os.path.isdir(hidden):
            isolate.tmpfs(hidden, 4096, "0555")
    isolate.tmpfs("/tmp", size, "1777")
    isolate.tmpfs("/work", size, "0755")
    if os.path.isdir("/dev/shm"):
        isolate.tmpfs("/dev/shm", size, "1777")
    with open("/work/solution.py", "wb") as f:
        f.write(answer)
    del answer
    # Nothing writable but the capped work dir, /tmp and /dev/shm: the worker's root and /dev
    # are tmpfs that no limit would count, and the answer's own file stays as it was sent.
    isolate.read_only("/work/solution.py", bind_first=True)
    for folder in ("/", "/dev"):
        isolate.read_only(folder)
    if "random" in sys.modules:  # a fork shares the zygote's state: reseed like a fresh start
        sys.modules["random"].seed()
    isolate.sethostname("sandbox")
    isolate.drop_privileges()
    isolate.no_new_user_namespaces()
    os.chdir("/work")
    os.environ.clear()
    os.environ.update(job.get("solution_env") or {})
    argv = [
        req["mode"],
        "/work/solution.py",
        job.get("limits_json") or "{}",
        *map(str, req.get("args") or []),
    ]
    try:
        code = solution_host.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code


def _proc_pid(pidfd: int) -> int:
    """The pid as the mounted ``/proc`` numbers it (the pidfd's ``Pid:`` in fdinfo)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise OSError(f"no pid for pidfd {pidfd}")


class Zygote:
    """Forks solution processes from clean memory, each pid 1 of a fresh pid namespace."""

    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self.own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
        self.children: dict[int, int] = {}

    def fork(self) -> int:
        isolate.unshare(isolate.CLONE_NEWPID)
        try:
            pid = os.fork()
        except BaseException:
            isolate.setns(self.own_pid_ns, isolate.CLONE_NEWPID)
            raise
        if pid:
            isolate.setns(self.own_pid_ns, isolate.CLONE_NEWPID)
        return pid

    def spawn(self, req: dict[str, Any]) -> None:
        pipes = [os.pipe() for _ in range(5)]
        (r_req, w_req), (r_rep, w_rep), (r_out, w_out), (r_err, w_err), (r_in, w_in) = pipes
        pid = self.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            code = solution_host.SETUP_FAILED
            try:
                self.ctl.close()
                code = _become_solution(req["job"], req, [r_in, w_out, w_err, r_req, w_rep])
            except BaseException as exc:
                try:
                    os.write(2, f"solution set-up failed: {exc}\n".encode())
                except OSError:
                    pass
            finally:
                os._exit(code)
        self.children[pid] = pidfd = os.pidfd_open(pid)
        for fd in (r_req, w_rep, w_out, w_err, r_in):
            os.close(fd)
        mine = [w_req, r_rep, r_out, r_err, w_in]
        try:
            reply = {"pid": pid, "proc_pid": _proc_pid(pidfd)}
            socket.send_fds(self.ctl, [wire.encode(reply)], [*mine, pidfd])
        finally:
            for fd in mine:
                os.close(fd)

    def end(self, pid: int, kill: bool) -> tuple[int, float]:
        pidfd = self.children.pop(pid)
        if kill:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status, usage = os.wait4(pid, 0)
        os.close(pidfd)
        return status, (usage.ru_utime + usage.ru_stime) * 1000.0

    def serve(self) -> None:
        while data := self.ctl.recv(MSG_MAX):
            req = wire.loads(data.decode())
            op = req.get("op")
            try:
                if op == "spawn":
                    self.spawn(req)
                elif op in ("kill", "reap"):
                    status, cpu = self.end(int(req["pid"]), op == "kill")
                    self.ctl.send(wire.encode({"status": status, "cpu_ms": cpu}))
                elif op == "reset":
                    for pid in list(self.children):
                        self.end(pid, kill=True)
                    self.ctl.send(wire.encode({"ok": True}))
            except (OSError, KeyError, ValueError) as exc:
                self.ctl.send(wire.encode({"error": str(exc), "status": -1, "cpu_ms": 0.0}))


def _start_zygote(result_fd: int) -> socket.socket:
    """Fork the zygote (pid 1 of a pid namespace our user namespace owns); return its socket."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    isolate.unshare(isolate.CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the zygote's whole life
        try:
            mine.close()
            os.close(result_fd)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            isolate.set_process_name("dg-zygote")
            isolate.die_with_parent()
            Zygote(theirs).serve()
        finally:
            os._exit(0)
    theirs.close()
    return mine


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str]) -> int:
    """``worker RESULT_FD``: serve jobs from stdin until it closes."""
    result_fd = int(argv[0])
    isolate.set_process_name("dg-worker")
    # A user namespace of our own: the capability to make a pid namespace per solution.
    isolate.new_user_namespace(os.getuid(), os.getgid(), os.getuid())
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    gc.freeze()  # children share these objects: keep the collector from touching their pages
    zygote = _start_zygote(result_fd)
    isolate.drop_privileges()  # the worker runs verifiers: it needs no capability
    for name in VERIFIER_PRELOAD:
        __import__(name)
    gc.freeze()
    ready = {"event": "ready", "rss_kb": _rss_kb(), "pid": os.getpid()}
    os.write(result_fd, wire.encode(ready))
    jobs = os.fdopen(0, "rb", buffering=0)
    buffer = b""
    while True:
        chunk = jobs.read(MSG_MAX)
        if not chunk:
            return 0
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            run_job(wire.loads(line.decode()), result_fd, zygote)
