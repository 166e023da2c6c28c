"""Verifier for mutation testing: does an answer agree with a reference on given inputs?

Runs inside the sandbox's verifier process (standard library only). Its one test case is a
spec: the reference (``reference``: a function task's program; ``repo``: a patch task's
patched repository, ``{path: text}``), the comparison (``compare``) and ``calls``, each
``[name, text]`` where ``text`` is the Python literal of ``[args, kwargs]`` (a literal keeps a
tuple a tuple, which JSON would not). The reference is trusted data (it ships with the
environment, as HumanEval's canonical solution does) and runs here; the answer's function is an
RPC into the solution process, its calls sent ahead of their replies. The modes (``mode``):

- ``domain``: the reference, as the answer, against itself. One case per call the reference
  accepts here, named ``input_<i>`` (``i`` the call's index in the spec), passed when the answer
  agrees; its message is the Python literal of ``[seconds, value]``: the reference's time and
  value (empty where that does not fit in a message). A call on which the reference raises,
  runs past ``REFERENCE_S``, needs more than ``HEADROOM_BYTES`` of new memory or returns what
  cannot be written down is outside the task: it gets no case. With ``budget``, the reference
  stops being asked once its calls have taken that many seconds in all.
- ``compare``: an answer against the values the domain run found (each call is ``[name, text,
  value]``, the value a literal too); the reference does not run. One case per call, in order,
  stopping at the first disagreement with ``first``; a failed case's message says how the
  answer failed, if it raised or timed out.
- ``trace``: the environment's own verifier (``verifier``: its source; ``cases``: its test
  cases) runs against the reference in place of an answer, and every call it makes is recorded:
  one case per call, its message the literal of ``[name, args, kwargs]``. This is how the inputs
  of a verifier-only environment are learned: shaped like the reference's own calls.

Floats agree within the float comparison's tolerance whatever ``compare`` says, so a reordered
float sum is no disagreement.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib.util
import resource
import signal
import sys
import time
from typing import Any

try:  # the judge package, as the sandbox mounts it
    from deepgym_judge import compare  # type: ignore[import-not-found]
    from deepgym_judge.errors import SolutionTimeout  # type: ignore[import-not-found]
except ImportError:  # a sandbox that runs the judge from the installed package
    from deepgym.judge import compare
    from deepgym.judge.errors import SolutionTimeout

MESSAGE_CHARS = 480
"""The longest message a case carries (the judge keeps 500 characters of one)."""
REFERENCE_S = 0.05
"""The longest one call of the reference may take here; a slower input is outside the task, so
that an answer's own time limit is never why it disagrees."""
HEADROOM_BYTES = 1 << 30
"""The most new address space one call of the reference may take (``RLIMIT_AS`` for its
duration): a boundary input that would allocate without end is outside the task."""


class _TooSlow(BaseException):
    """The reference's call ran past ``REFERENCE_S`` (a ``BaseException``: the reference's own
    ``except Exception`` cannot swallow it)."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise _TooSlow


class _Bounds:
    """Time and memory bounds on the reference's calls, undone on exit (a pool worker runs
    other verifiers in this process afterwards)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> _Bounds:
        try:
            self.old_handler: Any = signal.signal(signal.SIGALRM, _alarm)
        except ValueError:  # not the main thread: no alarm
            self.old_handler = None
        self.old_as = resource.getrlimit(resource.RLIMIT_AS)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.old_handler is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old_handler)

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """(True, value) or (False, None) when the call raised or passed a bound."""
        soft, hard = self.old_as
        used = _address_space()
        limit = soft if used is None else used + HEADROOM_BYTES
        for bound in (soft, hard):
            if bound != resource.RLIM_INFINITY:
                limit = min(limit, bound)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            if self.old_handler is not None:
                signal.setitimer(signal.ITIMER_REAL, self.seconds)
            try:
                return True, fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
            finally:
                if self.old_handler is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        except (Exception, _TooSlow):  # outside the task: the reference refuses it
            return False, None


def _address_space() -> int | None:
    """This process's address space in bytes; None where ``/proc`` does not say (then the
    memory bound is the one the process already has)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * resource.getpagesize()


# -- the reference -------------------------------------------------------------------------------


class _Files:
    """A meta path finder and loader over a patched repository held in memory."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        rel = name.replace(".", "/")
        for candidate, package in ((f"{rel}/__init__.py", True), (f"{rel}.py", False)):
            if candidate in self.files:
                spec = importlib.util.spec_from_loader(name, self, is_package=package)  # type: ignore[arg-type]
                if spec is not None:
                    spec.origin = candidate
                return spec
        return None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        path = module.__spec__.origin
        module.__file__ = path
        exec(compile(self.files[path], path, "exec"), module.__dict__)


