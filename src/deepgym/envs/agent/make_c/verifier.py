"""Final verifier: `make test` passes on the agent's tree with its own tests and Makefile put
back, and the hidden tests, compiled against the agent's src/stats.c, print the expected values.

The agent's code runs inside the hidden test's process (a constructor in stats.c runs before
its main), so that process prints only the values it computed, each compared here with the one
expected: a forged line of output is a wrong value, or a line too many.
"""

import shutil
import subprocess
import tempfile
from pathlib import Path

EXPECTED = ["-18", "-2", "10 10", "3.500000"]
"""What the hidden test prints for a correct stats.c: sum and max of {-7, -2, -9}, sum and max
of {10}, the mean of {2, 2, 2, 8}."""


def _run(args, cwd, timeout=30):
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout
    except (subprocess.TimeoutExpired, OSError):
        return -1, ""


def verify(work, tests):
    work = Path(work)
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d) / "tree"
        shutil.copytree(work, tree, ignore=shutil.ignore_patterns("build"))
        # The project's own tests and build as shipped: an agent that edits them gains nothing.
        (tree / "tests").mkdir(exist_ok=True)
        shutil.copyfile(tests / "test_stats.c", tree / "tests" / "test_stats.c")
        shutil.copyfile(tests / "Makefile", tree / "Makefile")
        code, _ = _run(["make", "-s", "test"], tree)
        make_ok = code == 0
        exe = Path(d) / "hidden"
        code, _ = _run(
            ["cc", "-O1", "-I", str(tree / "src"), "-o", str(exe),
             str(tests / "hidden_stats.c"), str(tree / "src" / "stats.c")],
            d,
        )
        lines = []
        if code == 0:
            code, out = _run([str(exe)], d, timeout=10)
            lines = out.splitlines() if code == 0 else []
    if len(lines) != len(EXPECTED):
        lines = []
    hidden = [line == want for line, want in zip(lines, EXPECTED)]
    hidden += [False] * (len(EXPECTED) - len(hidden))
    cases = [{"name": "make_test", "passed": make_ok}]
    cases += [{"name": f"hidden_{i}", "passed": ok} for i, ok in enumerate(hidden)]
    passed = sum(c["passed"] for c in cases)
    return {"score": passed / len(cases), "passed": passed == len(cases), "cases": cases}
