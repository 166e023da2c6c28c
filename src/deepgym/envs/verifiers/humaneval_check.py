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


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


_Call = tuple[list[Any], dict[str, Any]]


def _planned(stmt: ast.stmt, param: str) -> list[_Call] | None:
    """The candidate calls an assert makes whatever their replies, if that is plain from its
    text: ``assert candidate(LITERALS) OP LITERAL`` (or ``assert [not] candidate(LITERALS)``),
    the call evaluated first and exactly once, or an assert that calls nothing. None for any
    other statement: its calls are made one at a time."""
    if not isinstance(stmt, ast.Assert):
        return None
    if stmt.msg is not None and not _literal(stmt.msg)[0]:
        return None
    test = stmt.test
    call = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    if isinstance(call, ast.Compare) and len(call.ops) == 1 and isinstance(call.left, ast.Call):
        if not _literal(call.comparators[0])[0]:
            return None
        call = call.left
    if not isinstance(call, ast.Call):
        return [] if _literal(test)[0] else None  # no call at all (``assert True``), or None
    if not (isinstance(call.func, ast.Name) and call.func.id == param):
        return None
    args = [_literal(a) for a in call.args]
    kwargs = {k.arg: _literal(k.value) for k in call.keywords if k.arg is not None}
    if len(kwargs) != len(call.keywords) or not all(ok for ok, _ in (*args, *kwargs.values())):
        return None  # a ``**spread``, or an argument that is not a literal
    return [([v for _, v in args], {k: v for k, (_, v) in kwargs.items()})]


_Compiled = tuple[CodeType, list[CodeType], str, list[tuple[CodeType, bool, int]], int, list[_Call]]
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
    param = check.args.args[0].arg
    # The leading asserts whose calls are plain from their text: sent to the answer at once.
    ahead: list[_Call] = []
    n_ahead = 0
    for stmt in check.body:
        calls = _planned(stmt, param)
        if calls is None:
            break
        ahead += calls
        n_ahead += 1
    return setup, module_code, param, steps, n_ahead, ahead


def verify(solution: Any, test_cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the problem's ``check`` against ``solution``: one case per top-level assert."""
    spec = test_cases[0]
    namespace: dict[str, Any] = {"__name__": "humaneval_problem"}
    setup, module_code, param, steps, n_ahead, ahead = _compiled(
        spec["prompt"] + spec["canonical_solution"], spec["test"]
    )
    exec(setup, namespace)
    for code in module_code:
        exec(code, namespace)
    candidate = getattr(solution, spec["entry_point"])
    # The leading asserts' calls go to the answer at once; it serves them in the same order as
    # one at a time, and each assert takes its own reply.
    namespace[param] = solution.ahead(spec["entry_point"], ahead) if ahead else candidate
    cases: list[dict[str, Any]] = []
    broken = ""
    for step, (code, is_test, lineno) in enumerate(steps):
        if step == n_ahead:
            namespace[param] = candidate
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
