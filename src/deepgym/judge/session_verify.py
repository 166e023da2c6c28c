"""A session's final verifier, in a fresh sandbox of its own after the agent's phase.

``python -I -S _boot.py session_verify RESULT_FD [step]`` copies the snapshot of the agent's
work dir (``/snapshot``, read-only) to ``/work`` (writable, so tests may write caches), loads the
environment's ``verifier.py`` from ``/judge/env`` and calls ``verify(work, tests)`` with ``work``
the work dir and ``tests`` the hidden tests (``/judge/env/tests``: never in the agent's sandbox);
with ``step``, ``step_verifier.py``'s ``verify_step(work, tests)`` (a per-step reward).

The verdict leaves on ``RESULT_FD``, a pipe only this process holds (not inherited by anything
it starts, and the process is non-dumpable: the agent's code, if the verifier runs it, cannot
reach it), as JSON lines in the function task's judge's form (``harness``), read by the same
host code (``deepgym.sandbox.fresh.collect``, ``evidence.read_run``): ``{"event": "in_play",
...}`` once, the instant the agent's output comes into play, which is the verifier's first touch
of the work dir (an open, a listing, a change of directory into it: ``by`` is
``work_dir_read``; or a process started: ``process_started``), then ``{"event": "report", ...}``.
A failure before the first is ours; after it, the agent's.

What ``verify`` returns becomes the report by the rule a function task's verifier follows
(``report.report_from_value``): a bool, a number, or a dict of ``score``, ``passed``, ``cases``,
``reward_components``, ``message``, and a ``status`` that is ``ok`` or the agent's failure
(``solution_error``, ``solution_timeout``, ...). No other status is taken: a returned value cannot
turn the agent's failure into no verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from . import isolate
from .codes import REPORT_MAX_BYTES
from .report import fit, report_from_value

WORK = "/work"
SNAPSHOT = "/snapshot"
ENV = "/judge/env"


class _Marker:
    """Writes the in-play event once, at the verifier's first touch of the work dir."""

    def __init__(self, fd: int, t0: float) -> None:
        self.fd = fd
        self.t0 = t0
        self.done = False

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.done:
            return
        if event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.system"):
            self._mark("process_started")
        elif event in ("open", "os.listdir", "os.scandir", "os.chdir") and args:
            path = args[0]
            if isinstance(path, bytes):
                path = path.decode(errors="replace")
            if isinstance(path, str):
                full = os.path.abspath(path)
                if full == WORK or full.startswith(WORK + "/"):
                    self._mark("work_dir_read")

    def _mark(self, by: str) -> None:
        self.done = True
        ms = (time.monotonic() - self.t0) * 1000.0
        try:
            _send(self.fd, {"event": "in_play", "in_play_ms": ms, "by": by})
        except OSError:
            pass


def _send(fd: int, event: dict[str, Any]) -> None:
    """One event as one JSON line (``json.dumps`` writes no newline inside one), fitted under
    the line the host reads (``report.fit``)."""
    data = (fit(event, REPORT_MAX_BYTES - 1024, json.dumps) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _report(fd: int, report: dict[str, Any]) -> None:
    _send(fd, {**report, "event": "report"})


def main(argv: list[str]) -> int:
    """Run the verifier once; the exit code says whether a report was written."""
    t0 = time.monotonic()
    report_fd = int(argv[0])
    step = len(argv) > 1 and argv[1] == "step"  # the per-step verifier: verify_step(work, tests)
    source_name, function = "verifier.py", "verify"
    if step:
        source_name, function = "step_verifier.py", "verify_step"
    os.set_inheritable(report_fd, False)
    isolate.dumpable(False)
    marker = _Marker(report_fd, t0)
    try:
        if os.path.isdir(SNAPSHOT):  # the snapshot is capped: copying it is ours to get right
            shutil.copytree(SNAPSHOT, WORK, dirs_exist_ok=True, symlinks=True)
        namespace: dict[str, Any] = {"__name__": "verifier"}
        source = Path(ENV, source_name).read_text()
        code = compile(source, source_name, "exec")
        exec(code, namespace)
        verify = namespace.get(function)
        if not callable(verify):
            raise TypeError(f"{source_name} defines no {function}(work, tests)")
    except BaseException:  # set-up failed: before the agent's work came into play
        _report(report_fd, {"status": "verifier_error", "message": traceback.format_exc()[-3000:]})
        return 2
    sys.addaudithook(marker)
    try:
        report = report_from_value(verify(Path(WORK), Path(ENV, "tests")))
    except BaseException:
        report = {"status": "verifier_error", "message": traceback.format_exc()[-3000:]}
    _report(report_fd, report)
    return 0
