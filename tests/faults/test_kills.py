"""Kill a part of a sandbox mid-batch: the run it held ends, every other run is untouched.

A batch of slow answers (right ones, and wrong ones that name their index in the failing case's
message, so a lost, duplicated or misplaced result shows) is in flight on two workers when the
test kills, with SIGKILL, one process of a run in play:

- the pool's worker (``dg-worker``, where the pool's verifier runs) or its zygote
  (``dg-zygote``): infrastructure, never the answer's doing (no answer can reach either), so the
  run comes back without a verdict, never a 0;
- the solution process (``dg-solution``): from the judge's side that is an answer that died in
  play, like one that killed itself, so the run completes with its verdict (or none);
- the strict sandbox's verifier process: ours (the answer, in other pid and user namespaces,
  cannot signal it), so no verdict, never a 0; a verifier that crashes on its own after the
  answer came into play stays the answer's 0 (``tests/test_verdict.py``).

Then the pool serves another batch, and after the close nothing is left behind.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from deepgym import Environment, RunResult
from deepgym.client import AsyncDeepGym
from deepgym.scheduling import TimeLimitPolicy
from tests.faults.conftest import Leftovers
from tests.procs import comm, descendants, parent

pytestmark = pytest.mark.sandbox

ENV = Environment(
    name="fault-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=20.0,
    case_timeout=10.0,
    memory_mb=256,
    max_processes=16,
)
SLEEP_S = 1.5
"""Each answer's time in play: the kill lands while runs are in it."""


def answer(i: int) -> str:
    """Even ``i``: right; odd: wrong, returning ``-i`` (its failing case names it)."""
    value = "a + b" if i % 2 == 0 else f"-{i}"
    return f"import time\n\ndef add(a, b):\n    time.sleep({SLEEP_S})\n    return {value}\n"


def as_expected(i: int, r: RunResult) -> bool:
    if i % 2 == 0:
        return r.has_verdict and r.passed and r.score == 1.0
    message = " ".join(c.message for c in r.cases)
    return r.has_verdict and not r.passed and r.score == 0.0 and f"got -{i}" in message


def off(results: list[RunResult], answers: int) -> list[int]:
    """The indices whose result is not what their answer gives; every answer has one result."""
    assert len(results) == answers, f"{answers} answers, {len(results)} results"
    return [i for i, r in enumerate(results) if not as_expected(i, r)]


async def in_play(timeout_s: float = 15.0) -> int:
    """A solution process of a run in play (named ``dg-solution`` once it has a run)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted(p for p in descendants(os.getpid()) if comm(p) == "dg-solution")
        if found:
            await asyncio.sleep(0.2)  # well inside its sleep
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError("no run came into play")


@pytest.mark.parametrize("target", ["dg-worker", "dg-zygote", "dg-solution"])
def test_a_pool_process_killed_mid_batch_costs_its_run_only(
    target: str, leftovers: Leftovers
) -> None:
    n = 8

    async def go() -> tuple[list[RunResult], list[RunResult]]:
        async with AsyncDeepGym(workers=2, time_limits=TimeLimitPolicy(factor=None)) as dg:
            assert (await dg.run(ENV, answer(0))).passed  # the workers are up
            batch = asyncio.ensure_future(
                dg.run_batch(ENV, [answer(i) for i in range(n)], max_parallel=4)
            )
            victim = await in_play()
            zygote = parent(victim)
            worker = parent(zygote) if zygote is not None else None
            chosen = {"dg-solution": victim, "dg-zygote": zygote, "dg-worker": worker}[target]
            assert chosen is not None and comm(chosen) == target
            os.kill(chosen, signal.SIGKILL)
            results = (await asyncio.wait_for(batch, 60)).results
            after = await asyncio.wait_for(
                dg.run_batch(ENV, [answer(i) for i in range(4)], max_parallel=4), 60
            )
        return results, after.results

    results, after = asyncio.run(go())
    (hit,) = off(results, n)  # exactly one run held the killed process
    r = results[hit]
    if target == "dg-solution":  # an answer that died in play: its verdict, or none
        assert not r.passed and r.score == 0.0
    else:  # ours: never a 0
        assert not r.has_verdict and r.error_type == "sandbox_error", r
        assert r.attempts == 1  # in play when it died: not run twice
    assert off(after, 4) == []  # the pool replaced what died
    leftovers.check()


def strict_pids(role: bytes) -> list[int]:
    """The strict sandbox's processes of ``role`` (``verifier``, ``solution``): the
    interpreters, not their bwraps."""
    out = []
    for p in descendants(os.getpid()):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        boot = [i for i, a in enumerate(argv) if a.endswith(b"_boot.py")]
        if comm(p) != "bwrap" and boot and argv[boot[0] + 1 : boot[0] + 2] == [role]:
            out.append(p)
    return sorted(out)


async def strict_in_play(timeout_s: float = 15.0) -> int:
    """A verifier of the strict sandbox whose solution is up and in its sleep."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if strict_pids(b"solution") and (verifiers := strict_pids(b"verifier")):
            await asyncio.sleep(0.5)
            return verifiers[0]
        await asyncio.sleep(0.02)
    raise AssertionError("no run came into play")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_strict_verifier_killed_mid_batch_is_no_verdict(
    sig: signal.Signals, leftovers: Leftovers
) -> None:
    n = 4

    async def go() -> tuple[list[RunResult], list[RunResult]]:
        async with AsyncDeepGym(sandbox="strict", time_limits=TimeLimitPolicy(factor=None)) as dg:
            batch = asyncio.ensure_future(
                dg.run_batch(ENV, [answer(i) for i in range(n)], max_parallel=2)
            )
            os.kill(await strict_in_play(), sig)
            results = (await asyncio.wait_for(batch, 60)).results
            after = await asyncio.wait_for(
                dg.run_batch(ENV, [answer(i) for i in range(2)], max_parallel=2), 60
            )
        return results, after.results

    results, after = asyncio.run(go())
    leftovers.check()
    (hit,) = off(results, n)
    r = results[hit]
    assert not r.has_verdict and r.error_type == "sandbox_error", r
    assert sig.name in (r.error or ""), r
    assert r.attempts == 1  # in play when it was killed: not run twice
    assert off(after, 2) == []
