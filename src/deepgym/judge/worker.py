"""A pool worker: a long-lived process in its own sandbox, and its clean zygote.

The worker runs inside a bwrap of its own. At start it takes a user namespace of its own (where
it is uid 65534), imports what answers and verifiers commonly use, freezes that heap for the
garbage collector (fewer copy-on-write faults in forked children), and forks a **zygote**, pid 1
of a pid namespace that the worker's user namespace owns. The worker then drops its capabilities
and serves jobs.

The zygote seals once what every solution shares (``Zygote.seal``: a mount namespace of its own
with the verifier's folders covered and the rest read-only, the hostname, an empty bounding set,
no-new-privileges, the seccomp filter, no signal handler, non-dumpable) and keeps one solution
process forked ahead, a *standby*: pid 2 or higher of a pid namespace whose pid 1 is an init of
ours (``judge.init.Maker``, cloned by the zygote: it shares the zygote's memory, runs no code of
ours and reaps what the answer orphans), in fresh mount and ipc namespaces, waiting for its run.
The standby is the zygote's own child, so the zygote reaps it: its exit status (a signal's
included, which a pid 1 could not die of) and rusage are the answer's own. When it is reaped, the
zygote kills its init (ending whatever the answer left in the namespace) and reaps it, or, where
the worker's cgroup shows nothing of any run left, keeps the init to host the next standby
(``Zygote.end``). The zygote dies with the worker; its end ends every init and run below it.

Per job (one at a time, a JSON line on stdin) the worker writes the answer to a file of its own,
asks the zygote for the solution process, and runs the judge itself: the verifier is trusted
code, and it loads the test data here. The answer never runs here. The zygote hands over its
standby (its pipe ends, its pidfd and its init's come back over a socket, ``SCM_RIGHTS``),
which joins the worker's cgroups, reads the answer, mounts its run's runtime read-only (where
the job names one: ``deepgym.runtimes``) and covers the others, mounts its own capped work dir,
``/tmp`` and ``/dev/shm``, drops its capabilities and serves the answer from the verifier's
first call; the zygote signals and reaps it on request, and its init with it (which ends
whatever the answer left in the namespace). The answer shares the worker's network namespace:
no interface but loopback, nothing listening.

Events go to the host on the result fd: ``ready`` once, then per job the report and a ``done``
with the verifier's exit code; each run's ``in_play`` mark goes on the marks fd, which the host
reads when the run ends.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # (``signal`` without its enums)
import _socket
import contextlib
import gc
import os
import struct
import sys

# build and program_host (with select): loaded here, once, not in every exec case or program host
from . import build, files, init, isolate, program_host, solution_host, wire  # noqa: F401
from .codes import (
    ANSWER_PATH,
    IN_RUNTIME,
    IN_RUNTIMES,
    MSG_MAX,
    RUNTIME_ENV,
    SETUP_FAILED,
    SOLUTION_UID,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Modules most answers import, loaded once here so a forked solution starts with them. Each one
# costs every run (its objects and mappings are copied at each fork and torn down at each exit),
# so rarer ones are left to the answers that import them: without dataclasses, hashlib,
# statistics, fractions and decimal (2 MB, 31 mappings) a HumanEval run took about 3% less CPU
# (benchmarks/RESULTS.md), and an answer that imports one pays 1 - 5 ms once, in its own run.
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
    "copy",
    "operator",
    "random",
    "json",
    "traceback",  # every answer that raises is reported with its traceback
    "runpy",  # script tasks run the answer as __main__
    "pkgutil",  # (runpy.run_path imports it at its first call)
)
VERIFIER_PRELOAD = ("ast",)
"""The verifier's own imports: loaded after the zygote is forked, which never needs them."""


