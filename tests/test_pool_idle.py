"""The pool hands idle workers out first come, first served (pure asyncio, no sandbox)."""

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
