"""The CPU-time rule of a time limit (``judge.blame.cpu_time_check``), one limit as it counts
(``Limit``), and the evidence it reads: a cgroup's counter, a process's CPU clock, the tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from deepgym.judge.blame import (
    BACKSTOP,
    LOWERED,
    MIN_WAIT_MS,
    OVER,
    STARVED,
    WAIT,
    WAITING,
    Limit,
    counter_ms,
    cpu_time_check,
    process_cpu_ms,
    read_tree,
    runnable,
)

ms = st.floats(min_value=0.0, max_value=1e7, allow_nan=False)
limits = st.floats(min_value=1.0, max_value=1e6, allow_nan=False)


@given(used=ms, limit=limits, elapsed=ms, run=st.booleans(), cpus=st.integers(1, 256))
def test_the_rule_is_total_and_waits_are_bounded(
    used: float, limit: float, elapsed: float, run: bool, cpus: int
) -> None:
    what, wait = cpu_time_check(used, limit, elapsed, run, cpus)
    assert what in (OVER, WAITING, STARVED, WAIT)
    if what != WAIT:
        assert wait == 0.0
        return
    assert used < limit and elapsed < BACKSTOP * limit
    # never past the backstop, and at least a tick unless the backstop is nearer
    assert 0.0 < wait <= BACKSTOP * limit - elapsed + 1e-6
    assert wait >= min(MIN_WAIT_MS, BACKSTOP * limit - elapsed) - 1e-6


@given(used=ms, limit=limits, elapsed=ms, run=st.booleans(), cpus=st.integers(1, 256))
def test_only_cpu_time_or_a_chosen_wait_is_the_answers(
    used: float, limit: float, elapsed: float, run: bool, cpus: int
) -> None:
    what, _ = cpu_time_check(used, limit, elapsed, run, cpus)
    if what == OVER:
        assert used >= limit
    if what == WAITING:  # it slept past the limit: never while it could still run
        assert not run and elapsed >= limit
    if what == STARVED:  # the host held a runnable answer back: never one that used its time
        assert used < limit and elapsed >= BACKSTOP * limit


def test_a_loaded_host_never_times_out_an_answer_within_its_cpu_time() -> None:
    # a tenth of a core for the whole backstop: waits, then no verdict, never the answer's
    limit = 1000.0
    elapsed, used = 0.0, 0.0
    while True:
        what, wait = cpu_time_check(used, limit, elapsed, True, 2)
        if what != WAIT:
            break
        elapsed += wait
        used = elapsed * 0.1
    assert what == STARVED and elapsed == BACKSTOP * limit


def test_an_endless_loop_is_caught_at_its_limit_on_an_idle_host() -> None:
    assert cpu_time_check(1000.0, 1000.0, 1001.0, True, 2) == (OVER, 0.0)
    # half a core: the limit is reached at twice the clock, within the backstop
    limit, elapsed = 1000.0, 0.0
    what, wait = cpu_time_check(0.0, limit, 0.0, True, 2)
    while what == WAIT:
        elapsed += wait
        what, wait = cpu_time_check(elapsed * 0.5, limit, elapsed, True, 2)
    assert what == OVER and 2 * limit <= elapsed < BACKSTOP * limit


def test_a_sleeper_is_caught_once_the_limit_passes_on_the_clock() -> None:
    assert cpu_time_check(5.0, 1000.0, 400.0, False, 2) == (WAIT, 497.5)
    assert cpu_time_check(5.0, 1000.0, 1000.0, False, 2) == (WAITING, 0.0)


def test_runnable_states() -> None:
    assert runnable(["S", "R"]) and not runnable(["D"])  # its own wait: vfork, its I/O
    assert not runnable(["S", "Z", "T"]) and not runnable([])


@given(
    limit=limits,
    cpu0=ms,
    used=ms,
    t0=st.floats(min_value=0.0, max_value=1e6),
    elapsed=ms,
    run=st.booleans(),
    cpus=st.integers(1, 64),
)
def test_a_limit_applies_the_rule_from_its_start(
    limit: float, cpu0: float, used: float, t0: float, elapsed: float, run: bool, cpus: int
) -> None:
    lim = Limit(limit, cpu0, t0, cpus)
    now = t0 + elapsed / 1000.0
    what = lim.check(cpu0 + used, now, run)
    counted = (cpu0 + used) - cpu0  # what the counter says, to the float
    want, wait = cpu_time_check(counted, limit, lim.elapsed_ms(now), run, cpus)
    assert what == want
    assert lim.due == now + wait / 1000.0  # the next check, or now when the rule decided
    assert lim.needs_states(now) == (lim.elapsed_ms(now) >= limit)


def test_a_limit_moved_back_carries_what_earlier_spans_used() -> None:
    # the run's limit over calls: 600 ms of CPU time and 900 ms on the clock already spent
    run = Limit(1000.0, cpu0=5000.0 - 600.0, t0=100.0 - 0.9, cpus=1)
    assert run.check(5000.0 + 399.0, 100.05) == WAIT
    assert run.check(5000.0 + 400.0, 100.06) == OVER


def test_a_cgroup_counter_is_read_in_ms_from_either_version(tmp_path: Path) -> None:
    v1 = tmp_path / "cpuacct.usage"
    v1.write_text("1234567890\n")  # nanoseconds
    v2 = tmp_path / "cpu.stat"
    v2.write_text("usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
    for path, want in ((v1, 1234.56789), (v2, 2.5)):
        fd = os.open(path, os.O_RDONLY)
        try:
            assert abs(counter_ms(fd) - want) < 1e-6
        finally:
            os.close(fd)


@contextmanager
def _child(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A Python child running ``code``, which prints ``ready`` once set; killed after."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    with proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            yield proc
        finally:
            proc.kill()


def _settled(pid: int, ok: Callable[[list[str]], bool]) -> tuple[float, list[str]]:
    """``read_tree(pid)`` once its threads' states satisfy ``ok`` (a process that just printed
    may still be on its way to the read it blocks in; threads hand a lock over), within a few
    seconds."""
    deadline = time.monotonic() + 10.0
    while True:
        cpu_ms, states = read_tree(pid)
        if ok(states) or time.monotonic() > deadline:
            return cpu_ms, states
        time.sleep(0.01)


def test_read_tree_counts_reaped_children_and_the_roots_state() -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.3: pass\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "print('ready', flush=True)\n"
        "input()\n"
    )
    with _child(code) as proc:
        cpu_ms, states = _settled(proc.pid, lambda states: not runnable(states))
        assert cpu_ms >= 250.0  # the reaped child's 0.3 s
        assert states and not runnable(states)  # the root waits on its stdin


SPIN_THREAD = (
    "import threading\n"
    "def spin():\n"
    "    while True: pass\n"
    "{before}"
    "threading.Thread(target=spin, daemon=True).start()\n"
    "print('ready', flush=True)\n"
    "input()\n"
)


def test_each_threads_state_counts_a_main_thread_waiting_on_a_busy_one_is_runnable() -> None:
    with _child(SPIN_THREAD.format(before="")) as proc:
        _, states = _settled(proc.pid, lambda states: sorted(states) == ["R", "S"])
        assert sorted(states) == ["R", "S"], states  # the spinner, and the main thread
        assert runnable(states)
        assert process_cpu_ms(proc.pid) > 0.0  # its CPU clock counts every thread


def test_a_thread_that_lowered_its_own_priority_is_not_held_back_by_the_host() -> None:
    # A runnable thread at a nicer priority than the judge's, or SCHED_IDLE: on a busy host it
    # gets next to no CPU by its own choice. It must not read as "held back": its timeout.
    for before in (
        "import os\nos.nice(19)\n",
        "import os\nos.sched_setscheduler(0, 5, os.sched_param(0))\n",
    ):
        with _child(SPIN_THREAD.format(before=before)) as proc:
            _, states = _settled(proc.pid, lambda s: LOWERED in s and not runnable(s))
            assert LOWERED in states and not runnable(states), states


def test_a_process_cpu_clock_is_a_system_call_and_ends_with_the_process() -> None:
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\n"
    with _child(spin + "print('ready', flush=True)\ninput()\n") as proc:
        assert process_cpu_ms(proc.pid) >= 190.0
        proc.kill()
        proc.wait()
        try:
            process_cpu_ms(proc.pid)
        except OSError:
            pass
        else:  # pragma: no cover - reaped: the clock is gone (EINVAL)
            raise AssertionError("a reaped process still has a CPU clock")
