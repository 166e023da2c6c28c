"""A session's final verifier (or its per-step verifier) on this host, in a fresh ``session``
sandbox of its own over a snapshot of the agent's work dir (``judge/session_verify.py``), in
cgroups of its own, as ``LocalSession.score`` and ``step_reward`` ask for it.

The verdict comes back on a pipe only the verifier's process holds, and the instant the agent's
work came into play on another: ``deepgym.verdict`` reads them as the session rule says.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from deepgym.exceptions import SandboxError
from deepgym.models import Environment, RunResult
from deepgym.results import build_result
from deepgym.sandbox import cgroups, policy
from deepgym.sandbox.base import RawRun
from deepgym.sandbox.spawn import end_process, start_process
from deepgym.sandbox.workspace import Workspace
from deepgym.verdict import Outcome

__all__ = ["verify_snapshot"]


async def verify_snapshot(
    host: policy.Params,
    workspace: Workspace,
    env: Environment,
    sandbox_id: str,
    work_bytes: int,
    snapshot: Path,
    *,
    step: bool = False,
) -> RunResult:
    """The final verifier of ``env`` (``step``: its per-step verifier) for session
    ``sandbox_id``, in a fresh sandbox over ``snapshot`` (a work dir of ``work_bytes`` at most);
    ``host``: the host's facts, ``workspace``: where the environment's files are staged."""
    env_dir = workspace.env_dir(env)
    group = cgroups.create(env.memory_mb, env.max_processes, owner=workspace.owner)
    joins, binds, join_fds = group.join(policy.RUN_CGROUP)
    r_report, w_report = os.pipe()
    r_mark, w_mark = os.pipe()
    params = dataclasses.replace(
        host,
        command=("session_verify", str(w_report), str(w_mark), *(["step"] if step else [])),
        env={"HOME": "/work", "DEEPGYM_CGROUP_PROCS": joins},
        cgroups=binds,
        size=work_bytes,
        env_dir=str(env_dir),
        snapshot_dir=str(snapshot),
    )
    t0 = time.monotonic()
    timed_out = False
    try:
        proc = await start_process(
            *policy.argv(policy.SESSION, params),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(w_report, w_mark, *join_fds),
            start_new_session=True,
        )
    except OSError as exc:
        for fd in (r_report, w_report, r_mark, w_mark):
            os.close(fd)
        group.remove()
        raise SandboxError(f"session {sandbox_id}: the verifier did not start: {exc}") from exc
    os.close(w_report)
    os.close(w_mark)
    try:
        try:
            out, err = await asyncio.wait_for(proc.communicate(), env.timeout)
        except TimeoutError:
            timed_out = True
            out, err = b"", b""
            await end_process(proc)
        except BaseException:
            await end_process(proc)
            raise
        report_raw = _read_all(r_report)
        in_play = bool(_read_all(r_mark))
    finally:
        os.close(r_report)
        os.close(r_mark)
        group.remove()
    report: dict[str, Any] | None
    try:
        report = json.loads(report_raw) if report_raw else None
    except ValueError:
        report = None
    code = proc.returncode if proc.returncode is not None else -9
    outcome = Outcome(
        report=report,
        in_play=in_play,
        verifier_exit_code=code,
        wall_timeout=timed_out,
        detail=err.decode(errors="replace")[-500:],
    )
    raw = RawRun(
        outcome=outcome,
        report=report,
        isolation="strict",
        exit_code=code,
        stdout=out.decode(errors="replace")[-2000:],
        stderr=err.decode(errors="replace")[-2000:],
        total_ms=(time.monotonic() - t0) * 1000.0,
    )
    result, _ = build_result(raw, env.name, env.timeout, memory_mb=env.memory_mb)
    return result.model_copy(update={"sandbox_id": sandbox_id})


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)
