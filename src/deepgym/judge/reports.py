"""A test runner's report as the run's cases: one case per test, as the runner itself reports it.

A test-runner mode (``pytest``, ``junit``, ``go_test``: ``deepgym.languages``) runs the answer's
tests under the language's own runner, which prints each test's outcome on stdout; ``cases``
reads those lines. Pure functions of the runner's output and exit status.

Trust: the runner and the code it tests share one process, as they do wherever these runners
run, so its report is only as trustworthy as the code in it (a test that calls ``os._exit(0)``,
or prints a line that looks like a report's, can change what the runner says). These modes are
for code whose tests come with it (SandboxFusion's ``/run_code``), not for holding an answer
to tests it must not reach. What deepgym adds: the run passes only where the runner exited 0
and reported at least one test, every one of them passed.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_MESSAGE = 500

_PYTEST_LINE = re.compile(
    r"^(?P<id>\S+::\S.*?) (?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: \(.*?\))?"
    r"\s*(?:\[\s*\d+%\])?$"
)
_PYTEST_SUMMARY = re.compile(r"^(?P<outcome>FAILED|ERROR) (?P<id>\S+::\S.*?)(?: - (?P<why>.*))?$")
_PYTEST_PASSING = ("PASSED", "SKIPPED", "XFAIL")
"""pytest's outcomes that do not fail its run (its exit code stays 0)."""

_JUNIT_LINE = re.compile(
    r"^(?P<indent>[│ ]*)[├└]─ (?P<name>.*?) (?P<mark>[✔✘↷■])(?: (?P<why>.*))?$"
)
_JUNIT_PASSING = ("✔", "↷")
"""JUnit's marks for a successful and a skipped test (its exit code stays 0)."""

_GO_LINE = re.compile(r"^\s*--- (?P<outcome>PASS|FAIL|SKIP): (?P<name>\S+)")
_GO_RUN = re.compile(r"^=== (?:RUN|CONT)\s+(?P<name>\S+)")


def _case(name: str, passed: bool, message: str = "") -> dict[str, Any]:
    return {"name": name, "passed": passed, "message": message[:MAX_MESSAGE]}


def pytest_cases(out: str) -> list[dict[str, Any]]:
    """pytest's ``-v`` lines (``file.py::test_x PASSED``), each failure's reason from its
    ``-rfE`` summary line; the test's id without its file."""
    why: dict[str, str] = {}
    found: dict[str, str] = {}
    for line in out.splitlines():
        if m := _PYTEST_SUMMARY.match(line):
            why.setdefault(m["id"], m["why"] or m["outcome"].lower())
        elif m := _PYTEST_LINE.match(line):
            found.setdefault(m["id"], m["outcome"])
    cases = []
    for test_id, outcome in found.items():
        name = test_id.partition("::")[2]
        passed = outcome in _PYTEST_PASSING
        message = "" if outcome == "PASSED" else why.get(test_id, outcome.lower())
        cases.append(_case(name, passed, message))
    return cases


def junit_cases(out: str) -> list[dict[str, Any]]:
    """The JUnit console launcher's ``--details=tree``: each leaf of the tree (a test; its
    containers, the engines and classes, are not), named by its path below the engine."""
    rows: list[tuple[int, str, str, str]] = []
    for line in out.splitlines():
        if m := _JUNIT_LINE.match(line):
            rows.append((len(m["indent"]), m["name"], m["mark"], m["why"] or ""))
    cases = []
    path: list[tuple[int, str]] = []
    for i, (depth, name, mark, why) in enumerate(rows):
        while path and path[-1][0] >= depth:
            path.pop()
        path.append((depth, name))
        leaf = i + 1 == len(rows) or rows[i + 1][0] <= depth
        if leaf and len(path) > 1:  # an engine with no test under it is no test
            label = " > ".join(p for _, p in path[1:])
            cases.append(_case(label, mark in _JUNIT_PASSING, "" if mark == "✔" else why or mark))
    return cases


def go_test_cases(out: str) -> list[dict[str, Any]]:
    """A Go test binary's ``-test.v`` lines (``--- PASS: TestX (0.00s)``), subtests named
    ``TestX/sub`` as Go names them; each failure's message, the lines it logged (Go prints
    them under the test's ``=== RUN`` line, before the outcomes)."""
    cases: list[dict[str, Any]] = []
    logged: dict[str, list[str]] = {}
    running = ""
    for line in out.splitlines():
        if m := _GO_LINE.match(line):
            passed = m["outcome"] != "FAIL"
            said = "\n".join(logged.get(m["name"], [])[:5])
            cases.append(_case(m["name"], passed, "" if passed else said or "FAIL"))
        elif m := _GO_RUN.match(line):
            running = m["name"]
        elif running and line.startswith("    ") and line.strip():
            logged.setdefault(running, []).append(line.strip())
    return cases


PARSERS = {"pytest": pytest_cases, "junit": junit_cases, "go_test": go_test_cases}
"""Each test runner's report reader, by the name ``Language.report`` gives it."""


def cases(runner: str, out: str, crash: str, index: int) -> list[dict[str, Any]]:
    """The cases of one run of ``runner``: each test it reported; where it reported none, or
    ended in a way its tests do not account for (``crash``: its non-zero exit or signal with
    every reported test passed), one more failed case saying so (``run_<index>``)."""
    found = PARSERS[runner](out)
    if not found:
        return [_case(f"run_{index}", False, crash or f"{runner} reported no test")]
    if crash and all(c["passed"] for c in found):
        found.append(_case(f"run_{index}", False, crash))
    return found
