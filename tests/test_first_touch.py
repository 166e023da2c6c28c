"""No serial wait for a derived time limit: a new environment's runs start at once under its cap,
the reference is measured only once a run goes past the floor, and the verdict is the one the
run gets when the limit is known before it starts (the invariant, tested on both orders)."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepgym import Environment, TimeLimitPolicy
from deepgym.client import AsyncDeepGym
from deepgym.models import RunResult
from tests.fakes import FakeBackend

CAP = 5.0
FLOOR = 0.3
POLICY = TimeLimitPolicy(factor=10.0, floor=FLOOR, persist=False)


def _env(reference_s: float) -> Environment:
    return Environment(
        name="toy",
        entry_point="f",
        test_cases=[{"args": [], "expected": 1}],
        timeout=CAP,
        reference_solution=f"sleep:{reference_s}",
    )


def _verdict(r: RunResult) -> tuple[object, ...]:
    return (r.has_verdict, r.score, r.passed, r.error_type)


async def _batch(
    env: Environment, answers: list[str], *, known: bool
) -> tuple[list[RunResult], FakeBackend, float]:
    fake = FakeBackend()
    async with AsyncDeepGym(backend=fake, time_limits=POLICY) as dg:
        if known:  # the limit measured before any answer starts
            await dg.time_limit(env)
        t0 = time.monotonic()
        batch = await dg.run_batch(env, answers, max_parallel=len(answers))
        return batch.results, fake, time.monotonic() - t0


@pytest.mark.parametrize("reference_s", [0.05, 0.12])
def test_the_verdict_does_not_depend_on_whether_the_limit_was_known(reference_s: float) -> None:
    env = _env(reference_s)
    limit = max(10.0 * reference_s, FLOOR)  # 0.5 s and 1.2 s
    durations = [0.01, 0.5 * limit, 0.8 * limit, 1.25 * limit, 2.0 * limit, 40.0]
    answers = [f"sleep:{d}" for d in durations]
    known, _, _ = asyncio.run(_batch(env, answers, known=True))
    fresh, fake, took = asyncio.run(_batch(env, answers, known=False))
    assert [_verdict(r) for r in fresh] == [_verdict(r) for r in known]
    expected = ["pass" if d <= limit else "solution_timeout" for d in durations]
    assert [r.error_type or "pass" for r in fresh] == expected
    assert all(r.has_verdict for r in fresh)
    # Past the floor, a run is held to the derived limit, as a run that knew it would be.
    for d, r in zip(durations, fresh, strict=True):
        if d > FLOOR:
            assert r.time_limit_s == pytest.approx(limit)
    # The runs in flight were held to the limit: the 40 s answer did not run to the 5 s cap.
    assert took < CAP
    # The reference was measured once for the whole batch (two runs: above the floor).
    assert fake.calls[env.reference_solution or ""] == 2


def test_runs_that_end_within_the_floor_never_wait_for_the_reference() -> None:
    env = _env(3.0)  # a reference that takes 3 s to measure
    t0 = time.monotonic()
    results, fake, _ = asyncio.run(_batch(env, ["pass", "fail", "sleep:0.1"], known=False))
    # Nobody waited for the reference's run (the bound leaves a loaded host seconds of slack).
    assert time.monotonic() - t0 < 2.5
    assert fake.calls["sleep:3.0"] == 0  # nor ran it: no limit could change these results
    assert [r.passed for r in results] == [True, False, True]
    assert all(r.time_limit_s == CAP for r in results)  # held to the cap, which never fired
    assert all(j.timeout == CAP for j in fake.jobs)


def test_a_reference_that_fails_leaves_the_cap_and_the_run_stands() -> None:
    env = _env(0.05).model_copy(update={"reference_solution": "fail"})
    results, fake, _ = asyncio.run(_batch(env, ["sleep:0.5"], known=False))
    assert results[0].passed and results[0].time_limit_s == CAP
    assert fake.calls["sleep:0.5"] == 1  # not run again: the cap was its limit all along
    assert fake.calls["fail"] == 1


def test_a_single_run_does_not_wait_either() -> None:
    env = _env(0.12)

    async def go() -> tuple[RunResult, FakeBackend]:
        fake = FakeBackend()
        async with AsyncDeepGym(backend=fake, time_limits=POLICY) as dg:
            return await dg.run(env, "sleep:0.01"), fake

    result, fake = asyncio.run(go())
    assert result.passed and fake.calls["sleep:0.12"] == 0


def test_a_cancelled_batch_leaves_no_run_or_measurement_behind() -> None:
    env = _env(0.2)

    async def go() -> FakeBackend:
        fake = FakeBackend()
        async with AsyncDeepGym(backend=fake, time_limits=POLICY) as dg:
            call = asyncio.ensure_future(dg.run_batch(env, ["sleep:30"] * 3, max_parallel=3))
            await asyncio.sleep(FLOOR + 0.1)  # past the floor: the reference is being measured
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        # Closed: no run and no measurement of the reference is left running.
        assert asyncio.all_tasks() == {asyncio.current_task()}
        return fake

    t0 = time.monotonic()
    fake = asyncio.run(go())
    assert time.monotonic() - t0 < 2.0
    assert fake.calls["sleep:30"] == 3
