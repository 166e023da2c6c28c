"""Amplified test cases: inputs that mutation testing found the tests lacked, with the
reference's outputs, added to an environment's tests.

``deepgym check --augment`` (``qa --augment``) finds them (``deepgym.envs.qa.augment``); this
module says where they are kept and how an environment takes them:

- an environment folder of one's own keeps them in its ``test_cases.json``, appended as
  declarative cases (``{"args", "expected"}``, a patch task's with its ``"call"``);
- a suite's environment (HumanEval, a built-in) keeps them in a side file, by default
  ``$DEEPGYM_HOME/augmented/<suite>.json``, which ``load_suite(name, augmented=True)`` reads.
  A side file is ``{"suite": name, "cases": {environment: [case, ...]}}``; a case holds the
  Python literals of its ``args``, ``kwargs`` and ``expected`` (so that a tuple stays a tuple)
  and, for a patch task, its ``call``.

``with_cases(env, cases)`` gives the environment with the cases added: a HumanEval problem's as
asserts appended to its ``check`` (``assert candidate(ARGS) == EXPECTED``; a float within
1e-6, relative above 1), any other's as declarative cases appended to its test cases. Only an
environment whose test cases all have that declarative shape, or a HumanEval problem, takes
them (``unsupported`` says why another does not): a verifier that reads no test cases has
nowhere to put them.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym.envs.verifiers.differential import has_float
from deepgym.exceptions import ConfigError
from deepgym.home import deepgym_home
from deepgym.judge.compare import normalise
from deepgym.models import Environment

__all__ = [
    "AmplifiedCase",
    "apply_side_file",
    "fitting",
    "humaneval_assert",
    "read_side_file",
    "side_file",
    "unsupported",
    "with_cases",
    "write_folder",
    "write_side_file",
]

FLOAT_TOLERANCE = 1e-6
"""How far a HumanEval assert lets a float answer be from the reference's (relative above 1)."""


