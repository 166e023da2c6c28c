"""The service's own cgroup out of memory headroom: every request is answered or fails cleanly.

``deepgym serve`` runs in a memory cgroup of its own (cgroup v1, ``LIMIT_MIB``, swap included
where swap is accounted), its pool workers with it (they are its children; each solution moves to
its worker's slot). Clients then send batches of big answers at once, more than the service has
room to hold. Whatever the kernel does at the limit (reclaim, fail an allocation, kill a process
of the group), every request must end within ``REQUEST_S``: with a batch whose results are each
its answer's verdict or none (never a 0 for a right answer), or with an error the client raises
(an HTTP status, the connection lost). Nothing hangs and, once the service is stopped, nothing is
left: its processes, its workers' cgroups and its own.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.exceptions import DeepGymError
from deepgym.models import BatchResult
from deepgym.sandbox import cgroups
from tests.faults.conftest import Leftovers, held_cgroups, workspaces
from tests.faults.test_service import serve

pytestmark = pytest.mark.sandbox

LIMIT_MIB = 256
"""The service's group: its idle footprint with two workers is about 150 MiB."""
CLIENTS = 4
ANSWERS_PER_BATCH = 2
PAD_MIB = 6
"""Each answer carries this much text: 4 clients x 2 answers x 6 MiB, held as the request's
body, its parsed JSON and each run's copy, is well past the group's headroom."""
REQUEST_S = 120.0

ENV = Environment(
    name="fault-memory",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=20.0,
    case_timeout=10.0,
)


RIGHT = "def add(a, b):\n    return a + b\n"


def big_answer(i: int) -> str:
    return f"def add(a, b):\n    return a + b\n\nPAD_{i} = '{'x' * (PAD_MIB << 20)}'\n"


@contextlib.contextmanager
def service_group() -> Iterator[Path]:
    """A memory cgroup of ``LIMIT_MIB`` under the pools' parent; removed after (its processes
    killed first, if any is left)."""
    group = Path(cgroups.V1_ROOT, "memory", "deepgym", f"faults-service-{uuid.uuid4().hex[:12]}")
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(LIMIT_MIB << 20))
        with contextlib.suppress(OSError):  # absent without swap accounting
            (group / "memory.memsw.limit_in_bytes").write_text(str(LIMIT_MIB << 20))
        yield group
    finally:
        deadline = time.monotonic() + 10
        while (
            left := (group / "cgroup.procs").read_text().split()
        ) and time.monotonic() < deadline:
            for pid in left:  # never ours to leave running: the service is stopped by now
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.1)
        group.rmdir()


@dataclass
class Burst:
    """What the burst of big batches got: each client's batch or error, how long they took,
    the group's peak (MiB), the service's exit status once stopped, its workers' cgroups."""

    outcomes: list[BatchResult | BaseException]
    took_s: float
    peak_mib: int
    status: int | None
    slots: tuple[str, ...]
    after: RunResult | None
    """A run sent once the burst was over (None: the service was gone)."""


def _burst(tmp: Path) -> Burst:
    service = serve(tmp / "service.sqlite")
    slots: set[str] = set()
    after = None
    try:
        with service_group() as group:
            (group / "cgroup.procs").write_text(str(service.proc.pid))
            with DeepGym(mode="remote", url=service.url) as dg:
                assert dg.run(ENV, RIGHT).passed  # the workers start, in the group
            slots = held_cgroups(service.proc.pid)

            def one(c: int) -> BatchResult | BaseException:
                answers = [big_answer(c * 10 + i) for i in range(ANSWERS_PER_BATCH)]
                try:
                    with DeepGym(mode="remote", url=service.url) as client:
                        return client.run_batch(ENV, answers, max_parallel=ANSWERS_PER_BATCH)
                except DeepGymError as exc:  # a status, a lost connection: a clean failure
                    return exc

            t0 = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
                futures = [pool.submit(one, c) for c in range(CLIENTS)]
                outcomes = [f.result(timeout=REQUEST_S) for f in futures]  # none hangs
            took = time.monotonic() - t0
            peak = int((group / "memory.max_usage_in_bytes").read_text()) >> 20
            if service.proc.poll() is None:
                with DeepGym(mode="remote", url=service.url) as dg:
                    after = dg.run(ENV, RIGHT)
            service.stop()
    finally:
        service.stop()
    return Burst(outcomes, took, peak, service.proc.returncode, tuple(sorted(slots)), after)


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Burst]:
    """The burst, once for the module, with the workspaces in a folder of its own."""
    if "memory" not in cgroups.v1_controllers():
        pytest.skip("no writable cgroup v1 memory controller here")
    tmp = tmp_path_factory.mktemp("memory")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("TMPDIR", "DEEPGYM_TMPDIR"):
            mp.setenv(var, str(tmp))
        mp.setattr(tempfile, "tempdir", str(tmp))
        result = _burst(tmp)
        if result.status != 0:  # killed: the next service sweeps its workspace folder
            second = serve(tmp / "service.sqlite")
            try:
                with DeepGym(mode="remote", url=second.url) as dg:
                    assert dg.run(ENV, RIGHT).passed
            finally:
                second.stop()
        assert not workspaces(tmp)
    yield result
    assert not [d for d in result.slots if os.path.exists(d)]  # gone: removed, or swept
    for d in result.slots:  # the test's own clean-up, had one been left
        with contextlib.suppress(OSError):
            os.rmdir(d)


def test_a_service_out_of_memory_answers_or_fails_every_request_cleanly(
    burst: Burst, leftovers: Leftovers
) -> None:
    assert burst.took_s < REQUEST_S
    assert burst.peak_mib <= LIMIT_MIB  # the group held the service to its limit
    assert len(burst.outcomes) == CLIENTS
    for outcome in burst.outcomes:
        if isinstance(outcome, BaseException):
            continue  # raised by the client: a clean failure
        assert len(outcome.results) == ANSWERS_PER_BATCH
        for r in outcome.results:
            assert not r.has_verdict or r.passed, r  # a right answer: passed, or no verdict
    if burst.status == 0:  # it lived: it removed its workers' cgroups at its stop
        assert not [d for d in burst.slots if os.path.exists(d)]
    leftovers.check()  # its processes, and the descriptors here


def test_a_service_out_of_memory_lives_and_serves_the_next_request(burst: Burst) -> None:
    assert burst.status == 0
    assert burst.after is not None and burst.after.passed
