"""Final verifier: `make test` passes on the agent's tree with its own tests put back, and the
hidden tests, compiled against the agent's src/stats.c, pass."""

import shutil
import subprocess
import tempfile
from pathlib import Path


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
        # The project's own tests as shipped: an agent that edits them gains nothing.
        (tree / "tests").mkdir(exist_ok=True)
        shutil.copyfile(tests / "test_stats.c", tree / "tests" / "test_stats.c")
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
            lines = out.split() if code == 0 else []
    hidden = [line == "1" for line in lines] + [False] * (4 - len(lines))
    cases = [{"name": "make_test", "passed": make_ok}]
    cases += [{"name": f"hidden_{i}", "passed": ok} for i, ok in enumerate(hidden[:4])]
    passed = sum(c["passed"] for c in cases)
    return {"score": passed / len(cases), "passed": passed == len(cases), "cases": cases}
