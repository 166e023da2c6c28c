"""The CPU-time rule of a time limit (``judge.blame.cpu_time_check``), and the tree it reads."""

from __future__ import annotations

import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from deepgym.judge.blame import (
    BACKSTOP,
    MIN_WAIT_MS,
    OVER,
    STARVED,
    WAIT,
    WAITING,
    cpu_time_check,
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
    assert runnable(["S", "R"]) and runnable(["D"])
    assert not runnable(["S", "Z", "T"]) and not runnable([])


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
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    with proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            cpu_ms, states = read_tree(proc.pid)
            assert cpu_ms >= 250.0  # the reaped child's 0.3 s
            deadline = time.monotonic() + 10.0  # from its print to its read, it may still run
            while runnable(states) and time.monotonic() < deadline:
                time.sleep(0.01)
                states = read_tree(proc.pid)[1]
            assert states and not runnable(states)  # the root waits on its stdin
        finally:
            proc.kill()


def test_read_tree_sees_every_threads_state() -> None:
    """A process whose first thread waits while another computes (a JVM, rustc, Go) is
    runnable: its own state in ``/proc/<pid>/stat`` is only its first thread's."""
    busy = (
        "import sys, threading\n"
        "def spin():\n    while True:\n        pass\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", busy], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
            _, states = read_tree(proc.pid)
            assert len(states) >= 2 and runnable(states), states
        finally:
            proc.kill()
