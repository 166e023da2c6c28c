"""Verifier for HumanEval problems: one test per top-level statement of ``check`` that asserts.

Runs inside the sandbox's verifier process. The problem's prompt and canonical solution are
executed here (trusted data: they define helpers such as ``poly`` that the asserts use); the
``candidate`` the asserts call is the answer's entry point, an RPC into the solution process.
A statement without an assert is set-up; if set-up fails because the answer failed, every later
test fails too.
"""

from __future__ import annotations

import ast
from typing import Any


def _asserts(stmt: ast.stmt) -> bool:
    return any(isinstance(node, ast.Assert) for node in ast.walk(stmt))


def verify(solution: Any, test_cases: list[dict[str, Any]]) -> dict[str, Any]:
    spec = test_cases[0]
    namespace: dict[str, Any] = {"__name__": "humaneval_problem"}
    exec(compile(spec["prompt"] + spec["canonical_solution"], "<prompt>", "exec"), namespace)
    tree = ast.parse(spec["test"])
    check = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
        else:
            exec(compile(ast.Module(body=[node], type_ignores=[]), "<test>", "exec"), namespace)
    if check is None:
        raise ValueError("the problem's test defines no check()")
    param = check.args.args[0].arg
    namespace[param] = getattr(solution, spec["entry_point"])
    cases: list[dict[str, Any]] = []
    broken = ""
    for stmt in check.body:
        is_test = _asserts(stmt)
        name = f"test_{len(cases)}"
        if broken:
            if is_test:
                cases.append({"name": name, "passed": False, "message": broken})
            continue
        code = compile(ast.Module(body=[stmt], type_ignores=[]), "<check>", "exec")
        try:
            exec(code, namespace)
        except Exception as exc:  # the answer's failure, or a failed assert: this test fails
            message = f"line {stmt.lineno}: {type(exc).__name__}: {exc}"[:300]
            if is_test:
                cases.append({"name": name, "passed": False, "message": message})
            else:
                broken = f"set-up failed: {message}"
            continue
        if is_test:
            cases.append({"name": name, "passed": True, "message": ""})
    good = sum(1 for c in cases if c["passed"])
    score = good / len(cases) if cases else (0.0 if broken else 1.0)
    return {
        "score": score,
        "passed": bool(cases) and good == len(cases) and not broken,
        "cases": cases,
    }
