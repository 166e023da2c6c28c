"""A pool worker: a long-lived, clean process inside its own sandbox that forks each run.

Per job (one at a time, a JSON line on stdin) the worker forks the verifier process, which gets a
fresh user and mount namespace with a private /tmp and no capabilities, and runs the judge. When
the verifier first uses the answer it asks the worker (over a socket) for a solution process; the
worker forks it from its own clean memory (never from the verifier, which holds the test data),
the child isolates itself (``isolate``: new user, pid, mount, net, ipc and uts namespaces, a tmpfs
work dir with only the answer, the verifier's folders covered, no capabilities) and serves the
answer, and the pipe ends go back to the verifier with ``SCM_RIGHTS``. The worker itself never
runs untrusted code and keeps no answer in its memory, so nothing leaks from one run to the next.

Events go to the host on the result fd: ``ready`` once, then per job the judge's own events and a
final ``done`` with the verifier's exit status.
"""

from __future__ import annotations

import os
import select
import socket
import sys

from . import harness, isolate, solution_host, wire
from .proxy import Launcher, Process

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
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
    # the verifier's own imports, loaded once here too
    "ast",
    "importlib.util",
    "traceback",
)
VERIFIER_ID = 1000
SOLUTION_ID = 65534
MSG_MAX = 65536


class PoolLauncher(Launcher):
    """The verifier's launcher inside the pool: the worker forks each solution process."""

    ctl: socket.socket

    def start(self, mode: str, args: tuple[str, ...] = (), keep_stdout: bool = False) -> Process:
        self.on_start()
        self.ctl.send(wire.encode({"op": "spawn", "mode": mode, "args": list(args)}))
        data, fds, _, _ = socket.recv_fds(self.ctl, MSG_MAX, 5)
        reply = wire.loads(data.decode())
        if "error" in reply:
            for fd in fds:
                os.close(fd)
            raise OSError(f"the worker could not start the solution: {reply['error']}")
        w_req, r_rep, r_out, r_err, w_in = fds
        for fd in (r_rep, r_out, r_err):
            os.set_blocking(fd, False)
        pid = int(reply["pid"])
        fdmap = {"req": w_req, "rep": r_rep, "out": r_out, "err": r_err, "in": w_in}
        return Process(pid, os.pidfd_open(pid), fdmap, keep_stdout)

    def reap(self, proc: Process) -> None:
        if proc.status is None:
            self.ctl.send(wire.encode({"op": "reap", "pid": proc.pid}))
            reply = wire.loads(self.ctl.recv(MSG_MAX).decode())
            proc.status = int(reply["status"])
            proc.rusage_cpu_ms = float(reply["cpu_ms"])
        for fd in (*proc.fds.values(), proc.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
        proc.fds = {}


def _launcher_with(ctl: socket.socket) -> Callable[..., PoolLauncher]:
    def make(job: dict[str, Any], on_start: Callable[[], None]) -> PoolLauncher:
        launcher = PoolLauncher(job, on_start)
        launcher.ctl = ctl
        return launcher

    return make


def _write_map(uid: int, gid: int, inner: int) -> None:
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{inner} {uid} 1"),
        ("gid_map", f"{inner} {gid} 1"),
    ):
        fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _become_verifier(job: dict[str, Any]) -> None:
    """A private /tmp for this run's verifier, then no capabilities."""
    uid, gid = os.getuid(), os.getgid()
    isolate._check(isolate.libc().unshare(isolate.CLONE_NEWUSER | isolate.CLONE_NEWNS), "unshare")
    _write_map(uid, gid, VERIFIER_ID)
    isolate.make_private()
    isolate.tmpfs("/tmp", int(job.get("tmp_bytes", 64 * 2**20)), "1777")
    isolate.drop_privileges()
    os.chdir("/tmp")


