"""Final verifier: the hidden checks pass with the new name, and the old name is gone from every
Python file.

Each check is an expression over the ``shapes`` package. The agent's code runs in a process of
its own, which is sent only the calls into ``shapes`` that the checks make (their arguments are
literals) and sends back only plain JSON values; the expressions are then evaluated here, over
those values. So nothing the agent's code says or compares is a verdict: an object equal to
everything cannot cross as JSON, and a forged line of output is a wrong value.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

# Calls each (module, attribute path, args) of the package; prints each result as JSON.
PROGRAM = (
    "import importlib, json, sys\n"
    "calls = json.loads(sys.stdin.read())\n"
    "sys.path.insert(0, '.')\n"
    "out = []\n"
    "for module, path, args in calls:\n"
    "    try:\n"
    "        obj = importlib.import_module(module)\n"
    "        for part in path:\n"
    "            obj = getattr(obj, part)\n"
    "        value = obj(*args)\n"
    "        json.dumps(value, allow_nan=False)\n"
    "        out.append(['ok', value])\n"
    "    except BaseException as exc:\n"
    "        out.append(['error', type(exc).__name__])\n"
    "print(json.dumps(out))\n"
)
PACKAGE = "shapes"


def _chain(node):
    """``['shapes', 'area', 'area_of']`` for ``shapes.area.area_of``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == PACKAGE:
        return [PACKAGE, *reversed(parts)]
    return None


class _Calls(ast.NodeTransformer):
    """Replaces each call into the package (literal arguments) by a name bound to its value."""

    def __init__(self, calls):
        self.calls = calls

    def visit_Call(self, node):
        chain = _chain(node.func)
        if chain is None or node.keywords:
            return self.generic_visit(node)
        try:
            args = [ast.literal_eval(a) for a in node.args]
        except ValueError:  # not a literal: the expression fails here (no package in scope)
            return self.generic_visit(node)
        # the longest importable prefix is the module; the rest are attributes
        modules = [".".join(chain[:i]) for i in range(len(chain) - 1, 0, -1)]
        self.calls.append((modules, chain, args))
        return ast.copy_location(ast.Name(id=f"_v{len(self.calls) - 1}", ctx=ast.Load()), node)


def _call_list(calls, work):
    """Each call as (module, attribute path, args): the module is the longest prefix that is
    a module or package in the work dir."""
    out = []
    for modules, chain, args in calls:
        module = PACKAGE
        for name in modules:
            rel = Path(work, *name.split("."))
            if rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file():
                module = name
                break
        out.append([module, chain[len(module.split(".")) :], args])
    return out


def _values(work, calls):
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", PROGRAM],
            input=json.dumps(calls),
            capture_output=True,
            text=True,
            cwd=work,
            timeout=30,
        )
        replies = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        replies = []
    if not isinstance(replies, list) or len(replies) != len(calls):
        return [["error", "no reply"]] * len(calls)
    return replies


def _evaluate(expr, work):
    """Whether the check ``expr`` holds, its calls into the package made by the agent's process
    and the rest evaluated here (in the work dir, for a check that runs a program there)."""
    found = []
    tree = _Calls(found).visit(ast.parse(expr, mode="eval"))
    replies = _values(work, _call_list(found, work)) if found else []
    scope = {}
    for i, reply in enumerate(replies):
        if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == "ok"):
            return False
        scope[f"_v{i}"] = reply[1]
    code = compile(ast.fix_missing_locations(tree), "<check>", "eval")
    here = os.getcwd()
    os.chdir(work)
    try:
        return bool(eval(code, scope))
    except Exception:
        return False
    finally:
        os.chdir(here)


def verify(work, tests):
    scope = {}
    exec((tests / "checks.py").read_text(), scope)
    checks = scope["CHECKS"]
    cases = [{"name": name, "passed": _evaluate(expr, work)} for name, expr in checks]
    left = [
        str(p.relative_to(work))
        for p in sorted(Path(work).rglob("*.py"))
        if "calc_area" in p.read_text(errors="replace")
    ]
    cases.append({"name": "old_name_gone", "passed": not left, "message": ", ".join(left)[:300]})
    # Renamed everywhere or not at all: a half-done rename scores nothing.
    ok = all(c["passed"] for c in cases)
    return {"score": 1.0 if ok else 0.0, "passed": ok, "cases": cases}
