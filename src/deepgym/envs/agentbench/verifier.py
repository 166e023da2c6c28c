"""The final verifier of an AgentBench OS task: its evaluation, as AgentBench scores it.

``deepgym.envs.agentbench`` makes each task a session environment whose ``verifier_path`` is
this file and whose hidden tests are ``task.json`` (the task's record, its paths moved to the
work dir) and the check and example scripts it names. Standard library only: it runs in the
final verifier's sandbox, on the tasks' image, as root, outside the deepgym package.

The agent's answer is the text of ``/work/answer.txt``, surrounding white space removed.
``task.json``'s ``evaluation``:

- ``match``: the answer equals the expected string (as AgentBench compares them);
- ``check`` as ``[null, {"language": "python", "file": SCRIPT}, ...]``: AgentBench's comparison
  by script: ``null`` adds the expected answer (``match``, else what the task's ``example``
  prints), a script is run as ``python3 SCRIPT answer expected ...`` and must exit 0 (its
  output, if any, is added for the next);
- ``check`` as a script file, ``{"code": ...}`` or ``[COMMAND]``: a check of the state the
  agent left, run in the work dir: exit 0 passes.

The expected answer is what the task's ``example`` prints in the work dir the agent left (its
answer file taken out), as AgentBench computes it after the agent. What the task's ``init`` (and
``start``) set up outside the work dir is made again first, in a scratch folder standing for
the work dir; what the agent changed outside the work dir is not there (the final verifier sees
the work dir on the image as built), which decides the tasks whose state lies there. The answer
is read first, so every failure after, the init's and the example's included, is the agent's
0 by the session rule: a task whose init or example fails here fails its reference too, which
``deepgym check`` reports.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

WORK = "/work"
SCRATCH = Path("/tmp/agentbench-init")
"""Where the verifier re-creates the task's initial state to compute the expected answer."""
STEP_S = 120.0
"""The most seconds one init, example or check may run."""
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _env(home: str) -> dict[str, str]:
    path = f"{home}/local/bin:{home}/bin:{home}:{PATH}"  # /usr's folders, moved to the home
    return {**os.environ, "HOME": home, "PATH": path, "LANG": "C.UTF-8"}


def _bash(code: str, cwd: Path, home: str) -> subprocess.CompletedProcess[str]:
    """``code`` in bash in ``cwd``, in a process group of its own, ended at ``STEP_S``; its
    output through files, so a background process it leaves (an init's) does not hold it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            ["bash", "-c", code],
            cwd=cwd,
            env=_env(home),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            code_ = proc.wait(timeout=STEP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code_ = -9
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return subprocess.CompletedProcess(proc.args, code_, text[0], text[1])


def _moved(text: str) -> str:
    """``text`` with the work dir's path moved to the scratch folder."""
    return text.replace(WORK, str(SCRATCH))


def _initial_state(task: dict[str, Any]) -> None:
    """The task's init and start, in a fresh scratch folder standing for the work dir (so
    what they set up outside it is there again); ``RuntimeError`` when one fails."""
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    for folder in task.get("dirs", []):
        (SCRATCH / folder).mkdir(parents=True, exist_ok=True)
    for code in task.get("init", []):
        done = _bash(_moved(code), SCRATCH, str(SCRATCH))
        if done.returncode != 0:
            raise RuntimeError(f"the task's init failed ({done.returncode}): {done.stderr[-500:]}")
    if task.get("start"):
        _bash(_moved(task["start"]) + " >/dev/null 2>&1 &", SCRATCH, str(SCRATCH))


def _example_answer(task: dict[str, Any], tests: Path, work: Path) -> str:
    """What the task's example prints in the work dir the agent left, as AgentBench computes
    the expected answer after the agent (what the init set up outside the work dir made
    again first: ``_initial_state``)."""
    _initial_state(task)
    example = task["example"]
    code = f"bash {tests / example['file']}" if "file" in example else example["code"]
    done = _bash(code, work, WORK)
    if done.returncode != 0:
        raise RuntimeError(f"the task's example failed ({done.returncode}): {done.stderr[-500:]}")
    return done.stdout.strip()


def _compare(check: list[Any], answer: str, expected: str | None, tests: Path) -> tuple[bool, str]:
    params = [answer]
    for item in check:
        if item is None:
            if expected is None:
                return False, "no expected answer"
            params.append(expected)
        elif isinstance(item, dict) and "file" in item:
            done = subprocess.run(
                ["python3", str(tests / item["file"]), *params],
                capture_output=True,
                text=True,
                timeout=STEP_S,
                env=_env(WORK),
            )
            if done.returncode != 0:
                return False, f"{item['file']} {params!r}: exit {done.returncode}"
            if done.stdout.strip():
                params.append(done.stdout.strip())
    return True, f"{params!r}"


def _state_check(task: dict[str, Any], tests: Path, work: Path) -> tuple[bool, str]:
    check = task["evaluation"]["check"]
    if isinstance(check, dict) and "file" in check:
        code = f"bash {tests / check['file']}"
    elif isinstance(check, dict):
        code = check["code"]
    else:
        code = check[0]
    done = _bash(code, work, WORK)
    return done.returncode == 0, f"exit {done.returncode}: {(done.stdout + done.stderr)[-500:]}"


def verify(work: Path, tests: Path) -> dict[str, Any]:
    """The task's evaluation over the agent's work dir and answer."""
    task = json.loads((tests / "task.json").read_text())
    evaluation = task["evaluation"]
    kind = task["kind"]
    answer_file = work / "answer.txt"  # the agent's work comes into play from here
    answer = answer_file.read_text(errors="replace").strip() if answer_file.is_file() else None
    answer_file.unlink(missing_ok=True)  # not a file of the state the example reads
    expected: str | None = None
    if kind == "answer":
        expected = str(evaluation["match"]) if "match" in evaluation else None
        if expected is None:
            expected = _example_answer(task, tests, work)
    else:
        _initial_state(task)
    if kind == "state":
        passed, why = _state_check(task, tests, work)
    elif answer is None:
        passed, why = False, "no answer: /work/answer.txt is missing"
    elif "match" in evaluation and "check" not in evaluation:
        passed, why = answer == expected, f"answer {answer!r}, expected {expected!r}"
    else:
        passed, why = _compare(evaluation["check"], answer, expected, tests)
    return {
        "score": 1.0 if passed else 0.0,
        "cases": [{"name": task["name"], "passed": passed, "message": why}],
    }
