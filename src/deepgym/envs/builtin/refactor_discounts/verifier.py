"""Verifier for refactor_discounts: the behaviour is kept, and the shared module is in place.

Runs in the verifier process after the diff was applied here; each check is a call into the
patched repository (an RPC into the solution process) whose result is compared here. Case kinds:

- ``call`` (``"package.module:function"``) with ``args`` and ``expected``, or ``raises`` (the
  name of the exception the call must raise);
- ``attr`` (an attribute path, such as ``"shop.cart:apply_discount.__module__"``) with
  ``expected``;
- ``absent``: an attribute the refactor must remove (reading it raises ``AttributeError``).
"""

from __future__ import annotations

from typing import Any


def _same(got: Any, expected: Any) -> bool:
    return type(got) is type(expected) and got == expected


def _raised(exc: Exception) -> str:
    """The exception the answer raised (``SolutionError.exc_type``), or how the call failed."""
    return getattr(exc, "exc_type", "") or type(exc).__name__


def check(solution: Any, case: dict[str, Any]) -> tuple[bool, str]:
    if "absent" in case:
        try:
            value = solution.get(case["absent"])
        except Exception as exc:  # a failed call into the answer
            return _raised(exc) == "AttributeError", f"raised {_raised(exc)}: {exc}"
        return False, f"{case['absent']} still exists ({value!r})"
    try:
        if "attr" in case:
            got = solution.get(case["attr"])
        else:
            got = solution[case["call"]](*case.get("args", []), **case.get("kwargs", {}))
    except Exception as exc:  # a failed call into the answer
        if "raises" in case:
            return _raised(exc) == case["raises"], f"raised {_raised(exc)}: {exc}"
        return False, f"raised {_raised(exc)}: {exc}"
    if "raises" in case:
        return False, f"returned {got!r}, expected {case['raises']}"
    ok = _same(got, case["expected"])
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
