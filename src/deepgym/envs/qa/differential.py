"""The differential step of mutation testing: a survivor against the reference, input by input.

A mutant the verifier passed is either equivalent to the reference or a wrong answer the tests
miss. This module tells which, as far as inputs can: it runs the mutant and the reference on
many inputs in the sandbox (``deepgym/envs/verifiers/differential.py``) and reads what they did.
Three runs, each an ordinary sandboxed run with that verifier:

1. **trace** (only where the test cases name no arguments: a verifier-only environment, a
   HumanEval problem): the environment's own verifier runs against the reference, and the calls
   it makes are recorded. They are the examples.
2. **domain** (once per environment): the reference, as the answer, against itself on every
   generated input (``candidate_calls``: the examples, seeded variations inside the examples'
   range, the boundary values of each argument's type, then variations that leave that range;
   ``deepgym.envs.qa.extra_inputs``). An input on which the reference raises, runs past
   ``REFERENCE_S``, returns what cannot be written down or disagrees with itself is outside the
   task. What is left is the task's domain, as far as these inputs tell.
3. **compare** (once per survivor): the survivor against the reference's values on the
   domain's inputs (every boundary value, then the others fastest first, up to
   ``COMPARE_BUDGET_S`` of the reference's time), stopping at the first disagreement. The
   reference does not run again: the domain run's values travel with the inputs.

``agreement(...)`` reads a compare run: the input that kills the survivor (a test case, with
the reference's value), or how many distinct in-domain inputs it agreed on. A survivor is
**likely equivalent** when it agreed on at least ``EQUIVALENCE_INPUTS`` distinct inputs and
those included every boundary value in the domain; with less evidence it is **undecided**.

Which environments: a function task whose entry point is a plain function (not a class or a
generator), and a patch task (its test cases' ``call`` targets, against the reference diff's
patched repository). Script and session survivors are not compared here.
"""

from __future__ import annotations

import ast
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym.envs.qa.extra_inputs import boundaries, key, variations
from deepgym.envs.verifiers import differential as sandbox_side
from deepgym.judge.compare import normalise
from deepgym.judge.patch import PatchError, apply_diff, parse_diff
from deepgym.models import Environment, RunResult

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = [
    "COMPARE_BUDGET_S",
    "DIFFERENTIAL_VERIFIER",
    "EQUIVALENCE_INPUTS",
    "GENERATED_INPUTS",
    "REFERENCE_S",
    "Agreement",
    "Call",
    "Comparison",
    "Domain",
    "agreement",
    "candidate_calls",
    "comparable",
    "compare_env",
    "compare_survivors",
    "differential_answer",
    "domain",
    "domain_env",
    "examples",
    "trace_env",
    "traced_calls",
]

DIFFERENTIAL_VERIFIER = Path(sandbox_side.__file__)
"""The verifier of the three runs (its path; it runs in the sandbox)."""
REFERENCE_S = sandbox_side.REFERENCE_S
"""The longest one call of the reference may take in the sandbox; a slower input is outside
the task."""
EQUIVALENCE_INPUTS = 300
"""Distinct in-domain inputs a survivor must agree with the reference on, every boundary value
in the domain among them, to be called likely equivalent; with fewer it is undecided."""
GENERATED_INPUTS = 800
"""Inputs generated per environment, examples and boundaries included, before the reference
decides which are in the task (about half of a typical task's are)."""
IN_RANGE_SHARE = 0.25
"""The share of the generated variations that stay inside the examples' range (asked first,
so that a killing input is, where one exists, an ordinary one)."""
WIDEN = 1.0
"""How far past the examples' range the other variations go, in widths of that range."""
DOMAIN_BUDGET_S = 4.0
"""The reference's time the domain run may spend on all its inputs (asked in order: the
examples, the variations inside their range, the boundaries, then the wider variations)."""
COMPARE_BUDGET_S = 1.0
"""The reference's time, as the domain run measured it, that one compare run may spend: every
boundary value in the domain, then the other inputs fastest first. A task whose reference is
slow on every input gets fewer of them (and may fall short of ``EQUIVALENCE_INPUTS``)."""
TIMEOUT_S = 120.0
"""The time limit of one differential run."""
CASE_TIMEOUT_S = 2.0
"""The time one call of the answer may take in a differential run: twenty times the slowest
call the reference may take there."""