# -- the zygote ---------------------------------------------------------------------------------
def _become_solution(go: int, fds: list[int], cgroup_fds: list[int]) -> int:
    """Runs in the forked child, pid 2 or higher of a pid namespace (beside its init): isolate,
    wait for its run (the request arrives on ``go``), then serve the answer.

    The zygote prepared what every solution shares (``Zygote.seal``): the verifier's folders
    covered, the rest read-only, an empty bounding set, no-new-privileges and the seccomp
    filter, and the worker's folder of every built runtime covered. What is the run's own is
    made here: its runtime, if it names one, is mounted from beneath that cover."""
    isolate.set_process_name("dg-standby")
    isolate.die_with_parent()
    # As any process: dumpable, Python's SIGINT handler (the zygote, whose memory its inits
    # share, is neither: ``Zygote.seal``).
    isolate.dumpable(True)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)  # (no enums: fewer pages written)
    os.setsid()  # a group of its own: kill(0) and killpg(0) reach nothing of the worker's
    # New mount and ipc namespaces in the worker's user namespace, where this process is uid
    # 65534: the capabilities inherited from the zygote serve this set-up and are dropped
    # before the answer's first line.
    isolate.unshare(isolate.CLONE_NEWNS | isolate.CLONE_NEWIPC)
    payload = b""
    while chunk := os.read(go, 65536):  # standby until the zygote hands this process a run
        payload += chunk
    os.close(go)
    req = wire.loads(payload.decode())
    answer, site = _prepare_run(req, fds, cgroup_fds)
    job = req["job"]
    argv = [
        req["mode"],
        "/work/solution.py",
        job.get("limits_json") or "{}",
        *map(str, req.get("args") or []),
    ]
    try:  # the answer's bytes go along: read here once, not again from the file
        source = answer if req["mode"] == "module" else None
        code = solution_host.main(argv, source, prepared=True, io=files.IO_FD, site=site)
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


def _become_host(payload: bytes, fds: list[int], cgroup_fds: list[int]) -> int:
    """Runs in the forked child, pid 1 of a fresh pid namespace: set up the run's sandbox once,
    then start each case's program in it on the worker's requests (``program_host``)."""
    isolate.die_with_parent()
    # Non-dumpable (the zygote's memory) and without a handler (the zygote ignores SIGINT), as
    # an init of ours must be: nothing of the answer can trace or signal it.
    os.setsid()
    isolate.unshare(isolate.CLONE_NEWNS | isolate.CLONE_NEWIPC)
    req = wire.loads(payload.decode())
    _prepare_run(req, fds, cgroup_fds)
    isolate.set_process_name("dg-host")
    solution_host.apply_limits(wire.loads(req["job"].get("limits_json") or "{}"))
    return program_host.serve(req["job"], files.IO_FD)


