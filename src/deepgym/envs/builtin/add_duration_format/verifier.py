"""Verifier for add_duration_format: each case is a call into the patched repository.

Runs in the verifier process after the diff was applied here; each check is a call into the
patched repository (an RPC into the solution process) whose result is compared here. A case is a
``call`` (``"package.module:function"``) with ``args`` and either ``expected`` (the value, of the
same type) or ``raises`` (the name of the exception the call must raise: the task makes a
negative duration, and text that is not a duration, a ``ValueError``).
"""

from __future__ import annotations

from typing import Any


def _raised(exc: Exception) -> str:
    """The exception the answer raised (``SolutionError.exc_type``), or how the call failed."""
    return getattr(exc, "exc_type", "") or type(exc).__name__


def check(solution: Any, case: dict[str, Any]) -> tuple[bool, str]:
    try:
        got = solution[case["call"]](*case.get("args", []))
    except Exception as exc:  # a failed call into the answer
        if "raises" in case:
            return _raised(exc) == case["raises"], f"raised {_raised(exc)}: {exc}"
        return False, f"raised {_raised(exc)}: {exc}"
    if "raises" in case:
        return False, f"returned {got!r}, expected {case['raises']}"
    ok = type(got) is type(case["expected"]) and got == case["expected"]
    return ok, "" if ok else f"expected {case['expected']!r}, got {got!r}"


def verify(solution: Any, test_cases: list[dict[str, Any]]) -> dict[str, Any]:
    cases = []
    for i, case in enumerate(test_cases):
        ok, message = check(solution, case)
        cases.append({"name": f"test_{i}", "passed": ok, "message": message[:300]})
    good = sum(1 for c in cases if c["passed"])
    return {
        "score": good / len(cases) if cases else 0.0,
        "passed": bool(cases) and good == len(cases),
        "cases": cases,
    }
