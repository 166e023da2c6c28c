"""``deepgym session ENV``: a person plays the agent. Through click's runner (lines on stdin) and
in a real terminal under tmux (keys typed, the screen read back). And how ``session``,
``episode`` and ``episodes ID`` show a verdict: each case with the verifier's message, and
``run``'s exit codes."""

from __future__ import annotations

import json
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

VERIFIER = """from pathlib import Path


def verify(work, tests):
    answer = Path(work, "answer.txt")
    text = answer.read_text().strip() if answer.is_file() else ""
    ok = text == "42"
    message = "" if ok else f"answer.txt holds {text!r}, expected '42'"
    return {"score": float(ok), "passed": ok, "cases": [
        {"name": "case_1", "passed": ok, "message": message},
    ]}
"""


def session_env(folder: Path, verifier: str = VERIFIER) -> str:
    """A session environment folder whose verifier explains its failed case."""
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps({"kind": "session", "max_steps": 5}))
    (folder / "task.md").write_text("Write 42 to answer.txt.\n")
    (folder / "verifier.py").write_text(verifier)
    (folder / "reference_agent.json").write_text(
        json.dumps([{"tool": "bash", "command": "echo 42 > answer.txt"}])
    )
    return str(folder)


def wrong_agent(obs: object) -> dict[str, str]:
    """An agent for ``deepgym episode --agent``: it writes the wrong answer, then stops."""
    if getattr(obs, "step", 0) == 0:
        return {"tool": "bash", "command": "echo 41 > answer.txt"}
    return {"tool": "done"}


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


def test_a_failed_verdict_shows_the_case_message_and_exits_1(tmp_path: Path) -> None:
    env = session_env(tmp_path / "answer42")
    r = CliRunner(env={"COLUMNS": "160"}).invoke(
        cli, ["session", env], input="echo 41 > answer.txt\nscore\n"
    )
    assert r.exit_code == 1, r.output
    assert "--- verdict: 0.000" in r.output
    assert "case_1" in r.output and "answer.txt holds '41', expected '42'" in r.output


def test_no_verdict_exits_3_and_says_why(tmp_path: Path) -> None:
    broken = "def verify(work, tests):\n    raise RuntimeError('the verifier broke')\n"
    env = session_env(tmp_path / "broken", broken)
    r = CliRunner(env={"COLUMNS": "160"}).invoke(cli, ["session", env], input="score\n")
    assert r.exit_code == 3, r.output
    assert "--- verdict: no verdict (verifier_error)" in r.output
    assert "the verifier broke" in r.output


def test_episode_and_episodes_show_the_case_message(tmp_path: Path) -> None:
    env = session_env(tmp_path / "answer42")
    store = str(tmp_path / "s.db")
    runner = CliRunner(env={"COLUMNS": "160"})
    agent = "tests.cli.test_session_cmd:wrong_agent"
    r = runner.invoke(cli, ["episode", env, "--agent", agent, "--store", store])
    assert r.exit_code == 1, r.output  # judged, and not passed: as ``run``
    assert "answer.txt holds '41', expected '42'" in r.output
    r = runner.invoke(cli, ["episode", env, "--store", store])  # the reference agent
    assert r.exit_code == 0, r.output
    assert "--- verdict: 1.000 passed" in r.output
    r = runner.invoke(cli, ["episodes", "--store", store, "--json"])
    failed = json.loads(r.output)[-1]["id"]  # newest first
    r = runner.invoke(cli, ["episodes", failed, "--store", store])
    assert r.exit_code == 0, r.output  # showing a stored episode is not a verdict of its own
    assert "--- verdict: 0.000" in r.output and "tests (0/1 passed)" in r.output
    assert "answer.txt holds '41', expected '42'" in r.output
