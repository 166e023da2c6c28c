"""The ``strict`` backend: fresh bwrap sandboxes per run, composed from ``policy``.

The verifier process runs in a ``verifier`` sandbox (all namespaces, no network, no host
environment, the system's programs read-only, its environment and the answer mounted read-only,
a private /tmp). At first use it has the host start the solution in a ``solution`` sandbox of its
own (fresh user, pid, mount, net, ipc and uts namespaces, uid 65534, no capabilities, no further
user namespaces, a size-capped tmpfs work dir holding only the answer, no /proc) inside the run's
cgroups. When a sandbox ends, its pid namespace takes every process with it, daemons included.
Slower than the pool, and the simplest to audit: the baseline the pool must match on every
isolation test. No answer can signal the verifier's process (other pid and user namespaces), so
a verifier ended by a stop signal (a kill from outside, the OOM killer) is ours, like a pool
worker that died: a run without a verdict (``deepgym.verdict.killed_from_outside``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from deepgym import languages
from deepgym.runtimes import Built
from deepgym.sandbox import cgroups, policy
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.fresh import FreshRuns
from deepgym.sandbox.host import check_bwrap, compile_judge, host_params
from deepgym.sandbox.image_root import ImageResolver, ImageRoots
from deepgym.sandbox.programs import ProgramCache
from deepgym.sandbox.spec import rlimits, solution_env, work_bytes


class BwrapLaunch:
    """Each process of a run in a bwrap sandbox of its own role (``policy``)."""

    isolation = "strict"
    work_dir = "tmpfs"
    through_bwrap = True
    verifier_out_of_reach = True

    def __init__(self, host: policy.Params, images: ImageRoots | None = None) -> None:
        self.host = host
        """The host's facts (bwrap, system folders, judge, Python), read once."""
        self.images = ImageRoots() if images is None else images
        """Where an environment's ``image`` becomes a root (a function task on an image)."""

    def host_for(self, job: Job) -> policy.Params:
        """The host's facts for ``job``'s sandboxes: on its image's root where it names one
        (read-only for the answer: its ``solution`` sandbox remounts the root, layer and all)."""
        if job.env.image is None:
            return self.host
        return self.images.params(self.host, job.env.image, writable=False)

    def job_paths(self, run_dir: Path, env_dir: Path) -> tuple[str, str]:
        """Where the ``verifier`` sandbox mounts the run's files (``policy``'s ``run_files``)."""
        return "/judge/env", "/judge/answer/solution.py"

    def verifier_argv(self, job: Job, run_dir: Path, env_dir: Path, result_fd: int) -> list[str]:
        """A ``verifier`` sandbox running the harness on the run's job."""
        params = dataclasses.replace(
            self.host_for(job),
            command=("verifier", "/judge/job.json", str(result_fd)),
            run_dir=str(run_dir),
            env_dir=str(env_dir),
        )
        return policy.argv(policy.VERIFIER, params)

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
        """A ``solution`` sandbox serving the answer, told where the run's cgroups are (a
        ``build``'s: with the folder of precompiled ``headers`` at ``/pch``, where given), with
        its ``runtime`` (built: ``RuntimeStore.ready``) mounted read-only where it has one."""
        limits = json.dumps(rlimits(job, group))
        env = solution_env("/work")
        env["DEEPGYM_CGROUP_PROCS"], binds, _ = group.join(policy.RUN_CGROUP)
        if runtime is not None:
            env.update(runtime.solution_env())
        params = dataclasses.replace(
            self.host_for(job),
            command=("solution", mode, "/work/solution.py", limits, *args),
            run_dir=str(run_dir),
            cgroups=binds,
            size=work_bytes(job),
            headers_dir=str(headers) if headers is not None else "",
            runtime_dir=str(runtime.path) if runtime is not None else "",
        )
        # A compiler's sandbox, or a program whose runtime needs a /proc (mono, Racket): the
        # solution's policy with a /proc of its own pid namespace (``Language.proc``).
        proc = mode == "exec" and languages.LANGUAGES[job.env.language].proc
        role = policy.BUILD if mode == "build" or proc else policy.SOLUTION
        return policy.argv(role, params), env


class StrictBackend:
    """Runs each job in fresh bwrap sandboxes: a verifier's, and one per solution process."""

    name = "strict"
    isolation = "strict"

    def __init__(self, images: ImageResolver | None = None) -> None:
        """``images``: how an environment's ``image`` becomes a root folder (the image store's
        by default)."""
        compile_judge()
        check_bwrap()
        self._runs = FreshRuns(BwrapLaunch(host_params(), ImageRoots(images)))

    async def run(self, job: Job) -> RawRun:
        """Run one job in fresh sandboxes."""
        return await self._runs.run(job)

    @property
    def programs(self) -> ProgramCache:
        """The compiled languages' programs this backend built (``sandbox.programs``)."""
        return self._runs.programs

    async def close(self) -> None:
        """Remove the backend's files and any run cgroup left."""
        await self._runs.close()
