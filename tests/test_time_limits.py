"""``TimeLimits``: one engine's time limits, from the reference's runtime fetched once per
environment (single flight), kept here and in the machine's store."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from deepgym.identity import env_key
from deepgym.models import Environment
from deepgym.scheduling import TimeLimitPolicy
from deepgym.time_limits import LimitStore, TimeLimits, content_key
from tests.fakes import TOY

ENV = TOY


class Reference:
    """A measurement that takes ``delay`` seconds and finds ``ms`` (None: the reference failed;
    an exception: the host failed), counting its calls per environment."""

    def __init__(self, ms: float | None = 500.0, delay: float = 0.05) -> None:
        self.ms = ms
        self.delay = delay
        self.calls: Counter[str] = Counter()
        self.fail: BaseException | None = None

    async def __call__(self, env: Environment) -> float | None:
        self.calls[env.name] += 1
        await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        return self.ms


def _limits(reference: Reference, policy: TimeLimitPolicy | None = None, **kw: bool) -> TimeLimits:
    return TimeLimits(policy or TimeLimitPolicy(persist=False), reference, sandbox="fake", **kw)


def test_concurrent_first_callers_wait_on_one_measurement() -> None:
    reference = Reference(ms=500.0)
    limits = _limits(reference)

    async def go() -> list[float]:
        assert limits.now(ENV) is None  # still to be measured
        return await asyncio.gather(*(limits.limit(ENV) for _ in range(20)))

    assert asyncio.run(go()) == [5.0] * 20  # 10 x 0.5 s
    assert reference.calls == {"toy": 1}
    assert limits.now(ENV) == 5.0  # kept: a run's lookup measures nothing


def test_a_cancelled_caller_does_not_stop_the_measurement_the_others_wait_on() -> None:
    reference = Reference(ms=500.0, delay=0.2)
    limits = _limits(reference)

    async def go() -> float:
        first = asyncio.ensure_future(limits.derive(ENV))
        second = asyncio.ensure_future(limits.derive(ENV))
        await asyncio.sleep(0.05)
        first.cancel()
        return await second

    assert asyncio.run(go()) == 5.0
    assert reference.calls == {"toy": 1}


def test_a_measurement_that_raised_is_not_kept_and_the_next_caller_measures_again() -> None:
    reference = Reference(ms=500.0)
    reference.fail = OSError("no space left")
    limits = _limits(reference)

    async def go() -> float:
        results = await asyncio.gather(
            limits.derive(ENV), limits.derive(ENV), return_exceptions=True
        )
        assert all(isinstance(r, OSError) for r in results)
        assert reference.calls == {"toy": 1}  # the two callers shared the failing one
        assert limits.now(ENV) is None
        reference.fail = None
        return await limits.derive(ENV)

    assert asyncio.run(go()) == 5.0
    assert reference.calls == {"toy": 2}


def test_a_reference_that_failed_keeps_the_cap_and_is_not_measured_again() -> None:
    reference = Reference(ms=None)
    limits = _limits(reference)
    assert asyncio.run(limits.limit(ENV)) == 30.0
    assert limits.now(ENV) == 30.0 and reference.calls == {"toy": 1}


@pytest.mark.parametrize(
    ("ms", "limit"), [(5.0, 1.0), (500.0, 5.0), (2500.0, 25.0), (60_000.0, 30.0)]
)
def test_the_limit_is_k_times_the_reference_between_the_floor_and_the_cap(
    ms: float, limit: float
) -> None:
    limits = _limits(Reference(ms=ms), TimeLimitPolicy(factor=10.0, floor=1.0, persist=False))
    assert asyncio.run(limits.limit(ENV)) == limit


def test_what_no_reference_decides_is_never_measured() -> None:
    reference = Reference()
    limits = _limits(reference)
    assert asyncio.run(limits.limit(ENV, 3.0)) == 3.0
    assert asyncio.run(limits.limit(ENV, 99.0)) == 30.0
    assert asyncio.run(limits.limit(ENV.model_copy(update={"time_limit": 2.0}))) == 2.0
    assert asyncio.run(limits.limit(ENV.model_copy(update={"reference_solution": None}))) == 30.0
    off = _limits(reference, TimeLimitPolicy(factor=None))
    assert asyncio.run(off.limit(ENV)) == 30.0
    assert not reference.calls


def test_the_cache_is_by_content_not_by_object_or_name() -> None:
    reference = Reference(ms=500.0)
    limits = _limits(reference)
    asyncio.run(limits.limit(ENV))
    renamed = ENV.model_copy(update={"name": "other", "task": "the same content"})
    assert limits.now(renamed) == 5.0
    assert limits.now(ENV.model_copy(update={"timeout": 3.0})) is None  # new content: measured
    assert reference.calls == {"toy": 1}


def test_the_store_reads_back_what_it_wrote_in_the_format_it_always_had() -> None:
    reference = Reference(ms=500.0)

    async def measured_in_a_new_holder() -> float:
        limits = _limits(reference, TimeLimitPolicy())
        try:
            return await limits.limit(ENV)
        finally:
            await limits.close()

    assert asyncio.run(measured_in_a_new_holder()) == 5.0
    store = LimitStore()
    assert store.get(content_key(ENV, "fake")) == 500.0  # the runtime, under the store's key
    store.close()
    assert asyncio.run(measured_in_a_new_holder()) == 5.0
    assert reference.calls == {"toy": 1}  # the second holder read it
    fresh = _limits(reference, TimeLimitPolicy())
    assert fresh.now(ENV) == 5.0  # a run's first lookup reads it too, without measuring


def test_the_store_is_read_once_per_environment_and_a_failed_reference_never_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    get = LimitStore.get

    def counted(self: LimitStore, key: str) -> float | None:
        reads.append(key)
        return get(self, key)

    monkeypatch.setattr(LimitStore, "get", counted)
    limits = _limits(Reference(ms=None), TimeLimitPolicy())
    for _ in range(5):
        assert limits.now(ENV) is None
    assert len(reads) == 1
    assert asyncio.run(limits.limit(ENV)) == 30.0
    store = LimitStore()
    assert store.count() == 0
    store.close()


def test_a_policy_that_keeps_nothing_never_opens_the_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store was opened")

    monkeypatch.setattr(LimitStore, "__init__", refuse)
    assert asyncio.run(_limits(Reference(), TimeLimitPolicy(persist=False)).limit(ENV)) == 5.0
    driver = _limits(Reference(), TimeLimitPolicy(), persist=False)  # a Ray driver's
    assert asyncio.run(driver.limit(ENV)) == 5.0


def test_runtimes_travel_under_the_callers_names_and_are_not_measured_again() -> None:
    here, there = Reference(ms=500.0), Reference(ms=999.0)
    a, b = _limits(here), _limits(there)
    asyncio.run(a.limit(ENV))
    moved = ENV.model_copy(update={"verifier_path": Path("/a/node/s/install/verifier.py")})
    assert env_key(moved) != env_key(ENV)  # a node's copy, its files elsewhere: a key of its own
    sent = a.known({"k": ENV, "unknown": ENV.model_copy(update={"timeout": 3.0})})
    assert sent == {"k": 500.0}
    b.learn({"k": moved}, sent)
    assert b.now(moved) == 5.0 and b.known({"k": moved}) == {"k": 500.0}
    assert not there.calls
    failed = _limits(Reference(ms=None))
    asyncio.run(failed.limit(ENV))
    assert failed.known({"k": ENV}) == {"k": None}  # known to have failed: the cap, everywhere
    b.learn({"k": ENV}, {"k": None})
    assert b.now(ENV) == 30.0


def test_close_stops_a_measurement_under_way() -> None:
    reference = Reference(delay=60.0)
    limits = _limits(reference)

    async def go() -> None:
        waiting = asyncio.ensure_future(limits.derive(ENV))
        await asyncio.sleep(0.05)
        await limits.close()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(asyncio.wait_for(go(), 5.0))
    assert limits.now(ENV) is None  # nothing kept