def _become_solution(job: dict[str, Any], req: dict[str, Any], fds: list[int]) -> int:
    """Runs in the forked child: isolate, then serve the answer. Never returns normally."""
    for procs in job.get("cgroup_procs") or []:
        with open(procs, "w") as f:
            f.write("0")
    with open(job["answer_path"], "rb") as f:
        answer = f.read()
    high = [os.dup2(fd, 100 + i) for i, fd in enumerate(fds)]
    for dst, src in enumerate(high):
        os.dup2(src, dst)
    os.closerange(5, 65536)
    uid, gid = os.getuid(), os.getgid()
    isolate.unshare_all(uid, gid, SOLUTION_ID)
    child = os.fork()
    if child:  # stay outside the new pid namespace and mirror the answer's exit
        for fd in range(5):
            os.close(fd)
        _, status = os.waitpid(child, 0)
        if os.WIFSIGNALED(status):
            os.kill(os.getpid(), os.WTERMSIG(status))
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    isolate.die_with_parent()
    isolate.make_private()
    size = int(job.get("work_bytes", 128 * 2**20))
    for hidden in ("/judge", "/cg", "/proc"):
        if os.path.isdir(hidden):
            isolate.tmpfs(hidden, 4096, "0555")
    isolate.tmpfs("/tmp", size, "1777")
    isolate.tmpfs("/work", size, "0755")
    with open("/work/solution.py", "wb") as f:
        f.write(answer)
    del answer
    if "random" in sys.modules:  # a fork shares the worker's state: reseed like a fresh start
        sys.modules["random"].seed()
    isolate.sethostname("sandbox")
    isolate.drop_privileges()
    os.chdir("/work")
    os.environ.clear()
    os.environ.update(job.get("solution_env") or {})
    argv = [
        req["mode"],
        "/work/solution.py",
        job.get("limits_json", "{}"),
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


def _spawn(
    job: dict[str, Any], req: dict[str, Any], ctl: socket.socket, children: dict[int, int]
) -> None:
    r_req, w_req = os.pipe()
    r_rep, w_rep = os.pipe()
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    r_in, w_in = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        code = 127
        try:
            ctl.close()
            code = _become_solution(job, req, [r_in, w_out, w_err, r_req, w_rep])
        except BaseException as exc:
            try:
                os.write(2, f"solution set-up failed: {exc}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    children[pid] = os.pidfd_open(pid)
    for fd in (r_req, w_rep, w_out, w_err, r_in):
        os.close(fd)
    mine = [w_req, r_rep, r_out, r_err, w_in]
    try:
        socket.send_fds(ctl, [wire.encode({"pid": pid})], mine)
    finally:
        for fd in mine:
            os.close(fd)


def _reap(pid: int, children: dict[int, int]) -> tuple[int, float]:
    _, status, usage = os.wait4(pid, 0)
    fd = children.pop(pid, None)
    if fd is not None:
        os.close(fd)
    return status, (usage.ru_utime + usage.ru_stime) * 1000.0


def run_job(job: dict[str, Any], result_fd: int) -> None:
    """Fork the verifier, serve its requests until it exits, then clean up and report."""
    ctl, ctl_v = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid_v = os.fork()
    if pid_v == 0:  # pragma: no cover - the verifier process
        code = 1
        try:
            ctl.close()
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            _become_verifier(job)
            code = harness.judge(job, result_fd, _launcher_with(ctl_v))
        except BaseException as exc:
            try:
                os.write(2, f"verifier failed: {exc}\n".encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    ctl_v.close()
    children: dict[int, int] = {}
    pidfd_v = os.pidfd_open(pid_v)
    poller = select.poll()
    poller.register(ctl, select.POLLIN)
    poller.register(pidfd_v, select.POLLIN)
    alive = True
    while alive:
        for fd, _ in poller.poll():
            if fd == pidfd_v:
                alive = False
                continue
            try:
                data = ctl.recv(MSG_MAX)
            except OSError:
                data = b""
            if not data:
                poller.unregister(ctl)
                continue
            req = wire.loads(data.decode())
            try:
                if req.get("op") == "spawn":
                    _spawn(job, req, ctl, children)
                elif req.get("op") == "reap":
                    status, cpu = _reap(int(req["pid"]), children)
                    ctl.send(wire.encode({"status": status, "cpu_ms": cpu}))
            except OSError as exc:
                ctl.send(wire.encode({"error": str(exc)}))
    _, status, _ = os.wait4(pid_v, 0)
    os.close(pidfd_v)
    ctl.close()
    for pid in list(children):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        _reap(pid, children)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    os.write(result_fd, wire.encode({"event": "done", "exit_code": code}))


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str]) -> int:
    """``worker RESULT_FD``: serve jobs from stdin until it closes."""
    result_fd = int(argv[0])
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    os.write(result_fd, wire.encode({"event": "ready", "rss_kb": _rss_kb(), "pid": os.getpid()}))
    jobs = os.fdopen(0, "rb", buffering=0)
    buffer = b""
    while True:
        chunk = jobs.read(MSG_MAX)
        if not chunk:
            return 0
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            run_job(wire.loads(line.decode()), result_fd)
