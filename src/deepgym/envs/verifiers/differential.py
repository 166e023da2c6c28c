"""Verifier for mutation testing: does an answer agree with a reference on given inputs?

Runs inside the sandbox's verifier process. Its one test case carries the reference program
(trusted data: it ships with the environment, as HumanEval's canonical solution does), the entry
point, the comparison (``compare``) and the ``inputs`` (argument lists). The reference runs
here, on a copy of each input; the answer's entry point is an RPC into the solution process. An
input on which the reference raises is outside the task and is skipped. One case per remaining
input: passed when the two agree; a failed case's message is the JSON test case that tells them
apart (``{"args": ..., "expected": <the reference's value>}``), ready to paste into the
environment's ``test_cases.json``. An answer that agrees on every input scores 1.0.
"""

from __future__ import annotations

import copy
import json
from typing import Any

try:  # the judge package, as the sandbox mounts it
    from deepgym_judge import compare  # type: ignore[import-not-found]
except ImportError:  # a sandbox that runs the judge from the installed package
    from deepgym.judge import compare

MESSAGE_CHARS = 480


def _reference(source: str, entry: str) -> Any:
    namespace: dict[str, Any] = {"__name__": "reference"}
    exec(compile(source, "<reference>", "exec"), namespace)
    return namespace[entry]


def _test_case(args: list[Any], expected: Any) -> str:
    text = json.dumps({"args": args, "expected": compare.normalise(expected)}, default=repr)
    if len(text) <= MESSAGE_CHARS:
        return text
    return json.dumps({"args": args}, default=repr)[:MESSAGE_CHARS]


def verify(solution: Any, test_cases: list[dict[str, Any]]) -> dict[str, Any]:
    """One case per input the reference accepts: passed when the answer agrees with it."""
    (spec,) = test_cases
    reference = _reference(spec["reference"], spec["entry"])
    how = spec.get("compare", "exact")
    cases: list[dict[str, Any]] = []
    for args in spec["inputs"]:
        try:
            expected = reference(*copy.deepcopy(args))
        except Exception:  # an input outside the task: the reference refuses it
            continue
        try:
            got = getattr(solution, spec["entry"])(*args)
        except Exception:  # the answer's failure on this input: they disagree
            same = False
        else:
            same = compare.equal(got, expected, how)
        message = "" if same else _test_case(args, expected)
        cases.append({"name": f"input_{len(cases)}", "passed": same, "message": message})
    good = sum(1 for c in cases if c["passed"])
    return {
        "score": good / len(cases) if cases else 0.0,
        "passed": bool(cases) and good == len(cases),
        "cases": cases,
    }