class _Reference:
    """The reference's functions by the names an answer's are called by: a function task's
    module attributes, or a patch task's ``"package.module:attr"`` imported from memory."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.namespace: dict[str, Any] = {"__name__": "reference"}
        self.finder: _Files | None = None
        self.before = set(sys.modules)
        if spec.get("repo") is not None:
            self.finder = _Files(spec["repo"])
            sys.meta_path.insert(0, self.finder)
        if spec.get("reference") is not None:
            exec(compile(spec["reference"], "<reference>", "exec"), self.namespace)

    def resolve(self, name: str) -> Any:
        if ":" not in name:
            return self.namespace[name]
        module, _, attr = name.partition(":")
        __import__(module)
        obj: Any = sys.modules[module]
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def close(self) -> None:
        if self.finder is not None:
            sys.meta_path.remove(self.finder)
            for name in set(sys.modules) - self.before:
                del sys.modules[name]


# -- compare -------------------------------------------------------------------------------------


def has_float(x: Any) -> bool:
    """Whether ``x`` is a float or holds one (in a list, tuple, set or dict's values)."""
    if isinstance(x, float):
        return True
    if isinstance(x, list | tuple | set | frozenset):
        return any(has_float(v) for v in x)
    if isinstance(x, dict):
        return any(has_float(v) for v in x.values())
    return False


def _literal(value: Any) -> str | None:
    """``value``'s Python literal, or None where it does not read back as itself."""
    try:
        text = repr(value)
        return text if ast.literal_eval(text) == value else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _agree(got: Any, expected: Any, how: str) -> bool:
    if how == "exact" and has_float(expected):
        how = "float"
    return bool(compare.equal(got, expected, how))


_Expected = tuple[int, str, list[Any], dict[str, Any], Any, float]
"""A call with its expected value: its index, name, args, kwargs, value, and the seconds the
reference took for it."""


def _expected(spec: dict[str, Any], reference: _Reference) -> list[_Expected]:
    """The reference's value for each call it accepts, until the calls have taken ``budget``
    seconds in all (see the module's docstring)."""
    out: list[_Expected] = []
    budget = float("inf") if spec.get("budget") is None else float(spec["budget"])
    spent = 0.0
    with _Bounds(REFERENCE_S) as bounds:
        for i, (name, text) in enumerate(spec["calls"]):
            if spent > budget:
                break  # the rest are outside what this run can ask
            args, kwargs = ast.literal_eval(text)
            try:
                fn = reference.resolve(name)
            except Exception:  # a name the reference does not define: outside the task
                continue
            t0 = time.perf_counter()
            ok, value = bounds.call(fn, args, kwargs)
            took = time.perf_counter() - t0
            spent += took
            if ok and _literal(value) is not None:
                out.append((i, name, args, kwargs, value, took))
    return out


def _stated(spec: dict[str, Any]) -> list[_Expected]:
    """A compare run's calls, each with the value the domain run found."""
    out: list[_Expected] = []
    for i, (name, text, value) in enumerate(spec["calls"]):
        args, kwargs = ast.literal_eval(text)
        out.append((i, name, args, kwargs, ast.literal_eval(value), 0.0))
    return out


def _compare(
    solution: Any, spec: dict[str, Any], expected: list[_Expected]
) -> list[dict[str, Any]]:
    how = spec.get("compare", "exact")
    first = bool(spec.get("first"))
    domain = spec.get("mode") == "domain"
    cases: list[dict[str, Any]] = []
    for name, group in _runs(expected):
        answer = solution.ahead(name, [(e[2], e[3]) for e in group])
        for i, _, args, kwargs, value, took in group:
            try:
                got = answer(*args, **kwargs)
            except SolutionTimeout as exc:
                same, message = False, f"timeout: {exc}"
            except Exception as exc:  # the answer's failure on this input: they disagree
                same, message = False, type(exc).__name__
            else:
                same, message = _agree(got, value, how), ""
            if same and domain:  # the reference's seconds and value, where they fit
                text = repr([round(took, 6), value])
                message = text if len(text) <= MESSAGE_CHARS else ""
            cases.append({"name": f"input_{i}", "passed": same, "message": message[:MESSAGE_CHARS]})
            if first and not same:
                return cases
    return cases


def _runs(expected: list[_Expected]) -> list[tuple[str, list[_Expected]]]:
    """The calls in order, grouped into runs of one name (each run is sent ahead at once)."""
    out: list[tuple[str, list[_Expected]]] = []
    for item in expected:
        if out and out[-1][0] == item[1]:
            out[-1][1].append(item)
        else:
            out.append((item[1], [item]))
    return out


# -- trace ---------------------------------------------------------------------------------------


class _Recorder:
    """The reference in the place of an answer: each call is made here and recorded."""

    def __init__(self, reference: _Reference, calls: list[str]) -> None:
        self._reference = reference
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            text = _literal([name, list(args), kwargs])
            if text is not None and len(text) <= MESSAGE_CHARS:
                self._calls.append(text)
            return self._reference.resolve(name)(*args, **kwargs)

        return call

    def __getitem__(self, name: str) -> Any:
        return self.__getattr__(name)

    def ahead(self, name: str, calls: list[tuple[list[Any], dict[str, Any]]]) -> Any:
        return self.__getattr__(name)

    def get(self, name: str) -> Any:
        return self._reference.resolve(name)


def _trace(spec: dict[str, Any], reference: _Reference) -> list[dict[str, Any]]:
    module = type(sys)("traced_verifier")
    module.process_cache = {}  # type: ignore[attr-defined]
    exec(compile(spec["verifier"], "<verifier>", "exec"), module.__dict__)
    calls: list[str] = []
    # A verifier that fails part way: the calls it made before are still the reference's own.
    with contextlib.suppress(Exception):
        module.verify(_Recorder(reference, calls), spec.get("cases") or [])
    return [{"name": f"call_{i}", "passed": True, "message": c} for i, c in enumerate(calls)]


def verify(solution: Any, test_cases: list[dict[str, Any]]) -> dict[str, Any]:
    """See the module's docstring: ``compare`` (the default) or ``trace``."""
    (spec,) = test_cases
    if spec.get("mode") == "compare":
        cases = _compare(solution, spec, _stated(spec))
    else:
        reference = _Reference(spec)
        try:
            if spec.get("mode") == "trace":
                cases = _trace(spec, reference)
                return {"score": 1.0, "passed": True, "cases": cases}
            cases = _compare(solution, spec, _expected(spec, reference))
        finally:
            reference.close()
    good = sum(1 for c in cases if c["passed"])
    return {
        "score": good / len(cases) if cases else 0.0,
        "passed": bool(cases) and good == len(cases),
        "cases": cases,
    }
