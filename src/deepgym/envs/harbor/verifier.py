"""The final verifier of an imported Harbor task: run its ``tests/test.sh``, read its reward.

``deepgym.envs.harbor.import_task`` copies this file into each imported task's folder as
``verifier.py``; the session's final verifier sandbox runs ``verify(work, tests)`` over a copy of
the agent's work dir. Standard library only (it runs there, outside the deepgym package).

``tests`` holds ``harbor.json`` (the test script's name, its ``timeout`` in seconds and its
environment variables) and ``harbor/``, the task's ``tests/`` with Harbor's paths rewritten to
``/tmp/harbor/...``. ``verify`` copies ``harbor/`` to ``/tmp/harbor/tests``, makes a fresh
``/tmp/harbor/logs/verifier``, runs ``bash /tmp/harbor/tests/test.sh`` in the work dir (its
output in ``test-stdout.txt`` there, as Harbor keeps it), then reads the reward as Harbor does:
``reward.json`` first (its ``reward``, the other numbers as reward components; several named
scores and no ``reward``: their mean, each a reward component), else ``reward.txt`` (one
number). A task whose format names a parser (``harbor.json``'s ``parser``:
terminal-bench's ``pytest``) is scored by its test results instead: pytest's short test
summary, one case a test, 1.0 when the script exited 0 and at least one test ran and none
failed. A task on its image
(``workdir``) has the image's WORKDIR made a link to the work dir first, as its session had.

Verdicts, by the reward contract: the test script is started before anything reads the agent's
work, and starting it is the instant the work comes into play, so every failure from then on is
the agent's 0, never a missing verdict (a policy must not learn to break the tests to be masked):

- no reward file, an unreadable one, or a reward that is not a finite number in [0, 1]:
  ``solution_error``, a judged 0 (a crashed or misused verifier after the work came into play);
- the test script past its ``timeout``: its process group is killed, ``solution_timeout``, 0;
- a set-up failure before the script starts (``harbor.json`` missing): raised, so the session
  records no verdict (``verifier_error``).

Threat model: the agent's sandbox ended before this one started, and its ``/tmp`` with it; here
the reward folder is made fresh, so nothing the agent left can stand as a reward. What the test
script runs of the agent's (its programs, under test) runs as this process's user and could
write the reward folder, as in Harbor's own container; deepgym's own verifiers keep their verdict
on a pipe that nothing they start holds.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

ROOT = Path("/tmp/harbor")
"""Where Harbor's fixed paths (/tests, /logs, /solution) live in the sandbox."""
OUTPUT_TAIL = 1500
"""Characters of the test script's output kept in the result's case message."""


def link_workdir(workdir: str, work: Path) -> None:
    """The image's ``workdir`` (``/app``) made a link to ``work``, as in the agent's session:
    a path the import's rewrite could not see still reaches the agent's work."""
    path = Path(workdir)
    if path == work or not path.is_absolute():
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        for folder, dirs, _ in os.walk(path):  # read-only folders, as the image copied them
            for sub in [folder, *(os.path.join(folder, d) for d in dirs)]:
                os.chmod(sub, os.lstat(sub).st_mode | 0o700)
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(work)


def _copy_in(source: Path, target: Path) -> None:
    """``source``'s files into ``target``, replacing those of the same name, each folder and
    file left writable by its owner (the task's files may be read-only)."""
    for folder, _, names in os.walk(source):
        into = target / Path(folder).relative_to(source)
        into.mkdir(parents=True, exist_ok=True)
        into.chmod(0o755)
        for name in names:
            dest = into / name
            if dest.exists() or dest.is_symlink():
                dest.unlink()
            shutil.copy2(os.path.join(folder, name), dest, follow_symlinks=False)
            if not dest.is_symlink():
                dest.chmod(dest.stat().st_mode | 0o600)


