"""A batch's runs as a stream: the plan of a checked batch or eval, the bookkeeping that brings
every answer back exactly once (in groups, recorded in the store as it is known), and the waits
of the stream's loop (a result, the drain's end, or a heartbeat).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deepgym.models import Environment, RunResult
from deepgym.protocol import StreamEvent, encode_event
from deepgym.scheduling import group_slices
from deepgym.server.metrics import Metrics
from deepgym.store import RunKind, RunStatus, RunStore

log = logging.getLogger("deepgym.server")

HEARTBEAT_S = 5.0
SHUTDOWN_CAUSE = "the service shut down before this run finished"


class Flight:
    """One request that is running answers; ``abandon`` is set when the drain's grace ends."""

    def __init__(self) -> None:
        self.abandon = asyncio.Event()


@dataclass
class BatchPlan:
    """A checked batch or eval, ready to run."""

    kind: RunKind
    source: str
    envs: list[Environment]
    answers: list[str]
    group_size: int | None
    max_parallel: int
    time_limit: float | None
    with_names: bool = False
    """Send the environments' names in the ``start`` event (an eval of a named suite)."""


async def next_result(
    queue: asyncio.Queue[tuple[int, RunResult] | None], abandon: asyncio.Future[Any]
) -> tuple[int, RunResult] | str | None:
    """The next result (None: the runs stopped), ``"abandon"`` once the drain's grace is over,
    or ``"heartbeat"`` after ``HEARTBEAT_S`` with neither."""
    getter = asyncio.ensure_future(queue.get())
    await asyncio.wait({getter, abandon}, timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED)
    if getter.done():
        return getter.result()
    getter.cancel()  # an item it was about to take stays in the queue
    return "abandon" if abandon.done() else "heartbeat"


class Batch:
    """One accepted batch's bookkeeping: results by index, groups still open, the store's record.

    Each result is recorded the moment it is taken; a failing store stops recording, never the
    batch (the store is a record, not a reason to fail a run).
    """

    def __init__(self, plan: BatchPlan, metrics: Metrics, store: RunStore | None) -> None:
        n = len(plan.answers)
        self.names = [e.name for e in plan.envs]
        self.groups = group_slices(n, plan.group_size)
        self.group_of = {i: g for g, r in enumerate(self.groups) for i in r}
        self.left = [len(r) for r in self.groups]
        self.results: list[RunResult | None] = [None] * n
        self.metrics = metrics
        self.store = store
        self.run_id: str | None = None
        if store is not None:
            params = {"group_size": plan.group_size, "max_parallel": plan.max_parallel}
            try:
                self.run_id = store.create_run(
                    plan.kind, plan.source, self.names, plan.answers, params
                )
            except sqlite3.Error as exc:
                log.warning("not recording this %s: %s", plan.kind, exc)

    def take(self, i: int, r: RunResult, *, ran: bool) -> bytes | None:
        """Keep result ``i``; its group's line once the group is complete."""
        self.results[i] = r
        self.metrics.observe(r, ran=ran)
        if self.store is not None and self.run_id is not None:
            try:
                self.store.record(self.run_id, i, r)
            except sqlite3.Error as exc:
                log.warning("run %s: recording stopped: %s", self.run_id, exc)
                self.run_id = None
        g = self.group_of[i]
        self.left[g] -= 1
        if self.left[g]:
            return None
        members = [m for m in (self.results[j] for j in self.groups[g]) if m is not None]
        return encode_event(
            StreamEvent(event="group", group=g, start=self.groups[g].start, results=members)
        )

    def close_out(
        self, queue: asyncio.Queue[tuple[int, RunResult] | None], cause: str
    ) -> Iterator[bytes]:
        """After the runs stopped: the results still queued, then every missing one, without a
        verdict (``cause`` says why). Every answer comes back exactly once."""
        while not queue.empty():
            item = queue.get_nowait()
            if item is None or self.results[item[0]] is not None:
                continue
            if (line := self.take(*item, ran=True)) is not None:
                yield line
        error_type = "sandbox_error" if cause == SHUTDOWN_CAUSE else "runtime_error"
        for i, r in enumerate(self.results):
            if r is None:
                lost = RunResult.no_verdict(error_type, cause, env_name=self.names[i])
                if (line := self.take(i, lost, ran=False)) is not None:
                    yield line

    def finish(self, status: RunStatus, elapsed_ms: float) -> None:
        """Record the batch's end in the store (a failing store is logged, never raised)."""
        if self.store is not None and self.run_id is not None:
            try:
                self.store.finish(self.run_id, status, elapsed_ms)
            except sqlite3.Error as exc:
                log.warning("run %s: %s", self.run_id, exc)


def failure_cause(task: asyncio.Future[None]) -> str:
    """Why the runs of a stream stopped early: ``task`` (the pump) failed, or just stopped."""
    exc = task.exception() if task.done() and not task.cancelled() else None
    if exc is None:
        return "the service stopped before this run finished"
    return f"the service failed before this run finished: {type(exc).__name__}: {exc}"