def _prepare_run(req: dict[str, Any], fds: list[int], cgroup_fds: list[int]) -> tuple[bytes, str]:
    """The run's own set-up of a solution process (or a program host): its groups joined, its
    runtime mounted, its pipes in place, its capped writable folders with the answer's file (a
    built program runs as itself), capabilities dropped, ``/work`` its working dir. The
    answer's bytes and its runtime's packages' folder."""
    isolate.set_process_name("dg-solution")
    job = req["job"]
    for fd in cgroup_fds:  # join the worker's groups (the zygote holds their procs files)
        os.write(fd, b"0")
    answer = _read_file(job["answer_path"])
    site = ""
    if runtime := job.get("runtime"):  # mounted as strict mounts it: read-only, same place
        # The zygote covered every runtime (``seal``): this run's is bound from beneath the
        # cover, which goes back over the others. (A worker without the runtimes' folder fails
        # here, its set-up: never an answer's 0.) A run without one mounts nothing here.
        isolate.umount(IN_RUNTIMES)
        isolate.bind_read_only(f"{IN_RUNTIMES}/{runtime['dir']}", IN_RUNTIME)
        isolate.hide((IN_RUNTIMES,))
        env = runtime["env"]
        site = env.get(RUNTIME_ENV, "")  # its packages' folder: ``solution_host.use_runtime``
        os.environ.update({k: v for k, v in env.items() if k != RUNTIME_ENV})  # (its own)
    solution_host.move_fds(fds, 0)  # stdin, stdout, stderr, the call pipes, the io socket
    os.closerange(files.IO_FD + 1, 65536)  # the zygote's own descriptors among them
    size = int(job.get("work_bytes") or 128 * 2**20)
    isolate.tmpfs("/tmp", size, "1777")  # over the worker's, with the answer's file
    isolate.tmpfs("/work", size, "0755")
    if os.path.isdir("/dev/shm"):
        isolate.tmpfs("/dev/shm", size, "1777")
    mode = 0o755 if req["mode"] in ("exec", "host") else 0o644  # a built program runs as itself
    fd = os.open("/work/solution.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        solution_host.write_all(fd, answer)
    finally:
        os.close(fd)
    isolate.read_only("/work/solution.py", bind_first=True)  # stays as it was sent
    # (``random`` reseeds itself in a forked child: an at-fork hook of its own)
    isolate.drop_capabilities()  # the bounding set and no-new-privileges: from the zygote
    os.chdir("/work")  # (its environment: the zygote's, which is the worker's)
    return answer, site


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = []
        while chunk := os.read(fd, 1 << 20):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def _warm() -> None:
    """Run here, a hundred times, the code each solution runs for a call: its bytecode is then
    specialised once, in the zygote, instead of rewritten (and so copied) in every solution
    (measured: about 3% of a pooled run's CPU)."""
    module = type(sys)("warm")
    exec(compile("def f(a, b):\n    return a\n", "<warm>", "exec"), module.__dict__)
    refs = solution_host._Refs()
    for i in range(100):
        call = {"op": "call", "name": "f", "args": [i, [1, "x"]], "kwargs": {}}
        req = wire.decode(wire.encode(call))
        wire.encode({"ok": solution_host._serve_one(module, refs, req)}, refs.put)
    try:  # and what reports an answer that raised
        solution_host._serve_one(module, refs, {"op": "call", "name": "g"})
    except AttributeError as exc:
        wire.encode({"err": solution_host._error(exc)})


class Zygote:
    """Forks solution processes from clean memory, each in a pid namespace whose pid 1 is an
    init of ours (``init.Maker``): pid 2 of a new one, made here just before, or the next pid of
    one the last run left empty (``end``).

    Everything this process touches after a fork is copied (the child shares its pages), so its
    loop is kept to a few system calls: it never decodes a request (the child does) and never
    holds an answer (the child reads it from the worker's file)."""

    def __init__(self, ctl: _socket.socket, cgroup_procs: list[str]) -> None:
        self.ctl = ctl
        # a v1 group's procs file by path; a v2 one as a descriptor the host opened (``&N``)
        self.cgroup_fds = [
            int(p[1:]) if p.startswith("&") else os.open(p, os.O_WRONLY) for p in cgroup_procs
        ]
        self.children: dict[int, tuple[int, int]] = {}
        """Each handed-out process by pid: its pidfd, and its init's."""
        self.dying: list[int] = []
        """The pidfds of the inits killed, whose end ``bury`` waits for."""
        self.standby: tuple[int, int, int, list[int], int] | None = None
        self.spare: int | None = None
        """The pidfd of an init whose namespace holds nothing else (``end``): the next solution
        process is born there, instead of under an init of its own."""
        self.run_procs = _process_count(cgroup_procs)
        """Where the worker's group's processes are counted (every process of a run joins it);
        None where they are not (each init then serves one solution process)."""
        # What its inits, which share this process's memory and copy its signal dispositions,
        # must have: non-dumpable memory, no signal handler (``init.Maker`` checks; it reads
        # this process's ``/proc``, which ``seal`` covers).
        isolate.dumpable(False)
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # the one handler Python installs
        self.make_init = init.Maker()

    def seal(self) -> None:
        """Once, what every solution shares: a mount namespace of the zygote's own with the
        verifier's folders (``/judge``, ``/cg``, ``/proc``) and the runtimes covered and
        everything else read-only (each solution then mounts only its writable tmpfs, and its
        runtime, if any), the hostname, an empty bounding set, no-new-privileges and the seccomp
        filter against user namespaces. Every fork inherits them; none of them needs undoing."""
        isolate.unshare(isolate.CLONE_NEWNS | isolate.CLONE_NEWUTS)
        isolate.make_private()
        isolate.hide((*isolate.VERIFIER_FOLDERS, IN_RUNTIMES))  # (a run's own: its solution)
        # Nothing writable but what each solution mounts (its capped work dir, /tmp and
        # /dev/shm): the worker's root and /dev are tmpfs that no limit would count.
        for folder in ("/", "/dev"):
            isolate.read_only(folder)
        isolate.sethostname("sandbox")
        _warm()  # the wire codec (its C scanner and encoder too) and the serving loop's code
        gc.freeze()
        isolate.lock()

    def fork(self) -> tuple[int, int]:
        """Fork a solution process under an init (pid 1 of its namespace): the spare's (``end``),
        else a new one, made first. Its pid here (0 in the child), and its init's pidfd. It is
        the namespace's pid 2, or higher in a spare's."""
        spare, self.spare = self.spare, None
        if spare is not None:
            try:
                return self._fork_under(spare, enter=True)
            except OSError:  # (its namespace took no process: its init gone) a new one
                pass
        return self._fork_under(self.make_init(b"dg-zygote"))

    def _fork_under(self, init_fd: int, enter: bool = False) -> tuple[int, int]:
        """Fork a solution process into ``init_fd``'s namespace (``enter``: joined first; else
        the one this process's children are born in); then children are born in this process's
        own again. An init whose fork failed is killed and reaped."""
        pid = -1
        try:
            if enter:
                self.make_init.enter(init_fd)
            pid = os.fork()
        except BaseException:
            _kill(init_fd)
            self.make_init.reap(init_fd)
            raise
        finally:
            if pid:  # (the child stays: its own processes are born in its namespace)
                self.make_init.leave()
        return pid, init_fd

    def prepare(self, host: bytes | None = None) -> None:
        """Fork the next solution process ahead of its run: it sets up what it can and waits
        (named ``dg-standby``), so that a run's request finds it forked. ``host``: a program
        host's request instead (``program_host``), forked now as pid 1 of its own namespace
        (no init beside it: it is one), set up at once, and handed to the worker as ``spawn``
        hands a solution process, without an init's pidfd."""
        r_go, w_go = os.pipe()
        r_req, w_req = os.pipe()
        r_rep, w_rep = os.pipe()
        r_out, w_out = os.pipe()
        r_err, w_err = os.pipe()
        r_in, w_in = os.pipe()
        io_theirs, io_mine = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        io_t, io_m = io_theirs.detach(), io_mine.detach()
        pid, init_fd = self.fork() if host is None else self.fork_host()
        if pid == 0:  # pragma: no cover - the child never returns
            code = SETUP_FAILED
            try:
                self.ctl.close()
                os.close(w_go)
                if init_fd >= 0:
                    os.close(init_fd)
                pipes = [r_in, w_out, w_err, r_req, w_rep, io_t]
                if host is None:
                    code = _become_solution(r_go, pipes, self.cgroup_fds)
                else:
                    code = _become_host(host, pipes, self.cgroup_fds)
            except BaseException as exc:
                try:
                    os.write(2, f"solution set-up failed: {exc}\n".encode())
                except OSError:
                    pass
            finally:
                os._exit(code)
        for fd in (r_go, r_req, w_rep, w_out, w_err, r_in, io_t):
            os.close(fd)
        mine = [w_req, r_rep, r_out, r_err, w_in, io_m]
        if host is None:
            self.standby = (pid, os.pidfd_open(pid), w_go, mine, init_fd)
            return
        os.close(w_go)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (pidfd, -1)
        try:
            fds = struct.pack(f"{len(mine) + 1}i", *mine, pidfd)
            self.ctl.sendmsg([b"%d" % pid], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        finally:
            for fd in mine:
                os.close(fd)

    def fork_host(self) -> tuple[int, int]:
        """Fork a program host into a new pid namespace, as its pid 1: its pid here (0 in the
        child), and -1 for the init it has none of."""
        if self.make_init.unshare(isolate.CLONE_NEWPID) != 0:
            raise isolate.c_error("unshare")
        pid = -1
        try:
            pid = os.fork()
        finally:
            if pid:
                self.make_init.leave()
        return pid, -1

    def spawn(self, payload: bytes) -> None:
        """Hand the standby process its run (or fork one now); the next standby is forked once
        a process of the run has ended (``serve``)."""
        if self.standby is None:
            self.prepare()
        assert self.standby is not None
        pid, pidfd, go, mine, init_fd = self.standby
        self.standby = None
        self.children[pid] = (pidfd, init_fd)
        try:
            try:
                os.write(go, payload)  # a small request: one write into an empty pipe
            except OSError:
                pass  # it died waiting: the worker sees it end before it is ready
            os.close(go)
            fds = struct.pack(f"{len(mine) + 2}i", *mine, pidfd, init_fd)
            self.ctl.sendmsg([b"%d" % pid], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        finally:
            for fd in mine:
                os.close(fd)

    def end(self, pid: int, kill: bool) -> tuple[int, float]:
        """Reap (``kill``: kill first) a solution process; then its namespace either ends or
        hosts the next one. The solution's wait status and CPU ms.

        Every process of a run is in the worker's group: its solution process joins it before
        the answer's first line, and the answer cannot leave it (no capability, the groups'
        folders covered). So once the solution is reaped, an empty group means nothing of any
        run is left in its namespace but the init, and nothing can enter it (a fork needs a
        process there, a ``setns`` capabilities over the worker's user namespace): the init is
        kept as the ``spare``, under which ``fork`` puts the next solution process. Otherwise
        the init is killed now, whose end takes whatever the answer left there, and reaped by
        ``bury``. (A solution asked to be reaped that has not ended is killed, as its init's
        end would kill it.)"""
        pidfd, init_fd = self.children.pop(pid)
        try:
            done = None if kill else _reaped(pid)
            if done is None:
                if kill or init_fd >= 0:  # (a program host has no init: its end is awaited)
                    _kill(pidfd)
                done = os.wait4(pid, 0)
        finally:
            os.close(pidfd)
            if init_fd >= 0:  # (a program host has none: it is its namespace's init)
                if self.spare is None and self._no_run_left():
                    self.spare = init_fd
                else:
                    _kill(init_fd)
                    self.dying.append(init_fd)
        usage = done[2]
        return done[1], (usage.ru_utime + usage.ru_stime) * 1000.0

    def _no_run_left(self) -> bool:
        """Whether the worker's group holds no process (``end``); False where it cannot say."""
        if self.run_procs is None:
            return False
        fd, count = self.run_procs
        try:
            data = os.pread(fd, 32, 0)
        except OSError:
            return False
        return data.strip() == b"0" if count else data == b""

    def bury(self) -> None:
        """Reap the inits ``end`` killed, once the reply is sent (the worker need not wait for
        it), and before any other request is read: nothing of a run's namespace outlives the
        request that ended it. (Each init ends once every other process of its namespace is
        gone, the solution reaped by ``end`` included.)"""
        while self.dying:
            self.make_init.reap(self.dying.pop())

    def serve(self) -> None:
        """Answer the worker's requests until it closes the socket."""
        while data := self.ctl.recv(MSG_MAX):
            op = data[:1]
            try:
                if op == b"S":
                    self.spawn(data[1:])
                elif op == b"H":
                    self.prepare(host=data[1:])
                elif op == b"K" or op == b"R":
                    status, cpu = self.end(int(data[1:]), op == b"K")
                    self.ctl.send(b"%d %.3f" % (status, cpu))
                elif op == b"X":
                    for pid in list(self.children):
                        self.end(pid, kill=True)
                    self.ctl.send(b"ok")
            except (OSError, KeyError, ValueError) as exc:
                failed = b"E" + str(exc).encode(errors="replace")
                self.ctl.send(failed if op in (b"S", b"H") else b"-1 0")
            self.bury()
            if self.standby is None and op != b"S":
                # the next standby, forked once a process has ended: a run's own processes
                # do not wait for it, and the next run finds it ready
                self.prepare()


def _process_count(cgroup_procs: list[str]) -> tuple[int, bool] | None:
    """How ``Zygote.end`` reads whether the worker's group holds a process: a read-only
    descriptor, and whether it reads a count (v1's ``pids.current``, beside the pids group's
    ``cgroup.procs``) or a list (v2's ``cgroup.procs``, named ``&N``: the host's descriptor,
    opened again here for reading). v1's lists are not read: a list read again from one open
    file may be the one read before (the kernel keeps it a second). None where neither is."""
    for entry in cgroup_procs:
        try:
            if entry.startswith("&"):
                return os.open(f"/proc/self/fd/{entry[1:]}", os.O_RDONLY), False
            group = os.path.dirname(entry)  # (v1: ``/cg/<controller>/<slot>``, as policy binds)
            if os.path.basename(os.path.dirname(group)) == "pids":
                return os.open(os.path.join(group, "pids.current"), os.O_RDONLY), True
        except OSError:
            return None
    return None


def _reaped(pid: int) -> tuple[int, int, Any] | None:
    """``wait4``'s result for child ``pid`` if it has ended (reaped now), else None."""
    done = os.wait4(pid, os.WNOHANG)
    return done if done[0] else None


def _kill(pidfd: int) -> None:
    try:
        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
    except ProcessLookupError:
        pass


def _start_zygote(host_fds: tuple[int, ...], cgroup_procs: list[str]) -> tuple[int, _socket.socket]:
    """Fork the zygote (pid 1 of a pid namespace our user namespace owns); return its pid and
    its socket."""
    mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    isolate.unshare(isolate.CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the zygote's whole life
        try:
            mine.close()
            for fd in host_fds:  # the worker's channels to the host
                os.close(fd)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            isolate.set_process_name("dg-zygote")
            isolate.die_with_parent()
            zygote = Zygote(theirs, cgroup_procs)
            zygote.seal()
            zygote.prepare()
            zygote.serve()
        finally:
            os._exit(0)
    theirs.close()
    for entry in cgroup_procs:  # the zygote holds the v2 group's descriptor: the worker does not
        if entry.startswith("&"):
            os.close(int(entry[1:]))
    return pid, mine


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _end(zygote: _socket.socket, zygote_pid: int) -> None:
    """The pool closed this worker: end the zygote (its socket closed, it ends its runs and
    exits) and wait for it, whose end (pid 1 of its namespace) waits for every process below.
    So nothing of this worker's outlives it: its sandbox's processes are gone when the pool sees
    it exit. (A worker that does not exit in time is killed, and every process below it dies
    with it, all the same.)"""
    zygote.close()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(zygote_pid, 0)


def main(argv: list[str]) -> int:
    """``worker RESULT_FD MARKS_FD CPU_FD [CGROUP_PROCS...]``: serve jobs from stdin until it
    closes; events go to RESULT_FD, each run's in-play mark to MARKS_FD, time limits are judged
    on the CPU counter at CPU_FD (its slot's cgroup accounting, read-only; ``-``: none, the
    solution's own CPU clock), and each solution joins the groups whose ``cgroup.procs`` files
    are named."""
    result_fd, marks_fd = int(argv[0]), int(argv[1])
    cpu_fd = int(argv[2]) if argv[2] != "-" else None
    isolate.set_process_name("dg-worker")
    solution_host.default_signals()  # (before any fork: each process of the sandbox has them)
    # Started with LD_BIND_NOW=1: the dynamic linker bound every symbol of the interpreter at
    # start, once, so no forked solution binds (and copies the pages of) the ones it is first
    # to call (measured: 14 fewer page faults per run). Nothing started from here needs it.
    os.environ.pop("LD_BIND_NOW", None)
    # A user namespace of our own, as uid 65534: the capabilities to make a pid, mount, ipc and
    # uts namespace per solution. Each solution shares it without any capability, cannot make
    # another (seccomp), and cannot reach this process or the zygote (a pid
    # namespace of its own, /proc covered).
    isolate.new_user_namespace(os.getuid(), os.getgid(), SOLUTION_UID)
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    isolate.prepare()  # what each solution's set-up calls, made ready once here
    # The compiler's AST types are made at the first compile() of a process: here, once, and
    # not in every solution (measured: about 1 ms of CPU per solution on HumanEval).
    compile("pass", "<zygote>", "exec")
    gc.freeze()  # children share these objects: keep the collector from touching their pages
    os.makedirs(os.path.dirname(ANSWER_PATH), exist_ok=True)
    host_fds = (result_fd, marks_fd) if cpu_fd is None else (result_fd, marks_fd, cpu_fd)
    zygote_pid, zygote = _start_zygote(host_fds, argv[3:])
    isolate.drop_privileges()  # the worker runs verifiers: it needs no capability
    from . import worker_judge  # the verifier's side: never in the zygote's memory

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
            _end(zygote, zygote_pid)
            return 0
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            job = wire.loads(line.decode())
            worker_judge.run_job(job, result_fd, marks_fd, zygote, cpu_fd)
