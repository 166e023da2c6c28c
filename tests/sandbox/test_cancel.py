"""A strict run cancelled at any instant (Ctrl-C, a drained service, a deadline) ends every
process it started and reaps it: nothing outlives the call, nothing is left for a closed loop to
report. The first milliseconds matter most: bwrap is then between its fork and the moment its
child dies with it, and asyncio's own clean-up of a cancelled start kills one pid only."""

from __future__ import annotations

import asyncio
import logging
import os
import time

import pytest

from deepgym import load_environment, make_backend
from deepgym.sandbox.base import Job
from tests.procs import descendants

pytestmark = pytest.mark.sandbox

SLOW = "import time\ntime.sleep(0.2)\n"
DELAYS_MS = [*range(0, 26), 40, 80, 150, 300]
SETTLE_S = 3.0
"""When the cancel lands: every millisecond of the start, then into the run."""


def test_a_strict_run_cancelled_at_any_point_leaves_no_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = load_environment("humaneval/0")  # a function task: its answer starts beside the verifier
    job = Job(env=env, answer=SLOW + (env.reference_solution or ""), timeout=10.0, case_timeout=5.0)
    before = descendants(os.getpid())
    left: dict[int, set[int]] = {}

    async def go() -> None:
        backend = make_backend("strict")
        try:
            for delay in DELAYS_MS:
                run = asyncio.ensure_future(backend.run(job))
                await asyncio.sleep(delay / 1000)
                run.cancel()
                done, _ = await asyncio.wait([run], timeout=30)
                assert done, f"a run cancelled after {delay} ms did not end"
                # A killed process can take a moment to be gone on a loaded machine; one still
                # here after SETTLE_S was left behind.
                deadline = time.monotonic() + SETTLE_S
                while (still := descendants(os.getpid()) - before) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                if still:
                    left[delay] = still
        finally:
            await backend.close()

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        asyncio.run(go())
    assert not left, f"processes left after the cancel, by delay in ms: {left}"
    assert not [r.message for r in caplog.records if "is closed" in r.message]
