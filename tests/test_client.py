"""The client over an in-memory backend: retries, groups, streaming, time limits."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import pytest

from deepgym import DeepGym, SandboxError
from deepgym.blocking import Portal
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import ConfigError, DeepGymTimeoutError
from deepgym.scheduling import TimeLimitPolicy
from tests.fakes import TOY, FakeBackend

ENV = TOY


def _client(**kw: object) -> tuple[AsyncDeepGym, FakeBackend]:
    fake = FakeBackend()
    dg = AsyncDeepGym(backend=fake, **kw)  # type: ignore[arg-type]
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

    async def go() -> Any:
        await dg.time_limit(ENV)  # known before the batch (tests/test_first_touch.py: unknown)
        return await dg.run_batch(ENV, ["pass", "fail"])

    batch = asyncio.run(go())
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
    dg = DeepGym(time_limits=TimeLimitPolicy(factor=None), backend=FakeBackend())
    try:
        groups = list(dg.stream_groups(ENV, ["ok"] * 4, group_size=2))
        assert sorted(g for g, _ in groups) == [0, 1]
        assert all(len(rs) == 2 for _, rs in groups)
    finally:
        dg.close()


def test_a_backend_is_injected_and_named_on_the_client() -> None:
    fake = FakeBackend()
    dg = AsyncDeepGym(backend=fake, time_limits=TimeLimitPolicy(factor=None))
    assert dg.sandbox == "fake" and dg.mode == "local"
    r = asyncio.run(dg.run(ENV, "pass"))
    assert r.passed and fake.jobs[0].answer == "pass"
    asyncio.run(dg.close())
    assert fake.closed
    with pytest.raises(ConfigError, match="backend= runs answers on this host"):
        AsyncDeepGym(mode="remote", url="http://127.0.0.1:1", backend=FakeBackend())


def test_a_sandbox_name_given_as_backend_is_refused_at_construction() -> None:
    # A string where a backend object goes used to fail at the first run (AttributeError).
    with pytest.raises(ConfigError, match=r"backend must be a Backend.*give sandbox='strict'"):
        DeepGym(backend="strict")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="got object"):
        AsyncDeepGym(backend=object())  # type: ignore[arg-type]


def test_an_engine_replaces_the_settings_it_would_be_made_from() -> None:
    from deepgym.engines import LocalEngine

    engine = LocalEngine(FakeBackend(), time_limits=TimeLimitPolicy(factor=None))
    dg = DeepGym(engine=engine)
    try:
        assert dg.mode == "local" and dg.sandbox == "fake"
        assert dg.run_one(ENV, "fail").score == 0.0
    finally:
        dg.close()
    with pytest.raises(ConfigError, match="engine= replaces workers, backend"):
        AsyncDeepGym(engine=engine, workers=2, backend=FakeBackend())
    with pytest.raises(ConfigError, match="engine must be an Engine"):
        AsyncDeepGym(engine=object())  # type: ignore[arg-type]


def test_run_one_is_a_batch_of_one_and_never_raises() -> None:
    dg, _ = _client(time_limits=TimeLimitPolicy(factor=None))
    down = asyncio.run(dg.run_one(ENV, "down"))
    assert not down.has_verdict and down.error_type == "sandbox_error" and down.attempts == 2
    batch = asyncio.run(dg.run_batch(ENV, ["down"], max_parallel=1))
    keep = {"score", "passed", "has_verdict", "error_type", "attempts", "env_name"}
    assert down.model_dump(include=keep) == batch.results[0].model_dump(include=keep)
    with pytest.raises(SandboxError):  # run keeps the contract's raise
        asyncio.run(dg.run(ENV, "down"))


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda dg: dg.run_batch(ENV, ["a"], max_parallel=True), "max_parallel"),
        (lambda dg: dg.run_batch(ENV, ["a"], max_parallel=0), "max_parallel"),
        (lambda dg: dg.run_batch(ENV, ["a"], time_limit=float("inf")), "time_limit"),
        (lambda dg: dg.run_batch(ENV, ["a"], time_limit=float("nan")), "time_limit"),
        (lambda dg: dg.run_batch(ENV, ["a"], time_limit=True), "time_limit"),
        (lambda dg: dg.run_batch(ENV, ["a"], group_size=False), "group_size"),
        (lambda dg: dg.run_batch(ENV, "one str"), "not one str"),
        (lambda dg: dg.run_batch(ENV, ["a", 3]), r"outputs\[1\]"),
        (lambda dg: dg.run(ENV, 3), "model_output"),
        (lambda dg: dg.run_one(ENV, b"x"), "model_output"),
        (lambda dg: dg.eval([ENV], {"toy": 1}), r"outputs\['toy'\]"),
        (lambda dg: dg.eval([ENV], ["x"]), "map environment names"),
        (lambda dg: dg.time_limit(ENV, -1.0), "time_limit"),
    ],
)
def test_bad_input_is_refused_once_by_the_facade(call: Any, words: str) -> None:
    dg, fake = _client()
    with pytest.raises(ConfigError, match=words):
        asyncio.run(call(dg))
    assert not fake.jobs  # nothing ran


@pytest.mark.parametrize("workers", [0, -1, True, 2.0, "2"])
def test_workers_must_be_a_positive_int(workers: object) -> None:
    with pytest.raises(ConfigError, match="workers"):
        AsyncDeepGym(workers=workers)  # type: ignore[arg-type]


def test_a_blocking_call_whose_loop_died_raises_instead_of_hanging() -> None:
    # In a process of its own: a SystemExit raised inside another thread's C calls upsets
    # CPython 3.11's recursion counter for the rest of the process.
    program = (
        "from deepgym import DeepGym, Environment, TimeLimitPolicy\n"
        "from tests.fakes import FakeBackend\n"
        "env = Environment(name='toy', entry_point='f', test_cases=[{'args': [], 'expected': 1}])\n"
        "def explode(done, total):\n"
        "    raise SystemExit(1)  # in the portal's loop thread: it ends that loop\n"
        "dg = DeepGym(time_limits=TimeLimitPolicy(factor=None), backend=FakeBackend())\n"
        "try:\n"
        "    dg.run_batch(env, ['ok'], progress=explode)\n"
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
        "dg.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout == "deepgym's event loop thread has stopped\n"
    assert "never awaited" not in out.stderr  # (its stderr says what the callback raised)


def test_a_blocking_call_raises_a_timeout_error_at_once() -> None:
    # DeepGymTimeoutError is a TimeoutError: the portal must hand it over, not read it as
    # "still waiting" (it once looped forever on exactly that).
    async def late() -> None:
        raise DeepGymTimeoutError("no verdict: time ran out")

    portal = Portal()
    try:
        start = time.monotonic()
        with pytest.raises(DeepGymTimeoutError, match="time ran out"):
            portal.call(late())
        assert time.monotonic() - start < 5
    finally:
        portal.stop()


def test_a_sandbox_this_host_cannot_run_raises_out_of_a_batch() -> None:
    # Not a batch of sandbox_error results: every run would fail alike, every reward be None.
    from deepgym.exceptions import SandboxUnavailableError

    fake = FakeBackend()
    with DeepGym(time_limits=TimeLimitPolicy(factor=None), backend=fake) as dg:
        start = time.monotonic()
        with pytest.raises(SandboxUnavailableError, match="bwrap cannot run"):
            dg.run_batch(ENV, ["sleep:30", "unavailable"], max_parallel=2)
        assert time.monotonic() - start < 10  # the other run was cancelled, not waited for
        with pytest.raises(SandboxUnavailableError):
            dg.eval([ENV], {"toy": "unavailable"})
        assert dg.run_batch(ENV, ["pass", "down"]).results[1].error_type == "sandbox_error"