@dataclass(frozen=True)
class Call:
    """One input: the function called (an entry point, or a patch task's ``"module:function"``),
    its arguments, and whether it is a boundary value."""

    name: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...] = ()
    boundary: bool = False

    @property
    def text(self) -> str:
        """The Python literal of ``[args, kwargs]`` (as the sandbox side reads it)."""
        return repr([list(self.args), dict(self.kwargs)])

    def test_case(self, expected: Any) -> dict[str, Any]:
        """This input as a declarative test case with ``expected`` (JSON: tuples as lists)."""
        case: dict[str, Any] = {}
        if ":" in self.name:
            case["call"] = self.name
        case["args"] = normalise(list(self.args))
        if self.kwargs:
            case["kwargs"] = normalise(dict(self.kwargs))
        case["expected"] = normalise(expected)
        return case


def _readable(value: Any) -> bool:
    """Whether ``value``'s Python literal reads back as itself (so it can cross as text)."""
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _call(name: str, args: Sequence[Any], kwargs: dict[str, Any], boundary: bool = False) -> Call:
    return Call(name, tuple(args), tuple(sorted(kwargs.items())), boundary)


# -- which environments, and their examples ------------------------------------------------------


def _plain_entry(env: Environment) -> bool:
    """The reference's entry point is a plain function (not a class or a generator)."""
    if env.kind != "function" or not env.reference_solution or not env.entry_point:
        return False
    try:
        tree = ast.parse(env.reference_solution)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == env.entry_point:
            return not any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node))
    return False


def _patched(env: Environment) -> dict[str, str] | None:
    """A patch task's repository with the reference diff applied: its Python files."""
    if env.kind != "patch" or env.repo_path is None or not env.reference_solution:
        return None
    root = env.repo_path
    files = {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }
    try:
        patched = apply_diff(files, parse_diff(env.reference_solution))
    except (PatchError, OSError, UnicodeDecodeError):
        return None
    return {k: v for k, v in patched.items() if k.endswith(".py")}


def comparable(env: Environment) -> bool:
    """Whether ``env``'s survivors can be compared with its reference here."""
    return env.language == "python" and (_plain_entry(env) or _patched(env) is not None)


def examples(env: Environment) -> list[Call]:
    """The calls ``env``'s test cases state (a function task's ``args``, a patch task's
    ``call`` and ``args``); empty where they state none (then ``trace_env`` learns them)."""
    out: list[Call] = []
    for case in env.test_cases or []:
        args, kwargs = case.get("args"), case.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            continue
        if env.kind == "patch":
            name = case.get("call")
            if not isinstance(name, str) or ":" not in name:
                continue
        elif "call" in case or not env.entry_point:
            continue
        else:
            name = env.entry_point
        if _readable(args) and _readable(kwargs):
            out.append(_call(name, args, kwargs))
    return out


def _wanted(env: Environment, name: str) -> bool:
    return name == env.entry_point if env.kind == "function" else ":" in name


def _verifier_source(env: Environment) -> str | None:
    if env.verifier_code is not None:
        return env.verifier_code
    if env.verifier_path is not None:
        try:
            return env.verifier_path.read_text(encoding="utf-8")
        except OSError:
            return None
    return None


def _spec_env(env: Environment, suffix: str, spec: dict[str, Any]) -> Environment:
    return env.model_copy(
        update={
            "name": f"{env.name}-{suffix}",
            "test_cases": [spec],
            "verifier_code": None,
            "verifier_path": DIFFERENTIAL_VERIFIER,
            "timeout": max(env.timeout, TIMEOUT_S),
            "time_limit": max(env.timeout, TIMEOUT_S),
            "case_timeout": CASE_TIMEOUT_S,
            "scoring": "all",
        }
    )


def _reference_spec(env: Environment) -> dict[str, Any]:
    if env.kind == "patch":
        return {"reference": None, "repo": _patched(env)}
    return {"reference": env.reference_solution, "repo": None}


def differential_answer(env: Environment) -> str:
    """What the trace and domain runs submit: the reference itself (a patch task's diff)."""
    return env.reference_solution or ""


def trace_env(env: Environment) -> Environment | None:
    """An environment whose run records the calls ``env``'s verifier makes to the reference;
    None where there is no verifier to trace, or nothing to compare."""
    source = _verifier_source(env)
    if source is None or not comparable(env):
        return None
    spec = {"mode": "trace", "verifier": source, "cases": env.test_cases or []}
    return _spec_env(env, "trace", {**spec, **_reference_spec(env)})


