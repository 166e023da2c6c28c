"""Final verifier: the merge is concluded (a commit with two parents at HEAD, nothing left
uncommitted, no conflict marker) and greet() has both branches' changes."""

import json
import subprocess
import sys


def _git(work, *args):
    done = subprocess.run(
        ["git", "-c", "safe.directory=*", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=10,
    )
    return done.returncode, done.stdout


def verify(work, tests):
    expect = json.loads((tests / "expect.json").read_text())["cases"]
    code, parents = _git(work, "rev-list", "--parents", "-n", "1", "HEAD")
    merged = code == 0 and len(parents.split()) == 3
    code, status = _git(work, "status", "--porcelain", "--untracked-files=no")
    clean = code == 0 and status.strip() == ""
    source = (work / "greet.py").read_text() if (work / "greet.py").is_file() else ""
    no_markers = source != "" and not any(
        line.startswith(("<<<<<<<", "=======", ">>>>>>>")) for line in source.splitlines()
    )
    program = (
        "import json, sys\nsys.path.insert(0, '.')\nfrom greet import greet\n"
        "print(json.dumps([greet(n) for n in json.loads(sys.stdin.read())]))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", program],
            input=json.dumps([c[0] for c in expect]),
            capture_output=True,
            text=True,
            cwd=work,
            timeout=10,
        )
        got = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        got = [None] * len(expect)
    cases = [
        {"name": "merge_committed", "passed": merged},
        {"name": "nothing_uncommitted", "passed": clean},
        {"name": "no_conflict_markers", "passed": no_markers},
    ]
    cases += [
        {"name": f"greet({c[0]!r})", "passed": g == c[1]} for c, g in zip(expect, got)
    ]
    # Every part is required: a merge that loses a change, or is not committed, is not solved.
    ok = all(c["passed"] for c in cases)
    return {"score": 1.0 if ok else 0.0, "passed": ok, "cases": cases}
