"""Ctrl-C and SIGTERM stop a command cleanly: one line, exit 130, every sandbox ended, and what
was recorded kept (the run marked stopped, ``--resume`` finishes it). The same for a Python
program using ``DeepGym``: an interrupt leaves no task, loop or process of deepgym's behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepgym import load_suite
from deepgym.store import RunStore
from tests.procs import sigint_as_a_terminal_has_it

pytestmark = pytest.mark.sandbox

NOISE = ("Traceback", "Task was destroyed", "Event loop is closed", "aclose()", "Exception ignored")
SLOW = "import time\ntime.sleep(0.25)\n"
"""Put first in every answer: a run takes a quarter second, so a batch is still going when the
test interrupts it."""


def _answers(tmp_path: Path, n: int) -> tuple[Path, list[str]]:
    envs = load_suite("humaneval")[:n]
    answers = {e.name: SLOW + (e.reference_solution or "") for e in envs}
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    return path, [e.name for e in envs]


def _leftovers(marker: str) -> list[str]:
    """Command lines of live processes that name ``marker`` (the command's temp dir)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(cmd)
    return found


def _recorded(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(store, timeout=5)) as db, db:
            return int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.Error:
        return 0


def _interrupt(args: list[str], tmp_path: Path, sig: int) -> tuple[int, str, Path]:
    """Run ``deepgym ARGS`` until it has stored a few results, send ``sig`` to its process
    group (what a terminal's Ctrl-C does), and return its exit code, stderr and store."""
    store = tmp_path / "runs.sqlite"
    work = tmp_path / "tmp"
    work.mkdir()
    env = {**os.environ, "TMPDIR": str(work), "DEEPGYM_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym", *args, "--store", str(store), "--max-parallel", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        text=True,
        preexec_fn=sigint_as_a_terminal_has_it,
    )
    try:
        deadline = time.monotonic() + 60
        while _recorded(store) < 4:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "nothing was recorded in a minute"
            time.sleep(0.05)
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + 10
    while (left := _leftovers(str(work))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left behind: {left}"
    assert list(work.iterdir()) == [], "the command's temporary files were left behind"
    return proc.returncode, err, store


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_eval_says_what_it_kept_and_resumes(tmp_path: Path, sig: int) -> None:
    answers, names = _answers(tmp_path, 40)
    code, err, store = _interrupt(["eval", "humaneval", "--answers", str(answers)], tmp_path, sig)
    assert code == 130, err
    assert not any(noise in err for noise in NOISE), err
    lines = err.strip().splitlines()
    assert lines[0].startswith("note: ") and lines[1].startswith("run ")  # before it started
    assert len(lines) == 3, err  # then one line, and only one
    with RunStore(store) as s:
        (info,) = s.runs()
    assert info.status == "stopped" and 4 <= info.recorded < info.total == 164
    assert lines[2] == (
        f"interrupted: {info.recorded} of 164 results stored in run {info.id}; "
        f"to finish it: deepgym eval --resume {info.id}"
    )
    done = subprocess.run(
        [sys.executable, "-m", "deepgym", "eval", "--resume", info.id, "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DEEPGYM_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    with RunStore(store) as s:
        after = s.run(info.id)
        results = s.results(info.id)
    assert after.status == "complete" and after.recorded == 164
    assert all(results[i].passed for i in range(len(names)))  # the references all pass


def test_an_interrupted_batch_says_what_it_kept(tmp_path: Path) -> None:
    env = load_suite("humaneval")[0]
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(SLOW + (env.reference_solution or "")) for _ in range(40)))
    code, err, store = _interrupt(["run-batch", "humaneval/0", str(path)], tmp_path, signal.SIGINT)
    assert code == 130 and not any(noise in err for noise in NOISE), err
    with RunStore(store) as s:
        (info,) = s.runs()
    assert info.status == "stopped"
    assert err.strip().splitlines()[-1] == (
        f"interrupted: {info.recorded} of 40 results stored in run {info.id}; "
        "to see it: deepgym runs"
    )


PROGRAM = textwrap.dedent(
    """
    import os, signal, sys, threading
    from deepgym import DeepGym, load_environment

    env = load_environment("humaneval/0")
    slow = "import time\\ntime.sleep(0.25)\\n" + env.reference_solution
    threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    dg = DeepGym()
    try:
        dg.run_batch(env, [slow] * 200, max_parallel=2)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    {close}
    """
)


@pytest.mark.parametrize("close", ["dg.close()", "pass"], ids=["closed", "left-to-exit"])
def test_keyboard_interrupt_in_a_program_leaves_nothing_behind(tmp_path: Path, close: str) -> None:
    work = tmp_path / "tmp"
    work.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(close=close)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(work)},
        preexec_fn=sigint_as_a_terminal_has_it,
    )
    assert out.returncode == 0 and out.stdout == "stopped\n", out.stderr
    assert out.stderr == ""
    assert _leftovers(str(work)) == [] and list(work.iterdir()) == []
