"""Local process backends: ``strict`` (a fresh bwrap per run) and ``unsafe`` (no isolation).

``strict``: the verifier process runs in a fresh bwrap (all namespaces, no network, no host
environment, the system's programs read-only, its environment and the answer mounted read-only,
a private /tmp). At first use it starts the solution in a nested bwrap of its own (fresh user, pid,
mount, net, ipc and uts namespaces, uid 65534, no capabilities, no further user namespaces, a
size-capped tmpfs work dir holding only the answer, no /proc of the verifier) inside the run's
cgroups. When the outer sandbox ends, its pid namespace takes every process with it, daemons
included. ``unsafe`` runs the same judge with no isolation at all: for debugging only, and named
so in every result.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError
from deepgym.models import Environment
from deepgym.sandbox import cgroups
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.host import (
    JUDGE_DIR,
    SANDBOX_PYTHON,
    check_bwrap,
    compile_judge,
    find_bwrap,
    system_binds,
)
from deepgym.sandbox.served import SolutionServer
from deepgym.verdict import Outcome

# The kinds whose first solution process is started ahead, and in which mode.
_AHEAD_MODE = {"function": "module", "patch": "repo"}
START_GRACE_S = 2.0
KILL_WAIT_S = 5.0
OUTPUT_EXCERPT = 8192
SOLUTION_UID = 65534
VERIFIER_UID = 1000
IN_JUDGE = "/opt/deepgym/deepgym_judge"
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _env_key(env: Environment) -> str:
    blob = json.dumps(
        [
            env.name,
            env.kind,
            env.test_cases,
            env.verifier_code,
            str(env.verifier_path) if env.verifier_path else None,
            str(env.repo_path) if env.repo_path else None,
        ],
        sort_keys=True,
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def job_spec(job: Job, env_in: str, answer_path: str) -> dict[str, Any]:
    """What the judge needs of a job, with paths as its sandbox sees them (``env_in``: the
    environment's folder; ``answer_path``: the answer's file, for the in-play audit)."""
    env = job.env
    custom = env.verifier_code is not None or env.verifier_path is not None
    return {
        "kind": env.kind,
        "entry_point": env.entry_point,
        "compare": env.compare,
        "timeout": job.timeout,
        "case_timeout": job.case_timeout,
        "test_cases_path": f"{env_in}/test_cases.json" if env.test_cases is not None else None,
        "verifier_path": f"{env_in}/verifier.py" if custom else None,
        "repo_path": f"{env_in}/repo" if env.repo_path is not None else None,
        "answer_path": answer_path,
    }


def solution_env(home: str) -> dict[str, str]:
    """The whole environment of a solution process: nothing of the host's."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "HOME": home}


def take_evidence(
    group: cgroups.RunCgroup, work_dir: str
) -> tuple[str | None, float | None, dict[str, str]]:
    """Read the run's cgroup evidence, then remove the groups: (limit fired, peak MiB, which
    mechanism enforced each limit)."""
    limit, peak = group.evidence()
    used = mechanisms(group, work_dir)
    group.remove()
    return limit, peak, used


def mechanisms(group: cgroups.RunCgroup | cgroups.Slot, work_dir: str) -> dict[str, str]:
    """Which mechanism enforced each limit of a run on ``group``."""
    return {**group.mechanisms(), "work_dir": work_dir, "time": "judge+host"}


def apply_evidence(
    raw: RawRun, evidence: tuple[str | None, float | None, dict[str, str]], t0: float
) -> RawRun:
    limit, peak, mechanisms = evidence
    raw.limit_mechanism = mechanisms
    raw.peak_memory_mb = peak
    if limit and not raw.limit_fired:
        raw.limit_fired = limit
    raw.total_ms = (time.monotonic() - t0) * 1000.0
    return raw