def verify(work: Path, tests: Path) -> dict[str, Any]:
    """Run the task's test script over ``work``; Harbor's reward as this session's score."""
    config = json.loads((tests / "harbor.json").read_text())
    stage = os.environ.get("DEEPGYM_STAGE")
    if stage is not None:  # a step of a multi-step task: its own script, limit and variables
        config = {**config, **config["stages"][stage]}
    if config.get("workdir"):
        link_workdir(str(config["workdir"]), work)
    shutil.rmtree(ROOT, ignore_errors=True)
    (ROOT / "tests").mkdir(parents=True)
    if (tests / "harbor").is_dir():
        _copy_in(tests / "harbor", ROOT / "tests")
    if stage is not None and (tests / "harbor-stages" / stage).is_dir():  # its files win
        _copy_in(tests / "harbor-stages" / stage, ROOT / "tests")
    logs = ROOT / "logs" / "verifier"
    for name in ("agent", "verifier", "artifacts"):
        (ROOT / "logs" / name).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{str(k): str(v) for k, v in config.get("env", {}).items()}}
    timeout = float(config["timeout"])
    output = logs / "test-stdout.txt"
    with open(output, "wb") as out:
        proc = subprocess.Popen(  # the agent's work comes into play here
            ["bash", str(ROOT / "tests" / config["script"])],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        fired = threading.Event()

        def kill() -> None:
            fired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            proc.wait()  # a blocking wait: the timer ends the script at its limit
        finally:
            timer.cancel()
    text = output.read_text(errors="replace")
    tail = text[-OUTPUT_TAIL:]
    script = f"tests/{config['script']}"
    if fired.is_set():
        report: dict[str, Any] = {
            "status": "solution_timeout",
            "score": 0.0,
            "message": f"{script} ran past its timeout of {timeout:g} s",
        }
    elif config.get("parser") == "pytest":
        return parsed_report(parse_pytest(text), script, tail, proc.returncode)
    else:
        report = read_reward(logs)
    report["cases"] = [{"name": script, "passed": report.get("score") == 1.0, "message": tail}]
    return report


PYTEST_STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
"""The statuses of pytest's short test summary; PASSED passes, FAILED and ERROR fail, the rest
are shown and not counted."""


def parse_pytest(output: str) -> list[tuple[str, str]] | None:
    """``(status, test)`` for each line of pytest's short test summary in ``output`` (after
    the last line that says ``short test summary info``), or None without such a line."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if "short test summary info" in line]
    if not starts:
        return None
    out = []
    for line in lines[starts[-1] + 1 :]:
        status, _, rest = line.strip().partition(" ")
        if status in PYTEST_STATUSES and rest.strip():
            out.append((status, rest.strip().split(" - ", 1)[0]))
    return out


def parsed_report(
    results: list[tuple[str, str]] | None, script: str, tail: str, exit_code: int = 0
) -> dict[str, Any]:
    """The report of a task scored by its tests' results (terminal-bench's parser): 1.0 when
    the script exited 0 and at least one test ran and every one that counts passed, else 0,
    one case a test. Stricter than terminal-bench, which reads the summary alone: a summary
    the answer's own code printed, before it killed the script, is no pass."""
    if results is None:
        return {
            "status": "solution_error",
            "score": 0.0,
            "message": f"{script}: no pytest short test summary in its output",
            "cases": [{"name": script, "passed": False, "message": tail}],
        }
    counted = [(s, name) for s, name in results if s in ("PASSED", "FAILED", "ERROR")]
    passed = bool(counted) and all(s == "PASSED" for s, _ in counted) and exit_code == 0
    cases = [{"name": name, "passed": s == "PASSED", "message": s} for s, name in results]
    why = "" if counted else f"{script}: its summary lists no test that passed or failed; "
    if exit_code != 0:
        why += f"{script} exited {exit_code}; "
    message = "" if passed else why + tail
    return {"status": "ok", "score": 1.0 if passed else 0.0, "message": message, "cases": cases}


def _malformed(why: str) -> dict[str, Any]:
    return {"status": "solution_error", "score": 0.0, "message": f"tests/test.sh: {why}"}


def _scored(value: Any, what: str, components: dict[str, float]) -> dict[str, Any]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _malformed(f"{what} is {value!r}, not a number")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return _malformed(f"{what} is {value!r}, not a finite number in [0, 1]")
    return {"status": "ok", "score": float(value), "reward_components": components}


def read_reward(verifier_dir: Path) -> dict[str, Any]:
    """Harbor's reward in ``verifier_dir`` as a verifier's report: ``reward.json``'s ``reward``
    (its other numbers as reward components), else ``reward.txt``'s number; a missing or
    malformed reward is a ``solution_error`` report with a score of 0."""
    as_json, as_text = verifier_dir / "reward.json", verifier_dir / "reward.txt"
    components: dict[str, float] = {}
    if as_json.is_file():
        try:
            data = json.loads(as_json.read_text())
        except (ValueError, UnicodeDecodeError):
            return _malformed("reward.json is not JSON")
        if not isinstance(data, dict):
            return _malformed("reward.json is not a JSON object")
        components = {
            str(k): float(v)
            for k, v in data.items()
            if k != "reward"
            and isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
        }
        if "reward" in data:
            return _scored(data["reward"], "reward.json's reward", components)
        if not as_text.is_file():
            if not components or len(components) != sum(k != "reward" for k in data):
                return _malformed("reward.json has no 'reward' and is not all named numbers")
            # several named scores and no total: their mean, Harbor's rule for several rewards
            mean = sum(components.values()) / len(components)
            return _scored(mean, "reward.json's mean", components)
    if as_text.is_file():
        text = as_text.read_text(errors="replace").strip()
        try:
            value = float(text)
        except ValueError:
            return _malformed(f"reward.txt holds {text[:40]!r}, not a number")
        return _scored(value, "reward.txt", components)
    return _malformed("wrote no reward (no /logs/verifier/reward.txt or reward.json)")
