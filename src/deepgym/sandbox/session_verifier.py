"""A session's final verifier (or its per-step verifier) on this host, in a fresh ``session``
sandbox of its own over a snapshot of the agent's work dir (``judge/session_verify.py``), in
cgroups of its own, as ``LocalSession.score`` and ``step_reward`` ask for it.

The verdict comes back on a pipe only the verifier's process holds, after the instant the agent's
work came into play, as JSON lines in a function task's form, read by the code that reads a fresh
run's verifier (``deepgym.sandbox.fresh.collect``: its output capped, its wall limit, its end
when cancelled; ``evidence.read_run``): ``deepgym.verdict`` reads them as the session rule says.

On an image (``image_root``), the verifier runs on the same image root as the agent did, so the
task's tests find the toolchain the agent used, in the work dir as the agent left it (the
snapshot, copied to ``/work``). Its sandbox is a fresh one: its own tmpfs layer over the image's
root on disk, which no sandbox writes, and the agent's sandbox has ended before it starts, so
nothing of the agent's can reach or alter it. What the agent changed outside its work dir (a
package it installed, a file in ``/etc``) was in the agent's layer and is gone: the verifier
judges the work dir on the image as built, never a system the agent prepared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path

from deepgym.exceptions import SandboxError, SandboxUnavailableError
from deepgym.judge.codes import SOLUTION_UID
from deepgym.models import Environment, RunResult
from deepgym.results import build_result
from deepgym.sandbox import cgroups, policy, seccomp
from deepgym.sandbox.evidence import read_run
from deepgym.sandbox.fresh import collect
from deepgym.sandbox.spawn import start_process
from deepgym.sandbox.workspace import Workspace

__all__ = ["home", "run_as", "verify_snapshot"]


def run_as(env: Environment) -> int:
    """The uid a session of ``env`` (its agent, setup and verifiers) runs as inside its
    sandbox: ``policy.ROOT_UID`` for a task run as root (``Environment.user``)."""
    return policy.ROOT_UID if env.user == "root" else SOLUTION_UID


def home(env: Environment) -> str:
    """``HOME`` in a session of ``env``: the work dir, or ``/root`` for a task run as root."""
    return "/root" if env.user == "root" else "/work"


async def verify_snapshot(
    host: policy.Params,
    workspace: Workspace,
    env: Environment,
    sandbox_id: str,
    work_bytes: int,
    snapshot: Path,
    *,
    step: bool = False,
    stage: str | None = None,
) -> RunResult:
    """The final verifier of ``env`` (``step``: its per-step verifier) for session
    ``sandbox_id``, in a fresh sandbox over ``snapshot`` (a work dir of ``work_bytes`` at most);
    ``host``: the host's facts, ``workspace``: where the environment's files are staged;
    ``stage``: the stage it judges, in ``DEEPGYM_STAGE`` (``Environment.stages``)."""
    env_dir = workspace.env_dir(env, keep=True)
    group = cgroups.create(env.memory_mb, env.max_processes, owner=workspace.owner)
    if host.writable_root and not group.holds("memory"):  # an image's layer: see image_root
        group.remove()
        raise SandboxUnavailableError(
            f"session {sandbox_id}: a verifier on an image needs a memory cgroup"
        )
    joins, binds, join_fds = group.join(policy.RUN_CGROUP)
    filter_fd = seccomp.filter_fd() if run_as(env) == policy.ROOT_UID else -1
    extra_fds = [filter_fd] if filter_fd >= 0 else []
    r_fd, w_fd = os.pipe()
    params = dataclasses.replace(
        host,
        command=("session_verify", str(w_fd), *(["step"] if step else [])),
        env={
            "HOME": home(env),
            "DEEPGYM_CGROUP_PROCS": joins,
            **({"DEEPGYM_STAGE": stage} if stage is not None else {}),
        },
        uid=run_as(env),
        seccomp_fd=filter_fd,
        cgroups=binds,
        size=work_bytes,
        env_dir=str(env_dir),
        snapshot_dir=str(snapshot),
    )
    t0 = time.monotonic()
    try:
        try:
            proc = await start_process(
                *policy.argv(policy.SESSION, params),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(w_fd, *join_fds, *extra_fds),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(r_fd)
            raise SandboxError(f"session {sandbox_id}: the verifier did not start: {exc}") from exc
        finally:
            os.close(w_fd)
            for fd in extra_fds:
                os.close(fd)
        got = await collect(proc, r_fd, env.timeout)  # closes r_fd; ends proc if cancelled
    finally:
        group.remove()
    raw = read_run(got.events, proc.returncode, got.out, got.err, got.timed_out, "strict")
    # The verifier's own output is the run's (a function task's is the solution's, in its report)
    raw.stdout = got.out.decode(errors="replace")
    raw.stderr = got.err.decode(errors="replace")
    raw.total_ms = (time.monotonic() - t0) * 1000.0
    # A step's score is progress along the episode (shaping), never all-or-nothing; the final
    # verdict follows the environment's scoring.
    scoring = "partial" if step else env.scoring
    result, _ = build_result(raw, env.name, env.timeout, memory_mb=env.memory_mb, scoring=scoring)
    return result.model_copy(update={"sandbox_id": sandbox_id})