@dataclass(frozen=True)
class AmplifiedCase:
    """One added test case: the function called (an entry point, or a patch task's
    ``"module:function"``), its arguments and the reference's value there."""

    name: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    expected: Any

    @property
    def key(self) -> str:
        """The case's identity (its call and arguments)."""
        return repr([self.name, list(self.args), dict(self.kwargs)])

    def declarative(self) -> dict[str, Any]:
        """The case as ``test_cases.json`` states one (JSON: tuples as lists)."""
        case: dict[str, Any] = {}
        if ":" in self.name:
            case["call"] = self.name
        case["args"] = normalise(list(self.args))
        if self.kwargs:
            case["kwargs"] = normalise(dict(self.kwargs))
        case["expected"] = normalise(self.expected)
        return case

    def to_json(self) -> dict[str, str]:
        """The case as a side file keeps it (Python literals)."""
        out = {"call": self.name, "args": repr(list(self.args)), "expected": repr(self.expected)}
        if self.kwargs:
            out["kwargs"] = repr(dict(self.kwargs))
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> AmplifiedCase:
        """A side file's case; ``ConfigError`` naming ``where`` when it does not read."""
        try:
            args = ast.literal_eval(data["args"])
            kwargs = ast.literal_eval(data.get("kwargs", "{}"))
            expected = ast.literal_eval(data["expected"])
            name = data["call"]
        except (KeyError, TypeError, ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ConfigError(f"{where}: not an amplified case ({exc!r})") from None
        if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(name, str):
            raise ConfigError(f"{where}: args must be a list, kwargs a dict, call a name")
        return cls(name, tuple(args), tuple(sorted(kwargs.items())), expected)


# -- where they are kept -----------------------------------------------------------------------


def side_file(suite: str, path: str | Path | None = None) -> Path:
    """The side file of ``suite``: ``path`` where given, else under ``$DEEPGYM_HOME``."""
    if path is not None:
        return Path(path)
    return deepgym_home() / "augmented" / f"{suite}.json"


def read_side_file(path: Path) -> dict[str, list[AmplifiedCase]]:
    """The cases a side file keeps, by environment name (``ConfigError`` when it does not
    read as one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such side file of amplified tests") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable side file ({exc})") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, dict):
        raise ConfigError(f"{path}: a side file is {{'suite': ..., 'cases': {{env: [...]}}}}")
    out: dict[str, list[AmplifiedCase]] = {}
    for env, listed in cases.items():
        if not isinstance(listed, list):
            raise ConfigError(f"{path}: cases.{env}: a list of cases")
        where = f"{path}: cases.{env}"
        out[env] = [AmplifiedCase.from_json(c, f"{where}[{i}]") for i, c in enumerate(listed)]
    return out


def write_side_file(
    path: Path, suite: str, added: Mapping[str, Sequence[AmplifiedCase]]
) -> dict[str, int]:
    """Add ``added`` to the side file at ``path`` (made if missing), each case once; how many
    cases each environment gained."""
    kept = read_side_file(path) if path.exists() else {}
    gained: dict[str, int] = {}
    for env, cases in added.items():
        have = kept.setdefault(env, [])
        known = {c.key for c in have}
        gained[env] = 0
        for case in cases:
            if case.key not in known:
                known.add(case.key)
                have.append(case)
                gained[env] += 1
    data = {
        "suite": suite,
        "cases": {env: [c.to_json() for c in cases] for env, cases in sorted(kept.items())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return gained


def write_folder(folder: Path, cases: Sequence[AmplifiedCase]) -> int:
    """Append ``cases`` to the folder's ``test_cases.json`` as declarative cases, each once;
    how many were added."""
    path = folder / "test_cases.json"
    existing = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(existing, list):
        raise ConfigError(f"{path}: must be a JSON list of test cases")
    known = {json.dumps(_shape(c), sort_keys=True) for c in existing if isinstance(c, dict)}
    added = 0
    for case in cases:
        data = case.declarative()
        text = json.dumps(_shape(data), sort_keys=True)
        if text not in known:
            known.add(text)
            existing.append(data)
            added += 1
    if added:
        path.write_text(json.dumps(existing, indent=1) + "\n", encoding="utf-8")
    return added


def _shape(case: dict[str, Any]) -> dict[str, Any]:
    return {k: case.get(k) for k in ("call", "args", "kwargs")}


# -- how an environment takes them -------------------------------------------------------------


def _humaneval(env: Environment) -> bool:
    from deepgym.envs.humaneval import VERIFIER

    return env.verifier_path == VERIFIER


def unsupported(env: Environment) -> str | None:
    """Why ``env`` cannot take amplified cases, or None when it can."""
    if _humaneval(env):
        return None
    cases = env.test_cases or []
    if not cases:
        return "its verifier reads no test cases, so there is nowhere to add one"
    for i, case in enumerate(cases):
        if "args" not in case or "expected" not in case:
            return f"test_cases[{i}] is not a declarative case (args and expected)"
        if (env.kind == "patch") != ("call" in case):
            return f"test_cases[{i}] is not shaped as this kind's declarative case"
    return None


def fitting(env: Environment, cases: Sequence[AmplifiedCase]) -> list[AmplifiedCase]:
    """The ``cases`` ``env`` can state (a HumanEval assert has no form for a float inside a
    container); none where it takes no case at all (``unsupported``)."""
    if unsupported(env) is not None:
        return []
    if _humaneval(env):
        return [c for c in cases if humaneval_assert("candidate", c) is not None]
    return list(cases)


def with_cases(env: Environment, cases: Sequence[AmplifiedCase]) -> Environment:
    """``env`` with ``cases`` added, each as one test at the end of its tests, in order (see
    the module's docstring); ``ConfigError`` where it cannot take them all (``fitting``)."""
    why = unsupported(env)
    if why is not None:
        raise ConfigError(f"{env.name}: cannot add test cases: {why}")
    if len(fitting(env, cases)) != len(cases):
        raise ConfigError(f"{env.name}: a case has no form in this environment's tests")
    if not cases:
        return env
    if _humaneval(env):
        spec = dict((env.test_cases or [{}])[0])
        spec["test"] = _with_asserts(spec["test"], cases)
        return env.model_copy(update={"test_cases": [spec]})
    added = [c.declarative() for c in cases]
    return env.model_copy(update={"test_cases": [*(env.test_cases or []), *added]})


def humaneval_assert(param: str, case: AmplifiedCase) -> str | None:
    """The assert that checks ``case`` in a HumanEval ``check`` whose candidate is ``param``;
    None where the expected value holds a float inside a container (no plain assert fits)."""
    call = ", ".join([*map(repr, case.args), *(f"{k}={v!r}" for k, v in case.kwargs)])
    got = f"{param}({call})"
    value = case.expected
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        bound = f"{FLOAT_TOLERANCE!r} * max(1.0, abs({value!r}))"
        return f"assert abs({got} - {value!r}) <= {bound}"
    if has_float(value):
        return None
    return f"assert {got} == {value!r}"


def _with_asserts(test: str, cases: Sequence[AmplifiedCase]) -> str:
    """HumanEval's ``test`` source with one assert per case appended to ``check``'s body."""
    tree = ast.parse(test)
    check = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )
    if check is None or not check.args.args:
        raise ConfigError("a HumanEval test without check(candidate)")
    param = check.args.args[0].arg
    for case in cases:
        text = humaneval_assert(param, case)
        if text is None:
            raise ConfigError(f"{case.key}: no HumanEval assert states it")
        check.body += ast.parse(text).body
    return ast.unparse(tree) + "\n"


def apply_side_file(envs: Sequence[Environment], path: Path) -> list[Environment]:
    """``envs`` with the cases the side file at ``path`` keeps for them added."""
    kept = read_side_file(path)
    return [with_cases(e, kept[e.name]) if kept.get(e.name) else e for e in envs]
