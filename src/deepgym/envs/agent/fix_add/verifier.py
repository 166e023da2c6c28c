"""Final verifier: import the agent's calc.py in a process of its own, run the hidden cases."""

import json
import subprocess
import sys


def verify(work, tests):
    cases = {}
    exec((tests / "test_calc.py").read_text(), cases)
    program = (
        "import json, sys\n"
        "sys.path.insert(0, '.')\n"
        "import calc\n"
        "out = []\n"
        "for name, args, want in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        out.append(getattr(calc, name)(*args) == want)\n"
        "    except Exception:\n"
        "        out.append(False)\n"
        "print(json.dumps(out))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", program],
            input=json.dumps(cases["CASES"]),
            capture_output=True,
            text=True,
            cwd=work,
            timeout=10,
        )
        results = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        results = [False] * len(cases["CASES"])
    results = [bool(r) for r in results[: len(cases["CASES"])]]
    results += [False] * (len(cases["CASES"]) - len(results))
    passed = sum(results)
    # The score is the share of add's cases passed, and only while mul and mean stay right:
    # what was right before the fix earns nothing by itself.
    add = [r for c, r in zip(cases["CASES"], results) if c[0] == "add"]
    kept = all(r for c, r in zip(cases["CASES"], results) if c[0] != "add")
    return {
        "score": sum(add) / len(add) if kept and add else 0.0,
        "passed": passed == len(cases["CASES"]),
        "cases": [
            {"name": f"{c[0]}{tuple(c[1])}", "passed": bool(r)}
            for c, r in zip(cases["CASES"], results)
        ],
    }
