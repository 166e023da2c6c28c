"""Queueing on SandboxFusion's routes: no request waits past the deadline its client keeps, and
verl's own ``compute_score``, at its default concurrency, scores as against SandboxFusion.

verl sends one ``/run_code`` request per test case, all at once (its default ``max_concurrent``
is 64), and gives up on each after ``compile_timeout + run_timeout + 10`` seconds (an API error:
the case scores as failed); it retries only a 504. The reproduction: ``deepgym serve`` on 2
cores, a program that loops forever on 6 test cases and is right on 4, ``timeout=10``: 0.4
against SandboxFusion. Before time limits were judged on CPU time, the service ran as many
answers at once as it had cores, so the right cases waited behind the endless ones until verl
gave up: 0.0.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deepgym.sandbox.base import Job, RawRun
from deepgym.server import fusion
from deepgym.server.app import create_app
from deepgym.server.inputs import Limits
from deepgym.server.launch import service_app
from deepgym.server.runner import ThreadedServer
from deepgym.verdict import Outcome
from tests.server.conftest import TOKEN
from tests.server.test_fusion import _load_verl

CASES = {  # 6 inputs on which the program loops forever, first (they reach the queue first)
    "inputs": ["-1\n"] * 6 + ["1\n", "2\n", "3\n", "4\n"],
    "outputs": [""] * 6 + ["2", "4", "6", "8"],
}
PROGRAM = "n = int(input())\nwhile n < 0:\n    pass\nprint(2 * n)\n"


# -- start by the client's deadline ---------------------------------------------------------------
def test_a_run_starts_by_the_time_it_could_still_reply_to_its_client() -> None:
    req = fusion.RunCodeRequest(code="", language="python", compile_timeout=7, run_timeout=3)
    deadline = fusion.client_deadline(req, 100.0)
    assert deadline == 100.0 + 7 + 3 + fusion.CLIENT_MARGIN_S  # verl's request timeout
    py = fusion.run_code_env(req, Limits())
    # a Python run needs its run limit (judged on CPU time: no longer on an idle host) and the
    # sandbox's start; no compile phase, though its client allowed for one
    assert fusion.start_by(py, deadline) == deadline - 3 - fusion.START_MARGIN_S
    cpp = fusion.run_code_env(req.model_copy(update={"language": "cpp"}), Limits())
    assert fusion.start_by(cpp, deadline) == deadline - 7 - 3 - fusion.START_MARGIN_S


class Held:
    """A backend whose runs of the answer ``hold`` wait until ``release``; others pass."""

    name = "held"

    def __init__(self) -> None:
        self.released = threading.Event()
        self.started: list[str] = []

    async def run(self, job: Job) -> RawRun:
        self.started.append(job.answer)
        while job.answer == "hold" and not self.released.is_set():
            await asyncio.sleep(0.01)
        report = {"status": "ok", "score": 1.0, "passed": True, "cases": []}
        return RawRun(Outcome(report=report, in_play=True, verifier_exit_code=0), report, "held")

    async def close(self) -> None:
        pass


def test_a_run_that_cannot_start_in_time_is_a_504_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slot, held: the next request would start too late for its client, so it is answered
    at once, without a verdict, as a 504 (which verl retries), never after its client gave up."""
    monkeypatch.setattr(fusion, "CLIENT_MARGIN_S", 2.5)  # its client gives up after 2.7 s
    backend = Held()
    app = create_app(backend, token=TOKEN, concurrency=1)
    body = {"language": "python", "compile_timeout": 0.1, "run_timeout": 0.1}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with ThreadedServer(app, grace_s=1.0) as server, httpx.Client(timeout=30) as client:
        url = server.url + "/run_code"
        first = threading.Thread(
            target=lambda: client.post(url, json={**body, "code": "hold"}, headers=headers)
        )
        first.start()
        while backend.started != ["hold"]:
            time.sleep(0.01)
        t0 = time.monotonic()
        r = client.post(url, json={**body, "code": "late"}, headers=headers)
        took = time.monotonic() - t0
        backend.released.set()
        first.join()
    assert r.status_code == 504, r.text
    assert r.json()["status"] == "SandboxError" and "start by" in r.json()["message"], r.text
    assert took < 0.1 + 0.1 + 2.5, took  # before its client's deadline
    assert backend.started == ["hold"]  # it never ran


# -- verl's compute_score -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def on_two_cores() -> Iterator[ThreadedServer]:
    """``deepgym serve``'s app as its command builds it (``service_app``, the pool and its
    defaults), on 2 cores: the server's thread, and so every sandbox it starts, runs on two of
    this machine's cores, and the pool and the service size themselves by them."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs 2 cores")
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores[:2])  # this thread: the server's thread is made from it
    try:
        app = service_app(
            sandbox="pool",
            workers=None,
            concurrency=None,
            store=None,
            token=TOKEN,
            console_token="console-token",
            allow_verifier_code=False,
            limits=Limits(),
            openrlhf=False,
        )
        server = ThreadedServer(app, grace_s=1.0).start()
    finally:
        os.sched_setaffinity(0, mine)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.sandbox
def test_verl_compute_score_at_its_default_concurrency_scores_as_against_sandbox_fusion(
    on_two_cores: ThreadedServer,
) -> None:
    """The reproduction, as verl runs it: 0.4. The service runs as many programs at once as its
    pool's base size (two per core): the endless ones are each judged on their own CPU time
    (their limit, -3, or verl's deadline first, -1); a right case waiting behind them that could
    no longer end before verl's deadline is a 504 at once, which verl retries, and runs once the
    endless ones are done: never a wait past verl's own deadline.

    On a loaded machine the endless ones are held back, and end at their backstop (three times
    their limit on the clock) instead of their limit: still before the right cases' second try
    must start (verl's deadline less their limit and the start margin). verl's own retries bound
    the test's time: three tries of 30 s and the waits between them."""
    package, _ = _load_verl()
    url = f"{on_two_cores.url}/run_code?token={TOKEN}"
    completion = f"```python\n{PROGRAM}```\n"
    t0 = time.monotonic()
    score, meta = package.compute_score(
        url, threading.Semaphore(64), 1024, completion, json.dumps(CASES), timeout=10
    )
    took = time.monotonic() - t0
    statuses = [m["status"] for m in meta]
    assert statuses[6:] == ["success"] * 4, _described(meta)
    assert score == pytest.approx(0.4), _described(meta)
    # each endless case: its time limit (-3), or no reply before verl's deadline (-1)
    assert set(statuses[:6]) <= {"timeout", "api_error"}, _described(meta)
    # verl's own bound: three tries of 30 s and the waits between them
    assert took < 3 * (10 + 10 + fusion.CLIENT_MARGIN_S) + 3 + 10, took


def _described(meta: list[dict[str, Any]]) -> str:
    keys = ("case_index", "status", "api_request_error", "run_status", "duration")
    return json.dumps([{k: m.get(k) for k in keys} for m in meta], indent=1)
