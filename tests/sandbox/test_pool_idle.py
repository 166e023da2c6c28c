"""The pool hands idle workers out first come, first served, but for a worker that ran the same
environment lately (pure asyncio, no sandbox)."""

from __future__ import annotations

import asyncio
from typing import Any

from deepgym.sandbox.pool import _Idle


def test_a_released_worker_goes_to_the_longest_waiter() -> None:
    async def go() -> list[str]:
        idle = _Idle()
        worker: Any = object()
        idle.put_nowait(worker)
        order: list[str] = []

        async def greedy() -> None:
            for _ in range(3):  # releases and asks again at once, every time
                w = await idle.get()
                order.append("greedy")
                await asyncio.sleep(0)
                idle.put_nowait(w)

        async def patient(name: str) -> None:
            w = await idle.get()
            order.append(name)
            idle.put_nowait(w)

        await asyncio.gather(greedy(), patient("a"), patient("b"))
        return order

    order = asyncio.run(go())
    assert order[:3] == ["greedy", "a", "b"]  # the waiters are served before greedy's next turn


def test_a_cancelled_waiter_passes_its_worker_on() -> None:
    async def go() -> bool:
        idle = _Idle()
        first = asyncio.ensure_future(idle.get())
        second = asyncio.ensure_future(idle.get())
        await asyncio.sleep(0)
        worker: Any = object()
        idle.put_nowait(worker)  # handed to ``first``...
        first.cancel()  # ...which is cancelled before it runs: ``second`` must get it
        got = await asyncio.wait_for(second, 1)
        return got is worker

    assert asyncio.run(go())


class _W:
    def __init__(self, name: str) -> None:
        self.name = name


def test_a_released_worker_goes_to_a_waiter_for_an_environment_it_ran() -> None:
    async def go() -> list[tuple[str, str]]:
        idle = _Idle(patience=4)
        a: Any = _W("a")
        b: Any = _W("b")
        idle.put_nowait(a)
        idle.put_nowait(b)
        assert await idle.get("x") is a  # the longest idle, when none ran "x"
        assert await idle.get("y") is b
        got: list[tuple[str, str]] = []

        async def run(key: str) -> None:
            w = await idle.get(key)
            got.append((key, w.name))

        tasks = [asyncio.ensure_future(run(k)) for k in ("z", "y", "x")]
        await asyncio.sleep(0)
        idle.put_nowait(a)  # ran "x": skips "z" and "y" for "x"
        idle.put_nowait(b)  # ran "y"
        await asyncio.sleep(0)
        idle.put_nowait(a)  # "z" is left, whoever ran it
        await asyncio.gather(*tasks)
        return got

    assert asyncio.run(go()) == [("x", "a"), ("y", "b"), ("z", "a")]


def test_a_free_worker_that_ran_the_environment_is_taken_first() -> None:
    async def go() -> bool:
        idle = _Idle()
        a: Any = _W("a")
        b: Any = _W("b")
        idle.put_nowait(a)
        idle.put_nowait(b)
        first = await idle.get("x")
        second = await idle.get("y")
        idle.put_nowait(first)
        idle.put_nowait(second)
        return await idle.get("y") is second and await idle.get("x") is first

    assert asyncio.run(go())


def test_the_longest_waiter_is_passed_over_at_most_patience_times() -> None:
    async def go() -> int:
        idle = _Idle(patience=2)
        w: Any = _W("w")
        idle.put_nowait(w)
        await idle.get("hot")  # w has run "hot"
        served: list[str] = []

        async def run(key: str) -> None:
            worker = await idle.get(key)
            served.append(key)
            await asyncio.sleep(0)
            idle.put_nowait(worker)

        cold = asyncio.ensure_future(run("cold"))
        hot = [asyncio.ensure_future(run("hot")) for _ in range(5)]
        await asyncio.sleep(0)
        idle.put_nowait(w)
        await asyncio.gather(cold, *hot)
        return served.index("cold")

    # two "hot" runs jump the queue (the patience), then "cold" has the worker
    assert asyncio.run(go()) == 2


def test_without_affinity_the_longest_waiter_always_comes_first() -> None:
    async def go() -> list[str]:
        idle = _Idle(patience=4, affinity=False)
        a: Any = _W("a")
        b: Any = _W("b")
        idle.put_nowait(a)
        idle.put_nowait(b)
        await idle.get("x")  # a runs "x"
        await idle.get("y")  # b runs "y"
        idle.put_nowait(a)
        idle.put_nowait(b)
        first = await idle.get("y")
        assert first is a  # the longest idle, not the one that ran "y"
        second = await idle.get("x")
        got: list[str] = []

        async def run(key: str) -> None:
            await idle.get(key)
            got.append(key)

        tasks = [asyncio.ensure_future(run(k)) for k in ("z", "y")]
        await asyncio.sleep(0)
        idle.put_nowait(first)  # ran "y", but "z" has waited longer
        idle.put_nowait(second)
        await asyncio.gather(*tasks)
        return got

    assert asyncio.run(go()) == ["z", "y"]
