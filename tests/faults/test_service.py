"""Kill the service (``deepgym serve``, SIGKILL) mid-eval, then resume the eval on a fresh one.

The eval runs in this process through a remote client and records each result in a run store
here as it comes (``store.record_eval``, what ``deepgym eval`` does); the service holds its own
pool and its own run store. Killed once a few results are in: every answer has exactly one
stored result, each its answer's verdict or none (the runs the service took with it), never a 0
for a right answer; the service's workers and zygotes end with it; its workspace folder stays
until the next service starts (``workspace.sweep_stale``), which then scores like the first.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.models import Totals
from deepgym.store import RunStore, record_eval
from tests.faults.conftest import Leftovers, held_cgroups, workspaces
from tests.faults.test_kills import ENV, as_expected
from tests.procs import stop

pytestmark = pytest.mark.sandbox

N = 12


def answer(i: int) -> str:
    """``test_kills.answer`` with a short sleep: the eval takes a few seconds in all."""
    value = "a + b" if i % 2 == 0 else f"-{i}"
    return f"import time\n\ndef add(a, b):\n    time.sleep(0.3)\n    return {value}\n"


ANSWERS = [answer(i) for i in range(N)]
UNINTERRUPTED = Totals.from_rows([(True, i % 2 == 0, float(i % 2 == 0)) for i in range(N)])


@dataclass
class Serve:
    proc: subprocess.Popen[str]
    url: str

    def stop(self) -> None:
        stop(self.proc)


def serve(store: Path) -> Serve:
    """``deepgym serve`` on 127.0.0.1 (an ephemeral port), two pool workers."""
    args = ["serve", "--port", "0", "--workers", "2", "--store", str(store), "--grace", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym", *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DEEPGYM_TOKEN": ""},
    )
    assert proc.stdout is not None
    m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", proc.stdout.readline())
    if m is None:
        proc.kill()
        proc.wait()
        raise AssertionError("deepgym serve did not start")
    proc.stdout.readline()  # the console line
    return Serve(proc, m.group(1))


@dataclass
class Killed:
    """What a service killed mid-eval left: the eval's id, its store, the service's cgroups."""

    run_id: str
    store: Path
    cgroups: tuple[str, ...]


@pytest.fixture
def killed(tmp_path: Path, leftovers: Leftovers) -> Iterator[Killed]:
    """An eval whose service was SIGKILLed once 3 of its results were recorded."""
    store = tmp_path / "client.sqlite"
    first = serve(tmp_path / "service.sqlite")
    held: set[str] = set()
    with RunStore(store) as s:
        run_id = s.create_run("eval", "fault-add", [ENV.name] * N, ANSWERS)

    def kill_at_three() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with RunStore(store) as s:
                if s.run(run_id).recorded >= 3:
                    break
            time.sleep(0.02)
        held.update(held_cgroups(first.proc.pid))
        first.proc.send_signal(signal.SIGKILL)

    killer = threading.Thread(target=kill_at_three)
    killer.start()
    try:
        with RunStore(store) as s, DeepGym(mode="remote", url=first.url) as dg:
            record_eval(dg, s, run_id, [ENV] * N, ANSWERS, max_parallel=4)
    finally:
        killer.join(60)
        first.stop()
    assert first.proc.returncode == -signal.SIGKILL
    assert held, "the service held no cgroups"
    yield Killed(run_id, store, tuple(sorted(held)))
    for d in held:  # the test's own clean-up, where a test left the dead service's groups
        with contextlib.suppress(OSError):
            os.rmdir(d)


def test_the_service_killed_mid_eval_loses_nothing_and_leaves_nothing(
    killed: Killed, tmp_path: Path, leftovers: Leftovers
) -> None:
    with RunStore(killed.store) as s:
        info = s.run(killed.run_id)
        results = s.results(killed.run_id)
    assert sorted(results) == list(range(N))  # one result per answer: none lost, none twice
    judged = [i for i, r in results.items() if r.has_verdict]
    assert all(as_expected(i, results[i]) for i in judged)  # no failure of ours scored
    assert len(judged) >= 3 and len(judged) < N
    assert all(r.error_type == "sandbox_error" for r in results.values() if not r.has_verdict)
    assert info.complete and info.totals.no_verdict_count == N - len(judged)
    assert len(workspaces(leftovers.tmp)) == 1  # the dead service's: no one to remove it yet
    with RunStore(tmp_path / "service.sqlite") as s:  # the service's own store, its writer dead
        (cut,) = [info for info in s.runs() if not info.complete]
        stored = s.results(cut.id)
    assert cut.status == "stopped"  # its recorder is gone: not "running" for ever
    assert cut.recorded == len(stored) < cut.total
    assert all(as_expected(i, r) for i, r in stored.items())  # each its own answer's verdict

    second = serve(tmp_path / "service.sqlite")  # its workspace sweeps the stale one
    try:
        assert len(workspaces(leftovers.tmp)) == 1
        with DeepGym(mode="remote", url=second.url) as dg:
            batch = dg.run_batch(ENV, ANSWERS[:4], max_parallel=4)
        assert all(as_expected(i, r) for i, r in enumerate(batch.results))
    finally:
        second.stop()
    assert second.proc.returncode == 0
    leftovers.check()  # the dead service's processes, descriptors here, its folder: all gone


def test_the_cgroups_of_a_killed_service_are_removed_by_the_next(
    killed: Killed, tmp_path: Path, leftovers: Leftovers
) -> None:
    assert all(os.path.isdir(d) for d in killed.cgroups)  # SIGKILL: its close never ran
    second = serve(tmp_path / "service.sqlite")
    try:
        assert not any(os.path.exists(d) for d in killed.cgroups)  # swept before it served
        with DeepGym(mode="remote", url=second.url) as dg:
            assert dg.run(ENV, answer(0)).passed
    finally:
        second.stop()
    leftovers.check(also_cgroups=killed.cgroups)


def test_an_eval_resumed_after_the_service_died_has_the_uninterrupted_totals(
    killed: Killed, tmp_path: Path
) -> None:
    with RunStore(killed.store) as s:
        before = s.results(killed.run_id)
    second = serve(tmp_path / "service.sqlite")
    try:
        with RunStore(killed.store) as s, DeepGym(mode="remote", url=second.url) as dg:
            resumed = record_eval(dg, s, killed.run_id, [ENV] * N, ANSWERS, max_parallel=4)
            info = s.run(killed.run_id)
            after = s.results(killed.run_id)
    finally:
        second.stop()
    assert resumed.totals == UNINTERRUPTED
    assert info.complete and info.totals == UNINTERRUPTED  # the store's totals, recomputed
    assert all(as_expected(i, r) for i, r in after.items())
    kept = {i: r for i, r in before.items() if r.has_verdict}
    assert {i: after[i] for i in kept} == kept  # a verdict stored before the kill stays
