"""Final verifier: the hidden checks pass with the new name, and the old name is gone from every
Python file."""

import json
import subprocess
import sys
from pathlib import Path


def verify(work, tests):
    scope = {}
    exec((tests / "checks.py").read_text(), scope)
    checks = scope["CHECKS"]
    program = (
        "import json, sys\nsys.path.insert(0, '.')\nout = []\n"
        "for name, expr in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        import shapes, shapes.area, shapes.report\n"
        "        out.append(bool(eval(expr)))\n"
        "    except Exception:\n"
        "        out.append(False)\n"
        "print(json.dumps(out))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", program],
            input=json.dumps(checks),
            capture_output=True,
            text=True,
            cwd=work,
            timeout=30,
        )
        results = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        results = [False] * len(checks)
    cases = [{"name": c[0], "passed": bool(r)} for c, r in zip(checks, results)]
    left = [
        str(p.relative_to(work))
        for p in sorted(Path(work).rglob("*.py"))
        if "calc_area" in p.read_text(errors="replace")
    ]
    cases.append({"name": "old_name_gone", "passed": not left, "message": ", ".join(left)[:300]})
    # Renamed everywhere or not at all: a half-done rename scores nothing.
    ok = all(c["passed"] for c in cases)
    return {"score": 1.0 if ok else 0.0, "passed": ok, "cases": cases}
