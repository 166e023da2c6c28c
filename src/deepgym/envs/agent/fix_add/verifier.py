"""Final verifier: call the agent's calc.py in a process of its own, compare the values here.

The agent's code runs in that process, so nothing it says there is a verdict: it is sent only
each call's arguments and sends back only plain JSON values, which this verifier compares with
the hidden expected ones (an object equal to everything cannot cross as JSON, and a forged
line of output is a wrong value, not a verdict).
"""

import json
import subprocess
import sys

# Calls calc's functions with the given arguments; prints each result as JSON, or the error.
PROGRAM = (
    "import json, sys\n"
    "calls = json.loads(sys.stdin.read())\n"
    "sys.path.insert(0, '.')\n"
    "out = []\n"
    "for name, args in calls:\n"
    "    try:\n"
    "        import calc\n"
    "        value = getattr(calc, name)(*args)\n"
    "        json.dumps(value, allow_nan=False)\n"
    "        out.append(['ok', value])\n"
    "    except BaseException as exc:\n"
    "        out.append(['error', type(exc).__name__])\n"
    "print(json.dumps(out))\n"
)


def _same(got, want):
    """Equal plain values, a bool never standing for a number (and the reverse)."""
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, int | float):
        return isinstance(got, int | float) and got == want
    return type(got) is type(want) and got == want


def _values(work, calls):
    """Each call's ``['ok', value]`` or ``['error', type]``, as the agent's process reported."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", PROGRAM],
            input=json.dumps(calls),
            capture_output=True,
            text=True,
            cwd=work,
            timeout=10,
        )
        replies = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        replies = []
    if not isinstance(replies, list) or len(replies) != len(calls):
        return [["error", "no reply"]] * len(calls)
    return replies


def verify(work, tests):
    cases = {}
    exec((tests / "test_calc.py").read_text(), cases)
    calls = [[name, list(args)] for name, args, _ in cases["CASES"]]
    replies = _values(work, calls)
    results = [
        isinstance(r, list) and len(r) == 2 and r[0] == "ok" and _same(r[1], want)
        for r, (_, _, want) in zip(replies, cases["CASES"])
    ]
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
