"""``deepgym session ENV``: a person plays the agent. Through click's runner (lines on stdin) and
in a real terminal under tmux (keys typed, the screen read back)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym.cli import cli

pytestmark = pytest.mark.sandbox

FIX = "sed -i 's/a - b/a + b/' calc.py"


def test_lines_run_in_the_shell_and_score_ends_with_the_verdict() -> None:
    r = CliRunner().invoke(
        cli, ["session", "agent/fix_add"], input=f"cat calc.py\n\n{FIX}\nscore\n"
    )
    assert r.exit_code == 0, r.output
    assert "calc.add(a, b)" in r.output  # the task
    assert "return a - b" in r.output and "[exit 0," in r.output
    assert "--- verdict: 1.000 passed" in r.output


def test_exit_or_end_of_input_ends_without_a_verdict() -> None:
    r = CliRunner().invoke(cli, ["session", "agent/fix_add"], input="help\nexit\n")
    assert r.exit_code == 0 and "ended without a verdict" in r.output and "'score'" in r.output
    r = CliRunner().invoke(cli, ["session", "agent/fix_add"], input="ls\n")
    assert r.exit_code == 0 and "ended without a verdict" in r.output
    r = CliRunner().invoke(cli, ["session", "two_sum"])
    assert r.exit_code == 2 and "a session needs a session" in r.output


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_person_plays_the_agent_in_a_terminal(tmp_path: Path) -> None:
    sock = f"deepgym-test-{os.getpid()}"
    tmux = ["tmux", "-L", sock]
    deepgym = Path(sys.executable).parent / "deepgym"
    env = {**os.environ, "DEEPGYM_HOME": str(tmp_path)}
    subprocess.run(
        [
            *tmux,
            "new-session",
            "-d",
            "-s",
            "play",
            "-x",
            "160",
            "-y",
            "50",
            f"{deepgym} session agent/fix_add; echo EXITED=$?; sleep 30",
        ],
        check=True,
        env=env,
        timeout=30,
    )

    def screen() -> str:
        return subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "play", "-S", "-200"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout

    def wait_for(text: str, seconds: float = 30.0) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            shown = screen()
            if text in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed:\n{screen()}")

    try:
        prompt = "deepgym:agent/fix_add$"  # (the pane drops trailing spaces)
        wait_for(prompt)
        for i, keys in enumerate((FIX, "python3 -c 'import calc; print(calc.add(2, 3))'", "score")):
            # One line at a time, each at its prompt, as a person types.
            deadline = time.monotonic() + 30
            while screen().count(prompt) < i + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            subprocess.run(
                [*tmux, "send-keys", "-t", "play", keys, "Enter"], check=True, timeout=10
            )
        shown = wait_for("EXITED=0")
        assert "\n5\n" in shown  # the command's output, on the terminal
        assert "--- verdict: 1.000 passed" in shown
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=10)