class LocalBackend:
    """Runs each job as fresh processes on this machine (strict: in bwrap; unsafe: bare)."""

    def __init__(self, isolation: str = "strict") -> None:
        if isolation not in ("strict", "unsafe"):
            raise ConfigError(f"isolation must be 'strict' or 'unsafe', got {isolation!r}")
        self.name = isolation
        self.isolation = isolation
        self._root = Path(tempfile.mkdtemp(prefix="deepgym-"))
        os.chmod(self._root, 0o700)
        self._envs: dict[str, Path] = {}
        compile_judge()
        if isolation == "strict":
            check_bwrap()
            self._bwrap = find_bwrap()
            self._sys = system_binds()

    # -- preparing files ------------------------------------------------------------------
    def _env_dir(self, env: Environment) -> Path:
        key = _env_key(env)
        cached = self._envs.get(key)
        if cached is not None:
            return cached
        d = self._root / "envs" / key
        d.mkdir(parents=True, exist_ok=True)
        if env.test_cases is not None:
            (d / "test_cases.json").write_text(json.dumps(env.test_cases))
        if env.verifier_code is not None:
            (d / "verifier.py").write_text(env.verifier_code)
        elif env.verifier_path is not None:
            shutil.copyfile(env.verifier_path, d / "verifier.py")
        if env.repo_path is not None:  # a patch task's repository, read by the verifier only
            shutil.copytree(
                env.repo_path,
                d / "repo",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        self._envs[key] = d
        return d

    def _limits(self, job: Job, group: cgroups.RunCgroup | cgroups.Slot) -> dict[str, int]:
        env = job.env
        limits = {
            "cpu_s": math.ceil(job.timeout) + 1,
            "fsize_bytes": env.max_file_mb * 2**20,
            "nofile": 256,
            "nproc": env.max_processes,
            "core": 0,
        }
        if "memory" not in group.dirs:
            limits["as_bytes"] = env.memory_mb * 2**20
        return limits

    def _solution_argv(
        self, job: Job, run_dir: Path, group: cgroups.RunCgroup, mode: str, args: list[str]
    ) -> tuple[list[str], dict[str, str]]:
        """A solution process: in ``strict`` a sandbox of its own (all namespaces, uid 65534,
        no further user namespaces, only the answer in a size-capped tmpfs work dir, every other
        writable mount capped and the rest read-only); in ``unsafe`` a bare interpreter."""
        limits = json.dumps(self._limits(job, group))
        answer = str(run_dir / "answer" / "solution.py")
        env = solution_env("/work" if self.isolation == "strict" else str(run_dir))
        if self.isolation == "unsafe":
            env["DEEPGYM_CGROUP_PROCS"] = ":".join(group.procs_files.values())
            boot = [SANDBOX_PYTHON, "-I", "-S", str(JUDGE_DIR / "_boot.py")]
            return [*boot, "solution", mode, answer, limits, *args], env
        size = str(job.env.max_file_mb * 2 * 2**20)
        cg: list[str] = []
        for ctrl, procs in group.procs_files.items():
            cg += ["--bind", procs, f"/cg/{ctrl}.procs"]
        env["DEEPGYM_CGROUP_PROCS"] = ":".join(f"/cg/{c}.procs" for c in group.procs_files)
        argv = [
            self._bwrap.path,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--cap-drop",  # the bounding set too: nothing a later exec could regain
            "ALL",
            "--die-with-parent",
            "--new-session",
            *self._sys,
            "--ro-bind",
            str(JUDGE_DIR),
            IN_JUDGE,
            "--dev",
            "/dev",
            "--tmpfs",
            "/proc",
            "--size",
            size,
            "--tmpfs",
            "/work",
            "--ro-bind",
            answer,
            "/work/solution.py",
            *cg,
            "--size",
            size,
            "--tmpfs",
            "/tmp",
            # Every writable tmpfs is size-capped (tmpfs pages escape RLIMIT_AS, and a cgroup may
            # be missing): a capped /dev/shm, then bwrap's own root, /dev and /proc read-only.
            "--size",
            size,
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",
            "--remount-ro",
            "/proc",
            "--remount-ro",
            "/",
            "--uid",
            str(SOLUTION_UID),
            "--gid",
            str(SOLUTION_UID),
            "--hostname",
            "sandbox",
            "--chdir",
            "/work",
            SANDBOX_PYTHON,
            "-I",
            "-S",
            f"{IN_JUDGE}/_boot.py",
            "solution",
            mode,
            "/work/solution.py",
            limits,
            *args,
        ]
        return argv, env

    def _job_json(self, job: Job, env_dir: Path, run_dir: Path, ctl_fd: int) -> dict[str, Any]:
        strict = self.isolation == "strict"
        env_in = "/judge/env" if strict else str(env_dir)
        answer_dir = "/judge/answer" if strict else str(run_dir / "answer")
        return {**job_spec(job, env_in, f"{answer_dir}/solution.py"), "ctl_fd": ctl_fd}

    def judge_sandbox(self, binds: list[str], boot: list[str], env: dict[str, str]) -> list[str]:
        """The sandbox the judge runs in (a run's verifier, or a pool worker): all namespaces, no
        network, no host environment, the system and the judge read-only, a private /tmp, plus
        ``binds``; then ``_boot.py`` with ``boot``."""
        setenv: list[str] = []
        for key, value in {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **env}.items():
            setenv += ["--setenv", key, value]
        return [
            self._bwrap.path,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            *setenv,
            "--tmpfs",
            "/tmp",
            *self._sys,
            "--ro-bind",
            str(JUDGE_DIR),
            IN_JUDGE,
            *binds,
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--uid",
            str(VERIFIER_UID),
            "--gid",
            str(VERIFIER_UID),
            "--hostname",
            "judge",
            "--chdir",
            "/tmp",
            SANDBOX_PYTHON,
            "-I",
            "-S",
            f"{IN_JUDGE}/_boot.py",
            *boot,
        ]

    def _verifier_argv(self, run_dir: Path, env_dir: Path, result_fd: int) -> list[str]:
        if self.isolation == "unsafe":
            boot = ["verifier", str(run_dir / "job.json"), str(result_fd)]
            return [SANDBOX_PYTHON, "-I", "-S", str(JUDGE_DIR / "_boot.py"), *boot]
        binds = [
            "--ro-bind",
            str(env_dir),
            "/judge/env",
            "--ro-bind",
            str(run_dir / "answer"),
            "/judge/answer",
            "--ro-bind",
            str(run_dir / "job.json"),
            "/judge/job.json",
        ]
        return self.judge_sandbox(binds, ["verifier", "/judge/job.json", str(result_fd)], {})

    # -- running --------------------------------------------------------------------------
    async def run(self, job: Job) -> RawRun:
        t0 = time.monotonic()
        env_dir = self._env_dir(job.env)
        run_dir = Path(tempfile.mkdtemp(dir=self._root, prefix="run-"))
        group = cgroups.create(job.env.memory_mb, job.env.max_processes)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = SolutionServer(
            mine,
            lambda mode, args: self._solution_argv(job, run_dir, group, mode, args),
            through_bwrap=self.isolation == "strict",
        )
        try:
            (run_dir / "answer").mkdir()
            (run_dir / "answer" / "solution.py").write_text(job.answer)
            spec = self._job_json(job, env_dir, run_dir, theirs.fileno())
            (run_dir / "job.json").write_text(json.dumps(spec))
            r_fd, w_fd = os.pipe()
            try:
                argv = self._verifier_argv(run_dir, env_dir, w_fd)
                verifier = asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    pass_fds=(w_fd, theirs.fileno()),
                    start_new_session=True,
                    cwd=str(run_dir),
                    env=SANDBOX_ENV,  # bwrap's own init keeps its environ: no host secrets in it
                )
                ahead = _AHEAD_MODE.get(job.env.kind)
                if ahead is None:
                    proc = await verifier
                else:  # the answer's interpreter starts beside the verifier's
                    proc, _ = await asyncio.gather(verifier, server.start_ahead(ahead))
            finally:
                os.close(w_fd)
                theirs.close()
            start_ms = (time.monotonic() - t0) * 1000.0
            serving = asyncio.ensure_future(server.serve())
            try:
                raw = await self._collect(job, proc, r_fd, t0)
            finally:
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
                await server.close()
            raw.start_ms = start_ms
        finally:
            evidence = take_evidence(group, "tmpfs" if self.isolation == "strict" else "none")
            shutil.rmtree(run_dir, ignore_errors=True)
        return apply_evidence(raw, evidence, t0)

    async def _collect(
        self, job: Job, proc: asyncio.subprocess.Process, r_fd: int, t0: float
    ) -> RawRun:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**22)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(r_fd, "rb", buffering=0)
        )
        events: list[dict[str, Any]] = []

        async def read_events() -> None:
            while line := await reader.readline():
                with contextlib.suppress(ValueError):
                    msg = json.loads(line)
                    if isinstance(msg, dict):
                        events.append(msg)

        async def drain(stream: asyncio.StreamReader | None) -> bytes:
            if stream is None:
                return b""
            head = b""
            while chunk := await stream.read(65536):
                if len(head) < OUTPUT_EXCERPT:
                    head += chunk[: OUTPUT_EXCERPT - len(head)]
            return head

        wall = job.timeout + START_GRACE_S
        work = asyncio.gather(read_events(), drain(proc.stdout), drain(proc.stderr), proc.wait())
        timed_out = False
        try:
            _, out, err, _ = await asyncio.wait_for(asyncio.shield(work), wall)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            try:  # the pipes close when the sandbox's processes are gone; never wait forever
                _, out, err, _ = await asyncio.wait_for(work, KILL_WAIT_S)
            except TimeoutError:
                out, err = b"", b"the sandbox did not end after it was killed"
                await proc.wait()
        finally:
            transport.close()
        return self._raw(events, proc.returncode, out, err, timed_out)

    def _raw(
        self,
        events: list[dict[str, Any]],
        code: int | None,
        out: bytes,
        err: bytes,
        timed_out: bool,
    ) -> RawRun:
        in_play = next((e for e in events if e.get("event") == "in_play"), None)
        report = next((e for e in events if e.get("event") == "report"), None)
        stderr = err.decode("utf-8", "replace")
        start_failed = report is None and in_play is None and stderr.startswith("bwrap:")
        died = code is not None and (code < 0 or code >= 128)
        sol = (report or {}).get("solution") or {}
        detail = ""
        if report is None and not timed_out:
            detail = (stderr.strip().splitlines() or [f"verifier exited {code}"])[-1][:300]
        outcome = Outcome(
            report=report,
            in_play=in_play is not None,
            verifier_exit_code=code,
            sandbox_died=died,
            wall_timeout=timed_out,
            start_failed=start_failed,
            detail=detail,
        )
        return RawRun(
            outcome=outcome,
            report=report,
            isolation=self.isolation,
            exit_code=code,
            stdout=(sol.get("stdout") or "") if report else out.decode("utf-8", "replace"),
            stderr=(sol.get("stderr") or "") + ("" if report else stderr),
            in_play_ms=in_play.get("in_play_ms") if in_play else None,
            in_play_by=in_play.get("by") if in_play else None,
            limit_fired=sol.get("limit"),
            solution_cpu_ms=sol.get("cpu_ms"),
            signal=-code if code is not None and code < 0 else None,
        )

    async def close(self) -> None:
        cgroups.retry_pending(final=True)
        shutil.rmtree(self._root, ignore_errors=True)