def traced_calls(env: Environment, result: RunResult) -> list[Call]:
    """The calls a trace run recorded (to the entry point, or a patch task's targets)."""
    out: list[Call] = []
    if not result.has_verdict:
        return out
    for case in result.cases:
        try:
            name, args, kwargs = ast.literal_eval(case.message)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        plain = isinstance(name, str) and isinstance(args, list) and isinstance(kwargs, dict)
        if plain and _wanted(env, name):
            out.append(_call(name, args, kwargs))
    return out


# -- the inputs ------------------------------------------------------------------------------------


def candidate_calls(
    env: Environment, found: Sequence[Call], count: int = GENERATED_INPUTS
) -> list[Call]:
    """The inputs a domain run tries: for each function called, its examples, variations inside
    their range, the boundary values, then variations that leave the range; deduplicated,
    seeded by the environment's name and seed, at most about ``count``."""
    names = list(dict.fromkeys(c.name for c in found))
    if not names:
        return []
    seed = zlib.crc32(env.name.encode()) ^ (env.seed or 0)
    share = max(count // len(names), 1)
    out: list[Call] = []
    seen: set[str] = set()

    def add(call: Call) -> None:
        k = call.name + key([call.args, call.kwargs])
        if k not in seen and _readable(list(call.args)):
            seen.add(k)
            out.append(call)

    for name in names:
        mine = [c for c in found if c.name == name]
        plain = [list(c.args) for c in mine if not c.kwargs]
        for c in mine:
            add(c)
        edges = boundaries(plain)
        room = max(share - len(mine) - len(edges), 0)
        inside = int(room * IN_RANGE_SHARE)
        for args in variations(plain, inside, seed):
            add(_call(name, args, {}))
        for args in edges:
            add(_call(name, args, {}, boundary=True))
        for args in variations(plain, room - inside, seed + 1, widen=WIDEN):
            add(_call(name, args, {}))
    return out


def _calls_spec(calls: Sequence[Call]) -> list[list[str]]:
    return [[c.name, c.text] for c in calls]


def domain_env(env: Environment, calls: Sequence[Call]) -> Environment | None:
    """The domain run's environment: the reference (as the answer) against itself on
    ``calls``; None where there is nothing to compare."""
    if not calls or not comparable(env):
        return None
    spec = {
        "mode": "domain",
        "compare": env.compare,
        "budget": DOMAIN_BUDGET_S,
        "calls": _calls_spec(calls),
    }
    return _spec_env(env, "domain", {**spec, **_reference_spec(env)})


@dataclass(frozen=True)
class Domain:
    """The inputs a compare run asks (``calls``), the reference's value for each (``values``),
    how many inputs the domain run tried, and how many of ``calls`` are boundary values."""

    calls: tuple[Call, ...]
    values: tuple[Any, ...]
    tried: int
    boundaries: int


def domain(calls: Sequence[Call], result: RunResult, budget: float = COMPARE_BUDGET_S) -> Domain:
    """The in-domain inputs of a domain run's result (each passed case whose message holds the
    reference's seconds and value): every boundary value, then the others fastest first,
    within ``budget`` seconds of the reference; in their original order."""
    found: dict[int, tuple[float, Any]] = {}
    if result.has_verdict:
        for case in result.cases:
            index = _index(case.name)
            if not case.passed or index is None or index >= len(calls):
                continue
            try:
                took, value = ast.literal_eval(case.message)
                found[index] = (float(took), value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue  # a value too long to carry: not asked
    order = sorted(found, key=lambda i: (not calls[i].boundary, found[i][0], i))
    kept: list[int] = []
    spent = 0.0
    for i in order:
        if spent + found[i][0] > budget and not calls[i].boundary:
            continue
        spent += found[i][0]
        kept.append(i)
    kept.sort()
    chosen = tuple(calls[i] for i in kept)
    values = tuple(found[i][1] for i in kept)
    return Domain(chosen, values, len(calls), sum(c.boundary for c in chosen))


def _index(name: str) -> int | None:
    number = name.removeprefix("input_")
    return int(number) if number != name and number.isdigit() else None


def compare_env(env: Environment, dom: Domain) -> Environment | None:
    """A compare run's environment: an answer against the reference's values on the domain's
    inputs, stopping at the first disagreement; None where the domain is empty."""
    if not dom.calls or not comparable(env):
        return None
    calls = [[c.name, c.text, repr(v)] for c, v in zip(dom.calls, dom.values, strict=True)]
    spec = {"mode": "compare", "compare": env.compare, "first": True, "calls": calls}
    return _spec_env(env, "compare", spec)


@dataclass(frozen=True)
class Agreement:
    """What a compare run found. ``judged``: the run had a verdict. ``disagreed``: the answer
    and the reference differ, on ``kill`` where it is known (the call and the reference's value
    there; ``killing_input``: it as a JSON test case). Otherwise ``agreed``: the distinct
    in-domain inputs on which they agreed, ``boundaries`` of them boundary values, and
    ``all_boundaries``: every boundary value of the domain among them."""

    judged: bool
    disagreed: bool = False
    agreed: int = 0
    boundaries: int = 0
    all_boundaries: bool = False
    kill: tuple[Call, Any] | None = None
    killing_input: str | None = None

    def equivalent(self, needed: int = EQUIVALENCE_INPUTS) -> bool:
        """Evidence enough to call it likely equivalent (see the module's docstring)."""
        return self.judged and not self.disagreed and self.all_boundaries and self.agreed >= needed


def agreement(dom: Domain, result: RunResult) -> Agreement:
    """A compare run's result, read (see ``Agreement``)."""
    if not result.has_verdict:
        return Agreement(judged=False)
    agreed = boundary = 0
    for case in result.cases:
        index = _index(case.name)
        if index is None or index >= len(dom.calls):
            continue
        call = dom.calls[index]
        if case.passed:
            agreed += 1
            boundary += call.boundary
            continue
        value = dom.values[index]
        test = json.dumps(call.test_case(value), default=repr)
        return Agreement(True, True, agreed, boundary, kill=(call, value), killing_input=test)
    # no failed case: a run judged with an error (the answer's whole run failed) disagrees
    failed = result.error_type is not None
    return Agreement(True, failed, agreed, boundary, boundary >= dom.boundaries)


# -- running -----------------------------------------------------------------------------------


def _judged(
    dg: DeepGym, env: Environment, answers: Sequence[str], max_parallel: int
) -> list[RunResult]:
    """``answers`` run on ``env``, each without a verdict run once more."""
    results = list(dg.run_batch(env, list(answers), max_parallel=max_parallel).results)
    again = [i for i, r in enumerate(results) if not r.has_verdict]
    if again:
        retried = dg.run_batch(env, [answers[i] for i in again], max_parallel=max_parallel)
        for i, r in zip(again, retried.results, strict=True):
            results[i] = r
    return results


@dataclass(frozen=True)
class Comparison:
    """The differential step's outcome for an environment: its domain (None where none could
    be learned, with ``why``) and each survivor's ``Agreement``, by answer."""

    domain: Domain | None
    agreements: tuple[Agreement, ...] = ()
    why: str = ""


def compare_survivors(
    env: Environment,
    dg: DeepGym,
    answers: Sequence[str],
    *,
    count: int = GENERATED_INPUTS,
    max_parallel: int = 8,
) -> Comparison:
    """The three runs of the module's docstring for ``answers`` (the survivors, as answers):
    trace where the test cases name no arguments, domain, then one compare run per answer."""
    found = examples(env)
    if not found:
        tracer = trace_env(env)
        if tracer is None:
            return Comparison(None, why="no example inputs: the test cases name no arguments")
        (traced,) = _judged(dg, tracer, [differential_answer(env)], max_parallel)
        found = traced_calls(env, traced)
        if not found:
            why = "no example inputs: the verifier made no call to the reference that "
            return Comparison(None, why=why + "could be recorded")
    calls = candidate_calls(env, found, count)
    learner = domain_env(env, calls)
    if learner is None:
        return Comparison(None, why="nothing to compare")
    (learned,) = _judged(dg, learner, [differential_answer(env)], max_parallel)
    if not learned.has_verdict:
        return Comparison(None, why=f"the domain run had no verdict ({learned.error_type})")
    dom = domain(calls, learned)
    checker = compare_env(env, dom)
    if checker is None:
        return Comparison(dom, why=f"the reference accepted none of the {len(calls)} inputs")
    results = _judged(dg, checker, answers, max_parallel)
    return Comparison(dom, tuple(agreement(dom, r) for r in results))
