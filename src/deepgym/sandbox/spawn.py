"""Starting and ending a sandbox's process tree so that a cancel never leaves part of it behind.

bwrap forks: the process we start waits for a child in new namespaces (in its own session for
the verifier), and that child dies with its parent only once it has asked to (``--die-with-parent``
is set a moment after the fork). A cancel that lands in that moment, and asyncio's own clean-up
of a cancelled start (which kills the one pid it knows), can orphan the child; the orphan keeps
the output pipes open, and asyncio (3.11) waits on those pipes before it reports an exit, so
waiting for the process would never end.

- ``start_process``: ``asyncio.create_subprocess_exec`` that a cancel does not cut in half: the
  start finishes (a few milliseconds), then the whole tree is ended and the cancel goes on.
- ``end_process``: SIGKILL to the process, its group and every descendant read from ``/proc``
  (found before any is killed, so none is lost to reparenting), then wait for it, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

from deepgym.judge.blame import tree_pids

__all__ = ["END_WAIT_S", "end_process", "exit_signal", "start_process"]

END_WAIT_S = 5.0
"""How long ``end_process`` waits for a killed tree to be reaped."""


async def start_process(*argv: str, **kwargs: Any) -> asyncio.subprocess.Process:
    """Start ``argv`` as ``asyncio.create_subprocess_exec`` does; cancelled while starting, it
    ends what it started before the cancel goes on."""
    start = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **kwargs))
    try:
        return await asyncio.shield(start)
    except asyncio.CancelledError:
        while not start.done():  # let the start finish, however often the cancel is repeated
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(start)
        if not start.cancelled() and start.exception() is None:
            await end_process(start.result())
        raise


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group and every process below it."""
    pids = tree_pids(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


async def end_process(proc: asyncio.subprocess.Process) -> None:
    """Kill ``proc``'s whole tree and wait (at most ``END_WAIT_S``) until it is reaped.

    Made for clean-up while a cancel is under way: further cancels do not cut the wait short
    (it is bounded), so the process is reaped before the cancel goes on."""
    if proc.returncode is None:
        kill_tree(proc.pid)
    deadline = asyncio.get_running_loop().time() + END_WAIT_S
    waited = asyncio.ensure_future(proc.wait())
    while not waited.done():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            waited.cancel()
            break
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(waited), left)
    await asyncio.wait([waited])  # never raises: its outcome is seen below
    if not waited.cancelled():
        waited.exception()


def exit_signal(code: int | None, through_bwrap: bool) -> int | None:
    """The signal that ended a process with exit ``code`` (bwrap reports its child's signal as
    128 + n; a process killed itself, as -n); None where none did."""
    if code is None:
        return None
    if code < 0:
        return -code
    if through_bwrap and 128 < code < 128 + 65:
        return code - 128
    return None
