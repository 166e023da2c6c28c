"""One run as fresh processes: the flow ``strict`` and ``unsafe`` share.

Per run: stage the environment, write the answer and the job to a folder of the run's own, make
the run's cgroups, start the verifier process and (for a function or patch task) the first
solution process beside it, serve the verifier's requests for solution processes
(``served.SolutionServer``), read its events on a private pipe, and kill everything at the wall
limit. How each process is started (in a bwrap sandbox, or bare) is the backend's ``Launch``;
nothing here branches on the isolation.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any, Protocol

from deepgym.judge.codes import REPORT_MAX_BYTES
from deepgym.runtimes import Built, RuntimeStore
from deepgym.sandbox import cgroups
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.evidence import apply_evidence, parse_event, read_run, take_evidence
from deepgym.sandbox.policy import BASE_ENV
from deepgym.sandbox.programs import Program, ProgramCache
from deepgym.sandbox.served import SolutionServer
from deepgym.sandbox.spawn import end_process, exit_signal, kill_tree, start_process
from deepgym.sandbox.spec import job_spec, wall_limit
from deepgym.sandbox.workspace import Workspace

_AHEAD_MODE = {"function": "module", "patch": "repo"}
"""The kinds whose first solution process is started ahead, and in which mode."""
KILL_WAIT_S = 5.0
OUTPUT_EXCERPT = 8192


class Launch(Protocol):
    """How a fresh-process backend starts a run's processes, and what it reports of them."""

    isolation: str
    """Reported in every result (``RawRun.isolation``)."""
    work_dir: str
    """What holds a solution's work dir (``tmpfs``, or ``none``): reported as evidence."""
    through_bwrap: bool
    """Processes run under bwrap, which reports a child's signal as 128 + n."""
    verifier_out_of_reach: bool
    """No answer can signal the verifier's process (``strict``: the answer is in other pid and
    user namespaces; the attack suite's "killing the parent" checks it), so a stop signal that
    ended the verifier came from outside (``deepgym.verdict.killed_from_outside``)."""

    def job_paths(self, run_dir: Path, env_dir: Path) -> tuple[str, str]:
        """The environment's folder and the answer's file, as the verifier sees them."""
        ...

    def verifier_argv(self, job: Job, run_dir: Path, env_dir: Path, result_fd: int) -> list[str]:
        """The verifier process's command line (its events go to ``result_fd``)."""
        ...

    def solution_argv(
        self,
        job: Job,
        run_dir: Path,
        group: cgroups.RunCgroup,
        mode: str,
        args: list[str],
        headers: Path | None = None,
        runtime: Built | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """A solution process's command line and whole environment (a build's: given the
        folder of a precompiled header it may use, ``sandbox.headers``; ``runtime``: the
        answer's, built, where its environment names one)."""
        ...


class FreshRuns:
    """Runs each job as fresh processes started by ``launch``, in a ``Workspace`` of its own."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.runtimes = RuntimeStore()
        """Where the answers' runtimes are found, or built at their first use."""
        self.workspace = Workspace()
        self.programs = ProgramCache(
            self.workspace,
            launch.solution_argv,
            isolation=launch.isolation,
            through_bwrap=launch.through_bwrap,
        )

    async def run(self, job: Job) -> RawRun:
        """Run one job; the result carries the run's evidence and ``launch``'s isolation. An
        answer in a compiled language is built first (``programs``), once per source; a
        runtime, once (``RuntimeStore.ready``)."""
        runtime = await self.runtimes.ready(job.env.runtime)
        with self.workspace.hold(job.env):
            return await self.programs.run(job, lambda program: self._run(job, program, runtime))

    async def run_built(self, job: Job, program: Program | None) -> RawRun:
        """Run ``job`` with its ``program`` built elsewhere (another backend's cache), its
        environment held in this workspace by the caller. (A program's run: no Python runtime.)"""
        return await self._run(job, program, None)

    async def _run(self, job: Job, program: Program | None, runtime: Built | None) -> RawRun:
        launch = self.launch
        t0 = time.monotonic()
        env_dir = self.workspace.env_dir(job.env)
        run_dir = self.workspace.run_dir()
        group = cgroups.create(job.env.memory_mb, job.env.max_processes, owner=self.workspace.owner)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = SolutionServer(
            mine,
            lambda mode, args: launch.solution_argv(
                job, run_dir, group, mode, args, runtime=runtime
            ),
            through_bwrap=launch.through_bwrap,
            pass_fds=group.join_fds(),
        )
        try:
            (run_dir / "answer").mkdir()
            answer = run_dir / "answer" / "solution.py"
            if program is None:
                answer.write_text(job.answer)
            else:  # the built program, which each case runs (``judge.build``'s exec mode)
                shutil.copyfile(program.path, answer)
                answer.chmod(0o755)
            env_in, answer_path = launch.job_paths(run_dir, env_dir)
            cpu_fd = group.cpu_fd()  # the run's CPU counter: the judge's time limits read it
            spec = {**job_spec(job, env_in, answer_path), "ctl_fd": theirs.fileno()}
            spec["cpu_fd"] = cpu_fd
            (run_dir / "job.json").write_text(json.dumps(spec))
            r_fd, w_fd = os.pipe()
            try:
                argv = launch.verifier_argv(job, run_dir, env_dir, w_fd)
                verifier = asyncio.ensure_future(
                    start_process(
                        *argv,
                        stdin=asyncio.subprocess.DEVNULL,
                        stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.PIPE,
                        pass_fds=(w_fd, theirs.fileno(), *([] if cpu_fd is None else [cpu_fd])),
                        start_new_session=True,
                        cwd=str(run_dir),
                        env=BASE_ENV,  # bwrap's own init keeps its environ: no host secrets in it
                    )
                )
                ahead = _AHEAD_MODE.get(job.env.kind)
                try:
                    if ahead is None:
                        proc = await verifier
                    else:  # the answer's interpreter starts beside the verifier's
                        proc, _ = await asyncio.gather(verifier, server.start_ahead(ahead))
                except BaseException:  # cancelled, or one failed to start: end what did start
                    await _end_started(verifier)
                    await server.close()
                    os.close(r_fd)
                    raise
            finally:
                os.close(w_fd)
                theirs.close()
            start_ms = (time.monotonic() - t0) * 1000.0
            serving = asyncio.ensure_future(server.serve())
            try:
                raw = await self._collect(job, proc, r_fd)
            except BaseException:  # cancelled, or failed, at any point: the sandbox ends too
                await end_process(proc)
                raise
            finally:
                serving.cancel()
                # gather, not a suppressed await: a cancel of this run must still go through
                await asyncio.gather(serving, return_exceptions=True)
                await server.close()
            raw.start_ms = start_ms
        finally:
            evidence = take_evidence(group, launch.work_dir)
            shutil.rmtree(run_dir, ignore_errors=True)
        return apply_evidence(raw, evidence, t0)

    async def _collect(self, job: Job, proc: asyncio.subprocess.Process, r_fd: int) -> RawRun:
        got = await collect(proc, r_fd, wall_limit(job))
        raw = read_run(
            got.events, proc.returncode, got.out, got.err, got.timed_out, self.launch.isolation
        )
        raw.outcome = dataclasses.replace(
            raw.outcome,
            verifier_signal=exit_signal(proc.returncode, self.launch.through_bwrap),
            verifier_out_of_reach=self.launch.verifier_out_of_reach,
        )
        return raw

    async def close(self) -> None:
        """Remove what the runs left: cgroups still busy at their end, and the workspace."""
        await self.programs.close()
        cgroups.retry_pending(final=True)
        self.workspace.close()


@dataclasses.dataclass
class Collected:
    """What a verifier's process left when it ended: its events, the head of its output, and
    whether the wall limit ended it."""

    events: list[dict[str, Any]]
    out: bytes
    err: bytes
    timed_out: bool


async def collect(proc: asyncio.subprocess.Process, r_fd: int, wall: float) -> Collected:
    """Wait for the verifier's process ``proc`` to end, at most ``wall`` seconds (then its tree
    is killed), reading its events (JSON lines) from ``r_fd``, which this closes, and its stdout
    and stderr, of which the first ``OUTPUT_EXCERPT`` bytes are kept: the host's memory never
    depends on what the process writes. Cancelled, it ends the process and reaps it first.
    Every fresh run's verifier and a session's verifier are read this way."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=REPORT_MAX_BYTES)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r_fd, "rb", buffering=0)
    )
    events: list[dict[str, Any]] = []

    async def read_events() -> None:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a line past the reader's limit: dropped, and read on
                continue
            if not line:
                return
            if (msg := parse_event(line)) is not None:
                events.append(msg)

    async def drain(stream: asyncio.StreamReader | None) -> bytes:
        if stream is None:
            return b""
        head = b""
        while chunk := await stream.read(65536):
            if len(head) < OUTPUT_EXCERPT:
                head += chunk[: OUTPUT_EXCERPT - len(head)]
        return head

    work = asyncio.gather(read_events(), drain(proc.stdout), drain(proc.stderr), proc.wait())
    timed_out = False
    try:
        _, out, err, _ = await asyncio.wait_for(asyncio.shield(work), wall)
    except TimeoutError:
        timed_out = True
        kill_tree(proc.pid)
        try:  # the pipes close when the sandbox's processes are gone; never wait forever
            _, out, err, _ = await asyncio.wait_for(work, KILL_WAIT_S)
        except TimeoutError:
            out, err = b"", b"the sandbox did not end after it was killed"
            await proc.wait()
    except asyncio.CancelledError:
        # The run was cancelled (Ctrl-C, a drained service): end the sandbox and reap it
        # before going on, so nothing of it outlives the call.
        await end_process(proc)
        work.cancel()
        await asyncio.wait([work])  # its outcome is of no interest now: mark it seen
        if not work.cancelled():
            work.exception()
        raise
    finally:
        transport.close()
    return Collected(events, out, err, timed_out)


async def _end_started(verifier: asyncio.Task[asyncio.subprocess.Process]) -> None:
    """End the verifier's sandbox if it started (a start still under way ends what it started
    itself, once cancelled: ``start_process``)."""
    if not verifier.done():
        if not verifier.cancelling():  # a second cancel would cut its clean-up short
            verifier.cancel()
        await asyncio.gather(verifier, return_exceptions=True)
        return
    if not verifier.cancelled() and verifier.exception() is None:
        await end_process(verifier.result())
