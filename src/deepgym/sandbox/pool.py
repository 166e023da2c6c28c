"""The ``pool`` backend (the default): warm workers, each in its own sandbox, fork per run.

Each worker is started once in a bwrap of its own (``policy``'s ``worker`` role: all
namespaces, no network, no host environment, the system read-only) with the judge imported.
Per run it judges in-process (the verifier is trusted code) while its zygote (a process that
never held test data or an answer) hands over a solution process it forked ahead: pid 2 or
higher of a pid namespace under an init of ours (``deepgym.judge.init``; a namespace the last
run left empty hosts the next), in fresh mount and ipc namespaces, uid 65534 without
capabilities, in the worker's cgroups and the run's rlimits (``deepgym.judge.worker``). The
isolation matches ``strict`` test for test; what changes is that no interpreter and no bwrap
start per run.

Each worker has a cgroup per controller of its own (``cgroups.Slot``), reused run after run: the
host sets a run's limits before sending the job and reads its evidence when the run ends; its
judge reads the slot's CPU accounting (a descriptor passed at its start) to judge time limits on
the answer's CPU time. Workers start lazily, are handed out first come first served (but for a
worker that ran the run's environment lately), are replaced when they die or when a run on them
is cancelled, and stop at ``close`` or exit. A worker that dies takes its run with it as a run
without a verdict (the client retries it if the answer was not yet in play).

The pool has a base size (two workers per core it may run on) and grows above it on demand
(``sizing``): when runs have waited ``GROW_AFTER_S`` for a worker while workers are held by runs
that long (an endless loop, or an answer that sleeps, holds its worker for its whole limit), a
worker is added for each such run, up to ``max_workers``, while the cores are not kept busy.
Time limits are judged on CPU time, so runs above the core count share the cores without
anyone's verdict changing, as long as each gets the CPU time of its limit within its backstop.
An added worker idle for ``IDLE_S`` is stopped, down to the base size. A run whose job says when
it must start by (``Job.start_by``) and that gets no worker by then never starts: no verdict
(``base.not_started``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from deepgym import languages
from deepgym.exceptions import ConfigError, SandboxUnavailableError
from deepgym.judge.codes import ANSWER_PATH, REPORT_MAX_BYTES
from deepgym.runtimes import RuntimeStore
from deepgym.sandbox import cgroups, policy, sizing
from deepgym.sandbox.base import Job, RawRun, not_started
from deepgym.sandbox.evidence import apply_evidence, mechanisms, parse_event, read_run
from deepgym.sandbox.fresh import FreshRuns
from deepgym.sandbox.host import check_bwrap, compile_judge, host_params
from deepgym.sandbox.image_root import refuse_image
from deepgym.sandbox.programs import PROGRAMS, Program, ProgramCache
from deepgym.sandbox.spec import job_spec, rlimits, solution_env, wall_limit, work_bytes
from deepgym.sandbox.strict import BwrapLaunch
from deepgym.sandbox.workspace import Workspace

STDERR_KEEP = 8192
EXIT_WAIT_S = 2.0
READY_TIMEOUT_S = 30.0
GROW_AFTER_S = 0.25
"""How long runs wait for a worker, with workers held that long by their runs, before the pool
adds workers (``sizing.grow_by``). Short runs free their workers within milliseconds, so a queue
of them never grows the pool; a run that holds its worker for seconds (a long limit, an endless
loop, a sleep) does."""
IDLE_S = 10.0
"""How long a worker above the base size stays idle before it is stopped."""


def _fds(fd: int | None) -> tuple[int, ...]:
    return () if fd is None else (fd,)


class _Worker:
    """One warm worker process and its pipes."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        events: asyncio.StreamReader,
        transport: asyncio.BaseTransport,
        slot: cgroups.Slot,
        marks: int,
    ) -> None:
        self.proc = proc
        self.slot = slot
        self.marks = marks
        """The read end of the worker's in-play marks: drained when a run ends, never awaited."""
        self.events = events
        self.transport = transport
        self.rss_kb = 0
        self.stderr = bytearray()
        self.healthy = True
        self.busy_since: float | None = None
        """When its current run took it (None: idle)."""
        self._drain = asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        streams = [s for s in (self.proc.stdout, self.proc.stderr) if s is not None]

        async def pump(stream: asyncio.StreamReader) -> None:
            while chunk := await stream.read(65536):
                self.stderr += chunk
                del self.stderr[:-STDERR_KEEP]

        await asyncio.gather(*(pump(s) for s in streams))

    async def ready(self) -> None:
        line = await asyncio.wait_for(self.events.readline(), READY_TIMEOUT_S)
        if not line:
            await self.proc.wait()
            raise SandboxUnavailableError(
                "a pool worker could not start: "
                + (bytes(self.stderr).decode("utf-8", "replace").strip() or "no output")
            )
        msg = json.loads(line)
        self.rss_kb = int(msg.get("rss_kb", 0))

    async def execute(
        self, job: dict[str, Any], wall: float
    ) -> tuple[list[dict[str, Any]], int | None, bool, bool]:
        """Send one job; return its events, the verifier's exit code, whether the wall limit
        fired, and whether the worker died (killed: the verifier's code is then None).

        The verifier runs in the worker: one that exits the process (``os._exit``) ends the
        worker with that status, which is then the verifier's exit code, as in ``strict``."""
        assert self.proc.stdin is not None
        self.stderr.clear()
        self.proc.stdin.write(json.dumps(job).encode() + b"\n")
        events: list[dict[str, Any]] = []

        async def read() -> int | None:
            await self.proc.stdin.drain()  # type: ignore[union-attr]
            while True:
                try:
                    line = await self.events.readline()
                except ValueError:  # a line past the reader's limit: dropped, and read on
                    continue
                if not line:
                    return None
                if (msg := parse_event(line)) is None:
                    continue
                if msg.get("event") != "done":
                    events.append(msg)
                    continue
                with contextlib.suppress(TypeError, ValueError, OverflowError):
                    return int(msg.get("exit_code", 1))  # else not the judge's: read on

        try:
            async with asyncio.timeout(wall):
                code = await read()
        except TimeoutError:
            self.kill()
            return self._marked(events), None, True, False
        except asyncio.CancelledError:  # the job may still be running: never reuse this worker
            self.kill()
            raise
        except (ConnectionError, OSError):
            code = None
        if code is not None:
            return self._marked(events), code, False, False
        self.healthy = False
        try:
            status = await asyncio.wait_for(self.proc.wait(), EXIT_WAIT_S)
        except TimeoutError:
            status = None
        self.kill()
        if status is not None and 0 <= status < 128:  # it exited by itself: the verifier did
            return self._marked(events), status, False, False
        return self._marked(events), None, False, True

    def _marked(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``events`` and the run's in-play mark, if it had one (written before the answer's
        first line ran, so it is there whatever happened after)."""
        data = b""
        with contextlib.suppress(BlockingIOError, OSError):
            while chunk := os.read(self.marks, 65536):
                data += chunk
        for line in data.splitlines():
            if (msg := parse_event(line)) is not None:
                events.append(msg)
        return events

    def kill(self) -> None:
        self.healthy = False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 2.0)
            except TimeoutError:
                self.kill()
                await self.proc.wait()
        self.transport.close()
        self._drain.cancel()
        await asyncio.gather(self._drain, return_exceptions=True)  # a cancel of ours goes through
        self.slot.close()
        with contextlib.suppress(OSError):
            os.close(self.marks)


class _Waiter:
    __slots__ = ("future", "key", "passed")

    def __init__(self, future: asyncio.Future[_Worker], key: str | None) -> None:
        self.future = future
        self.key = key
        self.passed = 0
        """How many times a worker went to a waiter behind this one."""


class _Idle:
    """Idle workers, handed out first come, first served, except where a worker ran the same
    environment lately.

    ``asyncio.Queue`` lets a task that just put a worker back take it again before the waiter it
    woke gets to run, so one busy caller can starve the rest; here a released worker goes
    straight to a waiter. That is the longest waiter, unless one of the next few is for an
    environment this worker ran lately and the longest has been passed over fewer than
    ``patience`` times: a worker keeps what it built for an environment (its verifier's
    ``process_cache``, such as HumanEval's compiled tests, which are most of a verifier's
    work), and a run that finds it warm does less. A free worker is likewise taken for the run
    whose environment it ran lately, if any. ``affinity=False``: strictly first come, first
    served.
    """

    WINDOW = 16
    """How far down the waiters a released worker looks for one of its environments."""
    RECENT = 512
    """How many environments a worker is remembered to have run (the oldest forgotten)."""

    def __init__(self, patience: int = 4, affinity: bool = True) -> None:
        self._free: collections.deque[_Worker] = collections.deque()
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._recent: dict[_Worker, dict[str, None]] = {}
        self._since: dict[_Worker, float] = {}
        """When each free worker became free."""
        self.patience = patience
        self.affinity = affinity

    def _hand(self, worker: _Worker, key: str | None) -> _Worker:
        if key is not None and self.affinity:
            recent = self._recent.setdefault(worker, {})
            recent.pop(key, None)
            recent[key] = None
            if len(recent) > self.RECENT:
                del recent[next(iter(recent))]
        return worker

    def forget(self, worker: _Worker) -> None:
        """A worker that left the pool."""
        self._recent.pop(worker, None)
        self._since.pop(worker, None)

    def waiting(self) -> int:
        """How many runs wait for a worker."""
        return sum(1 for w in self._waiters if not w.future.done())

    def has_free(self) -> bool:
        """Whether ``get`` would return at once."""
        return bool(self._free) and not self._waiters

    def idle_since(self) -> list[float]:
        """When each free worker became free."""
        return [self._since.get(w, 0.0) for w in self._free]

    def take_idle(self, since: float) -> _Worker | None:
        """A free worker idle since before ``since`` (the longest idle first), taken out."""
        for worker in self._free:
            if self._since.get(worker, 0.0) <= since:
                self._free.remove(worker)
                self._since.pop(worker, None)
                return worker
        return None

    def put_nowait(self, worker: _Worker) -> None:
        waiters = self._waiters
        while waiters and waiters[0].future.done():  # cancelled while waiting
            waiters.popleft()
        if not waiters:
            self._since[worker] = time.monotonic()
            self._free.append(worker)
            return
        pick = 0
        recent = self._recent.get(worker, {})  # (empty without affinity: nothing recorded)
        if waiters[0].passed < self.patience and waiters[0].key not in recent:
            for i, waiter in enumerate(itertools.islice(waiters, 1, self.WINDOW), 1):
                if waiter.key in recent and not waiter.future.done():
                    pick = i
                    break
        chosen = waiters[pick]
        del waiters[pick]
        for i in range(pick):
            waiters[i].passed += 1
        chosen.future.set_result(self._hand(worker, chosen.key))

    async def get(self, key: str | None = None) -> _Worker:
        """A worker for a run of environment ``key`` (None: any)."""
        if self._free and not self._waiters:
            for worker in self._free:
                if key in self._recent.get(worker, ()):
                    self._free.remove(worker)
                    return self._hand(worker, key)
            return self._hand(self._free.popleft(), key)
        waiter = _Waiter(asyncio.get_running_loop().create_future(), key)
        self._waiters.append(waiter)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():  # handed over as we
                self.put_nowait(waiter.future.result())  # were cancelled: pass it on
            raise


_LATE = "no pool worker was free before the time the run had to start by (its client's deadline)"


class PoolBackend:
    """Warm sandboxed workers that fork per run: a few milliseconds of overhead per answer."""

    name = "pool"
    isolation = "pool"

    def __init__(
        self, workers: int | None = None, affinity: bool = True, max_workers: int | None = None
    ) -> None:
        size = workers if workers is not None else sizing.base_size()
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError(f"workers must be a positive int, got {workers!r}")
        if max_workers is None:
            most = sizing.default_max_workers(size, memory=cgroups.service_memory_bytes())
        elif isinstance(max_workers, bool) or not isinstance(max_workers, int):
            raise ConfigError(f"max_workers must be an int, got {max_workers!r}")
        elif max_workers < size:
            raise ConfigError(f"max_workers ({max_workers}) must be at least workers ({size})")
        else:
            most = max_workers
        compile_judge()
        check_bwrap()
        self._runtimes = RuntimeStore()
        """Where the answers' runtimes are found, or built at their first use: every worker
        mounts the folder (read-only), so one built after a worker started reaches it too."""
        try:
            self._runtimes.root.mkdir(parents=True, exist_ok=True)
            self._runtimes_mounted = True
        except OSError:  # a run that names a runtime is refused (``_runtime_of``)
            self._runtimes_mounted = False
        self._host = host_params()
        """The host's facts every worker's sandbox is built from, read once."""
        self._workspace = Workspace()
        self.programs = ProgramCache(
            self._workspace,
            BwrapLaunch(self._host).solution_argv,
            isolation="pool",
            through_bwrap=True,
        )
        """Compiled languages' programs, built in a ``solution`` sandbox like strict's."""
        self.size = size
        """The base size: workers started at first use, and kept."""
        self.max_workers = most
        """The most workers the pool grows to while runs wait (``GROW_AFTER_S``)."""
        self.affinity = affinity
        """Hand a run to a worker that ran its environment lately (``_Idle``); False: strictly
        first come, first served (``benchmarks/affinity.py`` compares the two)."""
        self._idle: _Idle | None = None
        self._fresh: FreshRuns | None = None
        """Where a run whose runtime needs its own ``/proc`` runs (``_run_fresh``)."""
        self._workers: list[_Worker] = []
        self._starting: asyncio.Task[None] | None = None
        self._replacing: set[asyncio.Task[None]] = set()
        self._growing: set[asyncio.Task[None]] = set()
        self._grow_timer: asyncio.TimerHandle | None = None
        self._cpu_at: tuple[int, int] | None = None
        """The cores' busy and total ticks when runs began to wait (``cores_busy``)."""
        self._shrink_timer: asyncio.TimerHandle | None = None
        self._cg_parents = {c: cgroups.v1_parent(c) for c in cgroups.v1_controllers()}
        """The v1 groups' folders, bound into each worker (a v2 slot is joined by descriptor)."""
        for parent in self._cg_parents.values():
            os.makedirs(parent, exist_ok=True)

    # -- workers --------------------------------------------------------------------------
    def _worker_argv(self, result_fd: int, marks_fd: int, slot: cgroups.Slot) -> list[str]:
        """A ``worker`` sandbox (``policy``) whose solutions join ``slot``'s groups."""
        mounted = policy.POOL_CGROUP
        if slot.v2 is None:
            procs = [
                f"{mounted.format(c)}/{Path(d).name}/cgroup.procs" for c, d in slot.dirs.items()
            ]
        else:
            procs = [f"&{fd}" for fd in slot.join_fds()]
        cpu = slot.cpu_fd()  # its runs' CPU counter, read-only: the judge's time limits read it
        counter = "-" if cpu is None else str(cpu)
        params = dataclasses.replace(
            self._host,
            command=("worker", str(result_fd), str(marks_fd), counter, *procs),
            # The worker's environment is every solution's: a solution inherits it from the
            # zygote. LD_BIND_NOW is for the worker's start: it takes it out.
            env={**solution_env("/work"), "LD_BIND_NOW": "1"},
            envs_dir=str(self._workspace.envs),
            cgroups=self._cg_parents,
            runtimes_dir=str(self._runtimes.root) if self._runtimes_mounted else "",
        )
        return policy.argv(policy.WORKER, params)

    async def _spawn_worker(self) -> _Worker:
        slot = cgroups.Slot(cgroups.owned_name("pool", self._workspace.owner))
        r_fd, w_fd = os.pipe()
        m_r, m_w = os.pipe()
        os.set_blocking(m_r, False)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._worker_argv(w_fd, m_w, slot),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(w_fd, m_w, *slot.join_fds(), *_fds(slot.cpu_fd())),
                start_new_session=True,
            )
        except BaseException:
            slot.close()
            os.close(r_fd)
            os.close(m_r)
            raise
        finally:
            os.close(w_fd)
            os.close(m_w)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=REPORT_MAX_BYTES)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r_fd, "rb", buffering=0)
        )
        worker = _Worker(proc, reader, transport, slot, m_r)
        try:
            await worker.ready()
        except BaseException:
            await worker.stop()
            raise
        self._workers.append(worker)
        return worker

    async def _start(self) -> None:
        self._idle = _Idle(patience=self.size, affinity=self.affinity)
        workers = await asyncio.gather(*(self._spawn_worker() for _ in range(self.size)))
        for w in workers:
            self._idle.put_nowait(w)

    async def _ensure_started(self) -> _Idle:
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)
        assert self._idle is not None
        return self._idle

    async def _release(self, worker: _Worker) -> None:
        assert self._idle is not None
        worker.busy_since = None
        if worker.healthy and worker.proc.returncode is None:
            self._idle.put_nowait(worker)
            if len(self._workers) > self.size:
                self._arm_shrink()
            return
        self._workers.remove(worker)
        self._idle.forget(worker)
        # Replace it in the background: a cancelled run must not cost the pool a worker. One
        # above the base size is replaced only while runs wait (they grow the pool again).
        task = asyncio.ensure_future(self._replace(worker))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _replace(self, worker: _Worker) -> None:
        await worker.stop()
        idle = self._idle
        if idle is not None and len(self._workers) >= self.size and not idle.waiting():
            return
        fresh = await self._spawn_worker()
        if self._idle is None:  # closed meanwhile
            await fresh.stop()
            self._workers.remove(fresh)
            return
        self._idle.put_nowait(fresh)

    # -- growing and shrinking ------------------------------------------------------------
    async def _take(self, idle: _Idle, key: str, start_by: float | None) -> _Worker | None:
        """A worker for a run of environment ``key``, or None where none came by ``start_by``.
        While the run waits, the pool grows (``_grow``)."""
        if start_by is not None and time.monotonic() >= start_by:
            return None
        if idle.has_free():
            return await idle.get(key)
        self._arm_grow()
        if start_by is None:
            return await idle.get(key)
        try:
            async with asyncio.timeout(max(start_by - time.monotonic(), 0.0)):
                return await idle.get(key)
        except TimeoutError:  # (``get`` passes on a worker handed over as it was cancelled)
            return None

    def _arm_grow(self) -> None:
        if self._grow_timer is None and self._idle is not None:
            if self._cpu_at is None:
                self._cpu_at = sizing.cores_busy()
            loop = asyncio.get_running_loop()
            self._grow_timer = loop.call_later(GROW_AFTER_S, self._grow)

    def _grow(self) -> None:
        """Add workers for the runs that wait (``grow_by``); check again while runs wait."""
        self._grow_timer = None
        idle = self._idle
        now_cpu = sizing.cores_busy()
        busy = sizing.busy_share(self._cpu_at, now_cpu)
        self._cpu_at = now_cpu
        if idle is None or not (waiting := idle.waiting()):
            self._cpu_at = None
            return
        since = time.monotonic() - GROW_AFTER_S
        held = sum(1 for w in self._workers if w.busy_since is not None and w.busy_since <= since)
        room = self.max_workers - len(self._workers)
        for _ in range(sizing.grow_by(waiting, held, len(self._growing), room, busy)):
            task = asyncio.ensure_future(self._add_worker())
            self._growing.add(task)
            task.add_done_callback(self._growing.discard)
        self._arm_grow()

    async def _add_worker(self) -> None:
        try:
            worker = await self._spawn_worker()
        except (OSError, SandboxUnavailableError, TimeoutError):
            return  # the runs wait for the others; the next check tries again
        if self._idle is None:  # closed meanwhile
            await worker.stop()
            self._workers.remove(worker)
            return
        self._idle.put_nowait(worker)
        if len(self._workers) > self.size:
            self._arm_shrink()

    def _arm_shrink(self, delay: float = IDLE_S) -> None:
        if self._shrink_timer is None:
            loop = asyncio.get_running_loop()
            self._shrink_timer = loop.call_later(delay, self._shrink)

    def _shrink(self) -> None:
        """Stop workers above the base size that have been idle ``IDLE_S``; check again, while
        the pool is above it, when the next idle one will have been."""
        self._shrink_timer = None
        idle = self._idle
        if idle is None:
            return
        now = time.monotonic()
        while len(self._workers) > self.size and (worker := idle.take_idle(now - IDLE_S)):
            self._workers.remove(worker)
            idle.forget(worker)
            task = asyncio.ensure_future(worker.stop())
            self._replacing.add(task)
            task.add_done_callback(self._replacing.discard)
        if len(self._workers) > self.size:
            soonest = min(idle.idle_since(), default=now)
            self._arm_shrink(max(soonest + IDLE_S - now, GROW_AFTER_S))

    def stats(self) -> dict[str, Any]:
        """Worker count (and the base size and most), and the memory each idle worker holds
        (RSS, KiB, measured at start)."""
        return {
            "workers": len(self._workers),
            "base_workers": self.size,
            "max_workers": self.max_workers,
            "rss_kb": [w.rss_kb for w in self._workers],
        }

    # -- runs -----------------------------------------------------------------------------
    async def run(self, job: Job) -> RawRun:
        """Run ``job`` on the next free worker (one that ran its environment lately first). An
        answer in a compiled language is built first (``programs``), once per source. A task
        on an image is refused (``image_root.refuse_image``): the workers run on the host's."""
        refuse_image(job.env, self.name)
        if job.env.language != "python" and languages.LANGUAGES[job.env.language].proc:
            return await self._run_fresh(job)
        runtime = await self._runtime_of(job)
        with self._workspace.hold(job.env):
            return await self.programs.run(job, lambda program: self._run(job, program, runtime))

    async def _run_fresh(self, job: Job) -> RawRun:
        """A run whose program's runtime needs a ``/proc`` of its own (``Language.proc``:
        mono, Racket), which a worker's forked solution cannot mount (the kernel mounts a new
        proc only beside a fully visible one, and the worker's has bwrap's covers): in a fresh
        sandbox as ``strict`` runs it, its result's ``isolation`` says so. Its program comes
        from this pool's cache."""
        if self._fresh is None:
            self._fresh = FreshRuns(BwrapLaunch(self._host))
        fresh = self._fresh
        with fresh.workspace.hold(job.env):
            return await self.programs.run(job, lambda program: fresh.run_built(job, program))

    async def _runtime_of(self, job: Job) -> dict[str, Any] | None:
        """What a solution process needs of the job's runtime (built first where it is not
        yet): its folder under the workers' mount of every runtime, and its variables; None
        for the standard library's."""
        built = await self._runtimes.ready(job.env.runtime)
        if built is None:
            return None
        if not self._runtimes_mounted:
            raise SandboxUnavailableError(
                f"runtime {job.env.runtime}: the folder runtimes are kept in "
                f"({self._runtimes.root}) could not be made when the pool started; set "
                "DEEPGYM_RUNTIMES to a writable folder"
            )
        return {"dir": built.path.name, "env": built.solution_env()}

    async def _run(
        self, job: Job, program: Program | None, runtime: dict[str, Any] | None
    ) -> RawRun:
        t0 = time.monotonic()
        idle = await self._ensure_started()
        env_dir = self._workspace.env_dir(job.env)
        t_wait = time.monotonic()
        worker = await self._take(idle, env_dir.name, job.start_by)
        queue_ms = (time.monotonic() - t_wait) * 1000.0
        if worker is None:
            raw = not_started(self.isolation, _LATE)
            raw.queue_ms = raw.start_ms = queue_ms
            raw.total_ms = (time.monotonic() - t0) * 1000.0
            return raw
        worker.busy_since = time.monotonic()
        slot = worker.slot
        try:
            # a built program's cases run under a program host of ours, in the run's groups:
            # one process more than the answer's own (``judge.program_host``)
            hosted = 0 if program is None else 1
            slot.begin(job.env.memory_mb, job.env.max_processes + hosted)
            spec = {
                **job_spec(job, f"/judge/envs/{env_dir.name}", ANSWER_PATH),
                # the worker writes it to a file of its own (a built program: copies it)
                **(
                    {"answer": job.answer}
                    if program is None
                    else {"program_path": f"/judge/envs/{PROGRAMS}/{program.key}"}
                ),
                "limits_json": json.dumps(rlimits(job, slot)),
                "work_bytes": work_bytes(job),
                "runtime": runtime,
            }
            start_ms = (time.monotonic() - t0) * 1000.0
            events, code, timed_out, died = await worker.execute(spec, wall_limit(job))
        finally:
            err = bytes(worker.stderr)
            limit, peak = slot.end()
            await self._release(worker)
        raw = read_run(events, -signal.SIGKILL if died else code, b"", err, timed_out, "pool")
        if died:
            raw.outcome = dataclasses.replace(
                raw.outcome, worker_died=True, detail="the pool worker died during the run"
            )
        raw.start_ms = start_ms
        raw.queue_ms = queue_ms
        return apply_evidence(raw, (limit, peak, mechanisms(slot, "tmpfs")), t0)

    async def close(self) -> None:
        """Stop every worker and remove what the pool made."""
        await self.programs.close()
        if self._starting is not None:
            with contextlib.suppress(Exception):
                await self._starting
        for timer in (self._grow_timer, self._shrink_timer):
            if timer is not None:
                timer.cancel()
        self._grow_timer = self._shrink_timer = None
        if self._growing:
            await asyncio.gather(*self._growing, return_exceptions=True)
        if self._replacing:
            await asyncio.gather(*self._replacing, return_exceptions=True)
        await asyncio.gather(*(w.stop() for w in self._workers), return_exceptions=True)
        self._workers.clear()
        self._starting = None
        self._idle = None
        cgroups.retry_pending(final=True)
        self._workspace.close()
        if self._fresh is not None:
            self._fresh.workspace.close()
            self._fresh = None
