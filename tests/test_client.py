"""The client over an in-memory backend: retries, groups, streaming, time limits."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepgym import DeepGym, Environment, SandboxError
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import ConfigError
from deepgym.scheduling import TimeLimitPolicy
from tests.fakes import FakeBackend

ENV = Environment(
    name="toy",
    entry_point="f",
    test_cases=[{"args": [], "expected": 1}],
    timeout=30.0,
    reference_solution="ref",
)


def _client(**kw: object) -> tuple[AsyncDeepGym, FakeBackend]:
    dg = AsyncDeepGym(**kw)  # type: ignore[arg-type]
    fake = FakeBackend()
    dg._backend = fake
    return dg, fake


def test_infrastructure_failure_before_play_is_retried_once() -> None:
    dg, fake = _client()
    batch = asyncio.run(dg.run_batch(ENV, ["flaky", "down", "fail"]))
    flaky, down, fail = batch.results
    assert flaky.passed and flaky.attempts == 2
    assert not down.has_verdict and down.error_type == "sandbox_error" and down.attempts == 2
    assert fail.has_verdict and fail.attempts == 1 and fail.score == 0.0
    assert fake.calls["down"] == 2 and fake.calls["fail"] == 1


def test_run_raises_what_kept_failing() -> None:
    dg, _ = _client()
    with pytest.raises(SandboxError) as info:
        asyncio.run(dg.run(ENV, "down"))
    assert info.value.result.attempts == 2


def test_time_limit_from_reference_is_recorded_on_every_result() -> None:
    dg, fake = _client(time_limits=TimeLimitPolicy(factor=10, floor=2.0))
    batch = asyncio.run(dg.run_batch(ENV, ["pass", "fail"]))
    assert [r.time_limit_s for r in batch.results] == [2.0, 2.0]  # 10 x 5 ms, floored
    assert fake.calls["ref"] == 1  # the reference, measured once for the env (at the floor)
    assert all(j.timeout == 2.0 for j in fake.jobs if j.answer != "ref")


def test_time_limit_overrides() -> None:
    dg, _ = _client()
    r = asyncio.run(dg.run(ENV, "x", time_limit=3.5))
    assert r.time_limit_s == 3.5
    fixed = ENV.model_copy(update={"time_limit": 4.0})
    assert asyncio.run(dg.time_limit(fixed)) == 4.0
    no_ref = ENV.model_copy(update={"reference_solution": None})
    assert asyncio.run(dg.time_limit(no_ref)) == 30.0
    off, _ = _client(time_limits=TimeLimitPolicy(factor=None))
    assert asyncio.run(off.time_limit(ENV)) == 30.0
    with pytest.raises(ConfigError, match="time_limit"):
        asyncio.run(dg.run(ENV, "x", time_limit=-1))


def test_stream_groups_yields_complete_groups_as_they_finish() -> None:
    dg, _ = _client(time_limits=TimeLimitPolicy(factor=None))
    outputs = ["sleep:0.4", "ok", "ok", "ok", "ok", "ok"]  # group 0 holds the straggler

    async def collect() -> list[tuple[int, list[str], float]]:
        t0 = time.monotonic()
        return [
            (g, [r.env_name or "" for r in rs], time.monotonic() - t0)
            async for g, rs in dg.stream_groups(ENV, outputs, group_size=2, max_parallel=6)
        ]

    got = asyncio.run(collect())
    assert [g for g, _, _ in got] == [1, 2, 0]
    assert got[0][2] < 0.3 and got[-1][2] >= 0.4


def test_batch_order_is_deterministic_and_envs_can_mix() -> None:
    dg, _ = _client(time_limits=TimeLimitPolicy(factor=None))
    other = ENV.model_copy(update={"name": "other"})
    batch = asyncio.run(
        dg.run_batch([ENV, other, ENV], ["sleep:0.2", "fail", "ok"], group_size=1, max_parallel=3)
    )
    assert [r.env_name for r in batch.results] == ["toy", "other", "toy"]
    assert [r.score for r in batch.results] == [1.0, 0.0, 1.0]
    with pytest.raises(ConfigError, match="environments for 3 answers"):
        asyncio.run(dg.run_batch([ENV, other], ["a", "b", "c"]))


def test_service_time_distribution() -> None:
    dg, _ = _client(time_limits=TimeLimitPolicy(factor=None))
    batch = asyncio.run(dg.run_batch(ENV, ["ok"] * 10, max_parallel=2))
    q = batch.service_time_quantiles()
    assert q["p50"] <= q["p90"] <= q["p99"] <= q["max"]
    assert all(r.service.total_ms >= r.service.queue_ms for r in batch.results)
    assert batch.timeout_rate == 0.0


def test_blocking_client_streams_too() -> None:
    dg = DeepGym(time_limits=TimeLimitPolicy(factor=None))
    dg._core._backend = FakeBackend()
    try:
        groups = list(dg.stream_groups(ENV, ["ok"] * 4, group_size=2))
        assert sorted(g for g, _ in groups) == [0, 1]
        assert all(len(rs) == 2 for _, rs in groups)
    finally:
        dg.close()
