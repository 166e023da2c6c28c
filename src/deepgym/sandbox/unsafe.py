"""The ``unsafe`` backend: the same judge and the same two processes per run, with no isolation.

For debugging only: the answer runs as this user, on this machine, with its files and network.
It is asked for by name and reported in every result (``isolation="unsafe"``); nothing falls
back to it. The run's cgroups and the solution's rlimits still apply.
"""

from __future__ import annotations

import json
from pathlib import Path

from deepgym.runtimes import Built
from deepgym.sandbox import cgroups
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.fresh import FreshRuns
from deepgym.sandbox.host import JUDGE_DIR, SANDBOX_PYTHON, compile_judge
from deepgym.sandbox.image_root import refuse_image
from deepgym.sandbox.policy import boot_command
from deepgym.sandbox.programs import ProgramCache
from deepgym.sandbox.spec import rlimits, solution_env


class BareLaunch:
    """Each process of a run as a plain interpreter on the host, in the run's folder."""

    isolation = "unsafe"
    work_dir = "none"
    through_bwrap = False
    verifier_out_of_reach = False

    def job_paths(self, run_dir: Path, env_dir: Path) -> tuple[str, str]:
        """The host's own paths."""
        return str(env_dir), str(run_dir / "answer" / "solution.py")

    def verifier_argv(self, job: Job, run_dir: Path, env_dir: Path, result_fd: int) -> list[str]:
        """The harness on the run's job."""
        args = ["verifier", str(run_dir / "job.json"), str(result_fd)]
        return boot_command(SANDBOX_PYTHON, str(JUDGE_DIR), args)

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
        """The solution host on the answer's file, told where the run's cgroups are (no
        precompiled ``headers``: a build here uses none), and its ``runtime``'s packages, where
        it has one, in their folder on the host."""
        limits = json.dumps(rlimits(job, group))
        answer = str(run_dir / "answer" / "solution.py")
        env = solution_env(str(run_dir))
        env["DEEPGYM_CGROUP_PROCS"] = group.join(None)[0]
        if runtime is not None:
            env.update(runtime.solution_env(str(runtime.site)))
        command = ["solution", mode, answer, limits, *args]
        return boot_command(SANDBOX_PYTHON, str(JUDGE_DIR), command), env


class UnsafeBackend:
    """Runs each job as bare processes on this machine: no sandbox (debugging only)."""

    name = "unsafe"
    isolation = "unsafe"

    def __init__(self) -> None:
        compile_judge()
        self._runs = FreshRuns(BareLaunch())

    async def run(self, job: Job) -> RawRun:
        """Run one job with no isolation (never one on an image: ``image_root.refuse_image``)."""
        refuse_image(job.env, self.name)
        return await self._runs.run(job)

    @property
    def programs(self) -> ProgramCache:
        """The compiled languages' programs this backend built (``sandbox.programs``)."""
        return self._runs.programs

    async def close(self) -> None:
        """Remove the backend's files and any run cgroup left."""
        await self._runs.close()
