"""Time limits are judged on the answer's CPU time, end to end on both sandboxes
(``deepgym.judge.blame``): an endless loop uses its limit, a sleep waits past it, both the
answer's 0; a right answer the host holds back is never a timeout: judged once let go within the
backstop, no verdict past it.

The host holding an answer back is simulated deterministically, not by loading the machine: the
test moves the solution's processes (its run's or its pool slot's cgroup, found by the backend's
owner token) into a cgroup v1 ``cpu`` group of the test's own whose quota gives them 1% of a core
(``Throttle``). They stay runnable and get next to no CPU, as on a host with too much to run.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.judge.blame import BACKSTOP
from deepgym.sandbox import cgroups, make_backend
from deepgym.sandbox.base import Backend
from deepgym.sandbox.spec import START_GRACE_S

from .conftest import SANDBOXES, held_back

pytestmark = pytest.mark.sandbox

CPU_ROOT = os.path.join(cgroups.V1_ROOT, "cpu")
QUOTA_US = 1000
"""The throttled processes' CPU per period (``PERIOD_US``): 1% of a core."""
PERIOD_US = 100_000


def _throttle_possible() -> bool:
    """A writable cgroup v1 ``cpu`` controller here, and groups per run to find a solution by."""
    if not cgroups.group_parents() or not os.path.isfile(os.path.join(CPU_ROOT, "cgroup.procs")):
        return False
    probe = os.path.join(CPU_ROOT, f"deepgym-probe-{uuid.uuid4().hex[:8]}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError:
        return False
    return True


needs_throttle = pytest.mark.skipif(
    not _throttle_possible(), reason="needs a writable cgroup v1 cpu controller and run cgroups"
)

CALL_S = 2.0
"""Each call's limit, in CPU time (its backstop: ``BACKSTOP`` times that on the clock)."""
ADD = Environment(
    name="cpu-time-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=4.0,
    case_timeout=CALL_S,
    memory_mb=256,
    max_processes=16,
    max_file_mb=16,
)
SCRIPT = Environment(
    name="cpu-time-script",
    kind="script",
    test_cases=[{"stdin": "1 2\n", "expected_stdout": "3\n"}],
    timeout=4.0,
    case_timeout=CALL_S,
    memory_mb=256,
    max_processes=16,
    max_file_mb=16,
)
WORK = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5:\n    pass\n"
"""Half a second of CPU time: a quarter of the limit, well within it."""
RIGHT = {
    "function": "def add(a, b):\n"
    + "".join(f"    {line}\n" for line in WORK.splitlines())
    + "    return a + b\n",
    "script": WORK + "a, b = map(int, input().split())\nprint(a + b)\n",
}
ENVS = {"function": ADD, "script": SCRIPT}


def _owner(backend: Backend) -> str:
    """The token the backend's cgroups are named for (``cgroups.owned_name``)."""
    workspace = getattr(backend, "_workspace", None) or backend._runs.workspace  # type: ignore[attr-defined]
    return str(workspace.owner)


def solution_pids(backend: Backend) -> set[int]:
    """The processes in the backend's solution groups now (a pool slot's, or a run's)."""
    owner = _owner(backend)
    out: set[int] = set()
    for parent in cgroups.group_parents():
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                if f"-{owner}-" not in name:
                    continue
                with (
                    contextlib.suppress(OSError),
                    open(os.path.join(parent, name, "cgroup.procs")) as f,
                ):
                    out.update(int(p) for p in f.read().split())
    return out


def _cpu_ms(pids: set[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) * 1000.0 / tick
    return total


def computing(backend: Backend, min_ms: float = 150.0, within_s: float = 60.0) -> set[int]:
    """The solution's processes, once they have used ``min_ms`` of CPU time (past its set-up:
    the answer is computing in its call)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pids = solution_pids(backend)
        if pids and _cpu_ms(pids) >= min_ms:
            return pids
        time.sleep(0.01)
    raise AssertionError("the solution never started computing")


class Throttle:
    """A cgroup v1 ``cpu`` group of the test's own, with a quota of 1% of a core."""

    def __init__(self) -> None:
        self.path = os.path.join(CPU_ROOT, f"deepgym-test-{uuid.uuid4().hex[:8]}")
        os.mkdir(self.path)
        self._write("cpu.cfs_period_us", PERIOD_US)
        self._write("cpu.cfs_quota_us", QUOTA_US)

    def _write(self, name: str, value: int) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def hold(self, pids: set[int]) -> None:
        """Throttle ``pids`` (and what they start from now on)."""
        for pid in pids:
            with contextlib.suppress(OSError):  # one that ended meanwhile
                self._write("cgroup.procs", pid)

    def release(self) -> None:
        """Let them run at full speed again."""
        self._write("cpu.cfs_quota_us", -1)

    def close(self) -> None:
        self.release()
        with open(os.path.join(self.path, "cgroup.procs")) as f:
            left = f.read().split()
        for pid in left:  # back to the root group, so the test's group can go
            with (
                contextlib.suppress(OSError),
                open(os.path.join(CPU_ROOT, "cgroup.procs"), "w") as f,
            ):
                f.write(pid)
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"{self.path} was left behind")


@pytest.fixture
def throttle() -> Iterator[Throttle]:
    t = Throttle()
    try:
        yield t
    finally:
        t.close()


@contextlib.contextmanager
def running(sandbox: str, env: Environment, answer: str) -> Iterator[tuple[Backend, Any]]:
    """``(backend, future)``: ``answer`` running on ``env`` in a fresh backend, in a thread."""
    backend = make_backend(sandbox, workers=1) if sandbox == "pool" else make_backend(sandbox)
    with DeepGym(backend=backend) as dg, concurrent.futures.ThreadPoolExecutor(1) as pool:
        dg.run(env, "def add(a, b):\n    return a + b\n" if env.kind != "script" else "print(3)")
        yield backend, pool.submit(_timed, dg, env, answer)


def _timed(dg: DeepGym, env: Environment, answer: str) -> tuple[RunResult, float]:
    t0 = time.monotonic()
    r = dg.run_one(env, answer)
    return r, time.monotonic() - t0


# -- the answer's own time ---------------------------------------------------------------------
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_an_endless_loop_uses_its_cpu_time_its_0(sandbox: str) -> None:
    """The call uses its limit in CPU time: its case fails (a judged 0), with the CPU time to
    show. On a host loaded past the backstop it may have none instead: never a pass, never a 0
    without that evidence."""
    with DeepGym(sandbox=sandbox) as dg:
        r = dg.run_one(ADD, "def add(a, b):\n    while True:\n        pass\n")
    if held_back(r):
        return
    assert r.has_verdict and r.score == 0.0 and r.error_type is None, r
    assert r.cases[0].message == f"timeout: the call used its {CALL_S:g} s of CPU time", r.cases
    assert (r.evidence.solution_cpu_ms or 0.0) >= CALL_S * 1000.0, r.evidence
    assert r.evidence.limit_fired == "case_time", r.evidence


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_sleep_past_the_limit_is_a_chosen_wait_its_0(sandbox: str) -> None:
    """Past its limit on the clock with nothing runnable: it chose to wait, its 0, however
    loaded the host (a sleeper is never runnable, whatever else runs)."""
    with DeepGym(sandbox=sandbox) as dg:
        t0 = time.monotonic()
        r = dg.run_one(ADD, "import time\ndef add(a, b):\n    time.sleep(1000)\n")
        elapsed = time.monotonic() - t0
    assert r.has_verdict and r.score == 0.0 and r.error_type is None, r
    assert r.cases[0].message.startswith(f"timeout: the call waited past its {CALL_S:g} s"), r
    assert (r.evidence.solution_cpu_ms or 0.0) < 500.0, r.evidence
    assert elapsed < BACKSTOP * ADD.timeout + START_GRACE_S, elapsed


# -- the host's holding back -------------------------------------------------------------------
@needs_throttle
@pytest.mark.parametrize("kind", ["function", "script"])
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_right_answer_held_back_past_its_limit_is_judged_once_let_go(
    sandbox: str, kind: str, throttle: Throttle
) -> None:
    """Held back for longer than its limit, then let go within the backstop: it finishes and is
    judged (1.0), never a timeout. (On the clock it ran past its limit: a wall-clock limit would
    have stopped it.)"""
    hold_s = CALL_S + 0.5
    with running(sandbox, ENVS[kind], RIGHT[kind]) as (backend, future):
        throttle.hold(computing(backend))
        time.sleep(hold_s)
        throttle.release()
        r, elapsed = future.result(timeout=120)
    assert r.has_verdict and r.score == 1.0 and r.passed, r
    assert elapsed > CALL_S, elapsed  # past its limit on the clock
    assert (r.evidence.solution_cpu_ms or 0.0) < CALL_S * 1000.0, r.evidence


@needs_throttle
@pytest.mark.parametrize("kind", ["function", "script"])
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_right_answer_held_back_past_the_backstop_has_no_verdict(
    sandbox: str, kind: str, throttle: Throttle
) -> None:
    """Held back until the backstop passes: the host's failure, no verdict (``timeout``), never
    the answer's 0; the run ends by the host's own wall limit."""
    with running(sandbox, ENVS[kind], RIGHT[kind]) as (backend, future):
        throttle.hold(computing(backend))
        r, elapsed = future.result(timeout=120)
    assert held_back(r), r
    assert BACKSTOP * CALL_S <= elapsed < BACKSTOP * ENVS[kind].timeout + START_GRACE_S, elapsed


@needs_throttle
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_an_answer_that_lowers_its_own_priority_is_not_held_back(
    sandbox: str, throttle: Throttle
) -> None:
    """A spin at nice 19 on a host with too much to run gets next to no CPU by its own choice:
    past its limit on the clock that is its wait, its 0 (not a run without a verdict)."""
    spin = "import os\ndef add(a, b):\n    os.nice(19)\n    while True:\n        pass\n"
    with running(sandbox, ADD, spin) as (backend, future):
        throttle.hold(computing(backend, min_ms=50.0))
        r, _ = future.result(timeout=120)
    assert r.has_verdict and r.score == 0.0, r
    assert r.cases[0].message.startswith(f"timeout: the call waited past its {CALL_S:g} s"), r


# -- a host without a cgroup per run -------------------------------------------------------------
@pytest.fixture
def no_cgroup(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No group per run: ``DEEPGYM_CGROUP`` names a folder that is not cgroup v2 (rlimits)."""
    monkeypatch.setenv(cgroups.V2_ENV, str(tmp_path))
    cgroups.v1_controllers.cache_clear()
    cgroups.v2_base.cache_clear()
    try:
        yield
    finally:
        cgroups.v1_controllers.cache_clear()
        cgroups.v2_base.cache_clear()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_without_a_cgroup_the_time_is_the_solution_processes_own(
    sandbox: str, no_cgroup: None
) -> None:
    """The same rule on the solution process's own CPU clock and its tree in ``/proc``."""
    with DeepGym(sandbox=sandbox) as dg:
        sleep = dg.run_one(ADD, "import time\ndef add(a, b):\n    time.sleep(1000)\n")
        spin = dg.run_one(ADD, "def add(a, b):\n    while True:\n        pass\n")
        right = dg.run_one(ADD, RIGHT["function"])
    for r in (sleep, spin, right):
        assert r.evidence.limit_mechanism["time"] == "proc", r.evidence
    assert sleep.has_verdict and sleep.score == 0.0, sleep
    assert sleep.cases[0].message.startswith(f"timeout: the call waited past its {CALL_S:g} s")
    if not held_back(spin):
        assert spin.has_verdict and spin.score == 0.0, spin
        assert spin.cases[0].message == f"timeout: the call used its {CALL_S:g} s of CPU time"
    assert right.has_verdict and right.score == 1.0, right
