"""Verifier for HumanEval problems: one test per top-level statement of ``check`` that asserts.

Runs inside the sandbox's verifier process. The problem's prompt and canonical solution are
executed here (trusted data: they define helpers such as ``poly`` that the asserts use); the
``candidate`` the asserts call is the answer's entry point, an RPC into the solution process.
A statement without an assert is set-up; if set-up fails because the answer failed, every later
test fails too.
"""

from __future__ import annotations

import ast
from types import CodeType
from typing import Any


def _asserts(stmt: ast.stmt) -> bool:
    return any(isinstance(node, ast.Assert) for node in ast.walk(stmt))


_Compiled = tuple[CodeType, list[CodeType], str, list[tuple[CodeType, bool, int]]]
_CACHE: dict[tuple[str, str], _Compiled] = globals().get("process_cache", {})
"""Compiled problems, kept across runs where the judge gives a ``process_cache`` (a pool worker
runs this file afresh for every answer; compiling a problem's tests is most of its work)."""
_CACHE_MAX = 512


def _compiled(prompt: str, test: str) -> _Compiled:
    """The problem compiled once per process: set-up code, the check's parameter name, and one
    (code, is a test, line) per top-level statement of ``check``."""
    hit = _CACHE.get((prompt, test))
    if hit is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        hit = _CACHE[prompt, test] = _compile(prompt, test)
    return hit


def _compile(prompt: str, test: str) -> _Compiled:
    setup = compile(prompt, "<prompt>", "exec")
    tree = ast.parse(test)
    module_code: list[CodeType] = []
    check = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            check = node
        else:
            module_code.append(compile(ast.Module(body=[node], type_ignores=[]), "<test>", "exec"))
    if check is None:
        raise ValueError("the problem's test defines no check()")
    steps = [
        (
            compile(ast.Module(body=[stmt], type_ignores=[]), "<check>", "exec"),
            _asserts(stmt),
            stmt.lineno,
        )
        for stmt in check.body
    ]
    return setup, module_code, check.args.args[0].arg, steps


def verify(solution: Any, test_cases: list[dict[str, Any]]) -> dict[str, Any]:
    spec = test_cases[0]
    namespace: dict[str, Any] = {"__name__": "humaneval_problem"}
    setup, module_code, param, steps = _compiled(
        spec["prompt"] + spec["canonical_solution"], spec["test"]
    )
    exec(setup, namespace)
    for code in module_code:
        exec(code, namespace)
    namespace[param] = getattr(solution, spec["entry_point"])
    cases: list[dict[str, Any]] = []
    broken = ""
    for code, is_test, lineno in steps:
        name = f"test_{len(cases)}"
        if broken:
            if is_test:
                cases.append({"name": name, "passed": False, "message": broken})
            continue
        try:
            exec(code, namespace)
        except Exception as exc:  # the answer's failure, or a failed assert: this test fails
            message = f"line {lineno}: {type(exc).__name__}: {exc}"[:300]
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
