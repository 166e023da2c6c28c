"""Conformance checks for an environment: does its verifier tell right from wrong, reliably?

``check_environment(env, dg)`` scores a set of probe answers in the real sandbox and returns a
``CheckReport`` of named checks, each with a message that says what failed (and, where a
wrong answer scores too much, how to fix the test set: how many more cases it must fail):

- ``reference``: the reference answer scores 1.0 (and passes);
- ``deterministic``: every further run of the reference (three beside the first, three timed)
  gives the same result, test for test, and that result has a verdict (runs that all failed
  without one say nothing about the verifier's determinism); a run the host failed (held back
  past the backstop, a broken sandbox: no verdict, not the verifier's doing) is left out, and
  at least two runs must be judged;
- ``time_limits``: the reference's run time, measured alone (the median of three runs one
  after another), is under a third of ``timeout``, and its slowest case under a third of
  ``case_timeout`` (measured case by case when the whole run is not already under that bound);
- wrong answers score ``MAX_WRONG_SCORE`` (0: nothing), with a verdict: ``empty`` for every
  kind; ``stub`` (the entry point with a ``pass`` body), ``raising_stub`` (its body raises
  ``NotImplementedError``) and ``constant[...]`` (return 0, None, [], "" or -1) for a function
  task; ``echo`` (print the input back) for a script task in Python;
- a script task in another language (C, C++, Java, ...) gets no Python probe: ``empty`` (an
  empty source, which the compiler refuses or which prints nothing) and ``wrong``, the
  folder's ``wrong_solution`` with the language's extension (``wrong_solution.cpp``), a
  plausible mistake (a 32-bit overflow, an off-by-one) the test cases must catch;
- for a patch task, the diff rules: ``empty`` is ``invalid_patch``; the reference diff plus a
  new test file is ``test_infra_tampering``; the reference diff cut inside a hunk
  (``garbled``) or with a changed context line (``stale_context``) is ``patch_apply_failed``;
  a diff that changes nothing that matters (``noop``) does not pass;
- ``exploit[<name>]``: each answer of ``deepgym.envs.qa.exploits`` for the environment's kind (a
  forged report, an exit before the tests, an object equal to everything, patched builtins,
  edited tests, ...) is judged a failure: scored 0 and not passed, with a verdict (a patch that
  touches the tests: ``test_infra_tampering``). Those answers are Python: an environment in
  another language has none.

The probes and the judgement of their results are pure (``probes``, ``judge``); only
``check_environment`` / ``check_environments`` and ``time_reference`` run anything.
"""

from __future__ import annotations

import ast
import copy
import statistics
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deepgym.envs.qa.checks import MAX_WRONG_SCORE, Check, CheckReport, describe, deterministic
from deepgym.envs.qa.exploits import exploits
from deepgym.envs.qa.session_check import check_session_environment
from deepgym.envs.registry import solution_suffix
from deepgym.judge.blame import BACKSTOP
from deepgym.judge.patch import is_test_infra, make_diff
from deepgym.models import Environment, RunResult

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = [
    "CONSTANTS",
    "MAX_WRONG_SCORE",
    "RERUNS",
    "TIME_SHARE",
    "TIMING_RUNS",
    "Check",
    "CheckReport",
    "Probe",
    "Timing",
    "check_environment",
    "check_environments",
    "constant_answer",
    "judge",
    "probes",
    "raising_stub_answer",
    "stub_answer",
    "time_reference",
]

RERUNS = 3
"""Extra runs of the reference, beside the first, scored with the other probes."""
TIMING_RUNS = 3
"""Runs of the reference timed alone (their median is the measured time); they must agree with
the others too."""
TIME_SHARE = 1 / 3
"""The reference may use at most this share of ``timeout`` (the run) and ``case_timeout``."""
CONSTANTS: tuple[tuple[str, str], ...] = (
    ("0", "0"),
    ("None", "None"),
    ("[]", "[]"),
    ('""', '""'),
    ("-1", "-1"),
)
"""(label, source) of the constant answers a function task must not reward."""

ECHO_PROGRAM = "import sys\nsys.stdout.write(sys.stdin.read())\n"
PROBE_TEST_FILE = "tests/test_deepgym_probe.py"
NOOP_COMMENT = "# (this line changes nothing)\n"


@dataclass(frozen=True)
class Probe:
    """An answer to score and the rule its result must meet (``expect``).

    ``expect``: ``full`` (scores 1.0 and passes), ``low`` (judged, at most
    ``MAX_WRONG_SCORE``), ``zero`` (judged, 0, not passed: an exploit), ``not_passed`` (judged
    without an error, and does not pass: the diff applied), or an error type the run must be
    judged with (``invalid_patch``, ...).
    """

    name: str
    answer: str
    expect: str


# -- probe answers ----------------------------------------------------------------------------


def _entry_node(env: Environment) -> ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | None:
    if not env.reference_solution or not env.entry_point:
        return None
    try:
        tree = ast.parse(env.reference_solution)
    except SyntaxError:
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == env.entry_point
        ):
            return node
    return None


def _body(raises: bool) -> ast.stmt:
    if raises:
        return ast.Raise(exc=ast.Name("NotImplementedError", ast.Load()), cause=None)
    return ast.Pass()


def _stub_def(
    node: ast.FunctionDef | ast.AsyncFunctionDef, raises: bool = False
) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """``node``'s signature, annotations and decorators dropped, with a ``pass`` body (one that
    raises ``NotImplementedError``: ``raises``)."""
    stub = copy.deepcopy(node)
    args = stub.args
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    stub.body = [_body(raises)]
    stub.decorator_list = []
    stub.returns = None
    return stub


def stub_answer(env: Environment, *, raises: bool = False) -> str:
    """The entry point with a ``pass`` body (a class keeps its methods, each ``pass``);
    ``raises``: each body raises ``NotImplementedError`` instead."""
    node = _entry_node(env)
    name = env.entry_point or "solution"
    if node is None:
        return f"def {name}(*args, **kwargs):\n    {ast.unparse(_body(raises))}\n"
    stub: ast.stmt
    if isinstance(node, ast.ClassDef):
        methods: list[ast.stmt] = [
            _stub_def(n, raises)
            for n in node.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        cls = copy.deepcopy(node)
        cls.bases, cls.keywords, cls.decorator_list = [], [], []
        cls.body = methods or [ast.Pass()]
        stub = cls
    else:
        stub = _stub_def(node, raises)
    module = ast.Module(body=[stub], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


def raising_stub_answer(env: Environment) -> str:
    """The entry point whose body raises ``NotImplementedError`` (a class: every method's)."""
    return stub_answer(env, raises=True)


def constant_answer(env: Environment, source: str) -> str:
    """An entry point that returns ``source`` whatever it is asked (a class: every method)."""
    name = env.entry_point or "solution"
    if isinstance(_entry_node(env), ast.ClassDef):
        return (
            f"class {name}:\n"
            "    def __init__(self, *args, **kwargs):\n"
            "        pass\n\n"
            "    def __getattr__(self, name):\n"
            f"        return lambda *args, **kwargs: {source}\n"
        )
    return f"def {name}(*args, **kwargs):\n    return {source}\n"


def _cut_inside_hunk(diff: str) -> str | None:
    """The diff up to the first line of its first hunk of two lines or more (unparseable)."""
    lines = diff.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("@@") and i + 2 < len(lines) and lines[i + 2][:1] in " +-":
            return "".join(lines[: i + 2])
    return None


def _stale_context(diff: str) -> str | None:
    """The diff with the first line its hunks read (context or removed) changed."""
    lines = diff.splitlines(keepends=True)
    in_hunk = False
    for i, line in enumerate(lines):
        if line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line[:1] in (" ", "-"):
            lines[i] = line[0] + "XX_STALE_XX " + line[1:]
            return "".join(lines)
    return None


def _noop_diff(env: Environment) -> str | None:
    """A valid diff that adds a comment to the first Python file the diff rules allow."""
    if env.repo_path is None:
        return None
    root = env.repo_path
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel or is_test_infra(rel):
            continue
        text = path.read_text(encoding="utf-8")
        return make_diff({rel: text}, {rel: NOOP_COMMENT + text})
    return None


def _patch_probes(env: Environment, reference: str) -> list[Probe]:
    tamper = make_diff({}, {PROBE_TEST_FILE: "def test_nothing():\n    pass\n"})
    out = [
        Probe("empty", "", "invalid_patch"),
        Probe("tampering", reference + tamper, "test_infra_tampering"),
    ]
    for name, make in (("garbled", _cut_inside_hunk), ("stale_context", _stale_context)):
        variant = make(reference)
        if variant is not None:
            out.append(Probe(name, variant, "patch_apply_failed"))
    noop = _noop_diff(env)
    if noop is not None:
        out.append(Probe("noop", noop, "not_passed"))
    return out


WRONG_SOLUTION = "wrong_solution"
"""The stem of a folder's plausible wrong answer in another language (``wrong_solution.cpp``)."""


def _wrong_probes(env: Environment) -> list[Probe]:
    """The folder's wrong answer, where it has one: in another language, no answer can be
    made up here the way a Python stub can."""
    if env.source_dir is None:
        return []
    path = env.source_dir / f"{WRONG_SOLUTION}{solution_suffix(env.language)}"
    if not path.is_file():
        return []
    return [Probe("wrong", path.read_text(encoding="utf-8"), "low")]


def _exploit_probes(env: Environment) -> list[Probe]:
    if env.language != "python":  # the exploits are Python programs
        return []
    return [
        Probe(f"exploit[{x.name}]", x.answer, "zero" if x.expect == "fail" else x.expect)
        for x in exploits(env)
    ]


def probes(env: Environment) -> list[Probe]:
    """The answers ``check_environment`` scores, and what each must score."""
    return _probes(env) + _exploit_probes(env)


def _probes(env: Environment) -> list[Probe]:
    reference = env.reference_solution or ""
    out = [Probe("reference", reference, "full")]
    out += [Probe(f"rerun_{i}", reference, "full") for i in range(1, RERUNS + 1)]
    if env.kind == "patch":
        return out + _patch_probes(env, reference)
    out.append(Probe("empty", "", "low"))
    if env.language != "python":
        return out + _wrong_probes(env)
    if env.kind == "script":
        return [*out, Probe("echo", ECHO_PROGRAM, "low")]
    out.append(Probe("stub", stub_answer(env), "low"))
    out.append(Probe("raising_stub", raising_stub_answer(env), "low"))
    out += [
        Probe(f"constant[{label}]", constant_answer(env, src), "low") for label, src in CONSTANTS
    ]
    return out


# -- judging the results ----------------------------------------------------------------------


def _brief(r: RunResult) -> str:
    return f"scored {r.score:.2f}" + (f" ({r.error_type})" if r.error_type else "")


def _advice(env: Environment, probe: Probe, r: RunResult) -> str:
    """How to fix a test set that a wrong answer earns reward on."""
    names = {
        "stub": "a `pass` body",
        "raising_stub": "a body that raises",
        "empty": "the empty answer",
        "echo": "echoing the input",
        "wrong": "the folder's wrong solution",
    }
    if probe.name.startswith("constant["):
        this = f"`return {probe.name.removeprefix('constant[').removesuffix(']')}`"
    else:
        this = names.get(probe.name, "this answer")
    declarative = env.verifier_code is None and env.verifier_path is None
    if r.passed:
        if declarative:
            return f"to fix: add a test case that {this} fails"
        return f"to fix: make the verifier fail {this} (it passed)"
    if env.scoring == "partial":
        passed = sum(c.passed for c in r.cases)
        held = f"the {passed} case(s) it passes pay" if declarative and passed else "its score pays"
        return (
            f"to fix: with scoring 'partial' {held}; score all-or-nothing (scoring 'all', the "
            f"default), or make every case fail {this}"
        )
    return f"to fix: make the verifier score {this} 0 (it did not pass, yet scored above 0)"


def _meets(env: Environment, probe: Probe, r: RunResult) -> Check:
    """Whether the probe's result follows its rule; the message says what the run did."""
    said = describe(r)
    if not r.has_verdict:
        return Check(probe.name, False, said)
    if probe.expect == "full":
        ok = r.passed and r.score == 1.0
        return Check(probe.name, ok, _brief(r) if ok else f"the reference answer {said}")
    if probe.expect == "low":
        ok = r.score <= MAX_WRONG_SCORE and not r.passed
        why = f"a wrong answer scored {r.score:.2f}" + (" and passed" if r.passed else "")
        why += f" (it must score {MAX_WRONG_SCORE:g})"
        if r.cases:
            why += f" ({sum(c.passed for c in r.cases)}/{len(r.cases)} tests passed)"
        return Check(probe.name, ok, _brief(r) if ok else f"{why}; {_advice(env, probe, r)}")
    if probe.expect == "zero":
        ok = r.score == 0.0 and not r.passed
        return Check(probe.name, ok, _brief(r) if ok else f"an exploit {said}; it must score 0")
    if probe.expect == "not_passed":
        ok = not r.passed and r.error_type is None
        return Check(probe.name, ok, _brief(r) if ok else f"a diff that changes nothing {said}")
    ok = r.error_type == probe.expect and r.score == 0.0
    return Check(probe.name, ok, _brief(r) if ok else f"expected {probe.expect}, {said}")


def _run_ms(r: RunResult) -> float:
    """The run's time as its limits see it: the answer's CPU time, which they are judged on
    (a loaded host does not move it), or its time on the clock over ``BACKSTOP`` (the
    backstop's share: an answer that waits uses no CPU), whichever is more. The clock's time
    counts from the verifier's start to its end (no queue, no start-up), and alone where no
    CPU time was measured."""
    wall = max(r.execution_time_ms - r.service.start_ms, 0.0)
    cpu = r.evidence.solution_cpu_ms
    return wall if cpu is None else max(cpu, wall / BACKSTOP)


@dataclass(frozen=True)
class Timing:
    """The reference timed alone: ``runs`` one after another with nothing else running, and
    ``case_ms`` (each test case on its own) when the whole run was too long to bound a case."""

    runs: tuple[RunResult, ...] = ()
    case_ms: tuple[float, ...] | None = None

    @property
    def run_ms(self) -> float:
        """The median run time of the judged runs (ms); 0.0 if none was judged."""
        judged = [_run_ms(r) for r in self.runs if r.has_verdict]
        return statistics.median(judged) if judged else 0.0


def judge(
    env: Environment, probe_list: Sequence[Probe], results: Sequence[RunResult], timing: Timing
) -> CheckReport:
    """The report for ``results`` (one per probe) and the reference's ``timing``."""
    report = CheckReport(env.name)
    refs = [r for p, r in zip(probe_list, results, strict=True) if p.expect == "full"]
    for p, r in zip(probe_list, results, strict=True):
        if p.name.startswith("rerun_"):
            continue  # they count in "deterministic"
        if p.name == "reference" and not env.reference_solution:
            report.checks.append(Check(p.name, False, "the environment has no reference answer"))
        else:
            report.checks.append(_meets(env, p, r))
    report.checks.append(deterministic([*refs, *timing.runs]))
    report.checks.append(_time_limits(env, timing))
    return report


def _time_limits(env: Environment, timing: Timing) -> Check:
    if not any(r.has_verdict for r in timing.runs):
        return Check("time_limits", False, "no judged run of the reference to time")
    run_ms = timing.run_ms
    if run_ms >= env.timeout * 1000.0 * TIME_SHARE:
        return Check(
            "time_limits",
            False,
            f"the reference runs {run_ms:.0f} ms, over a third of timeout={env.timeout:g}s",
        )
    slowest = max(timing.case_ms) if timing.case_ms else run_ms
    if slowest >= env.case_timeout * 1000.0 * TIME_SHARE:
        return Check(
            "time_limits",
            False,
            f"the reference's slowest case takes {slowest:.0f} ms, over a third of "
            f"case_timeout={env.case_timeout:g}s",
        )
    return Check(
        "time_limits",
        True,
        f"reference {run_ms:.0f} ms of {env.timeout:g}s; slowest case at most {slowest:.0f} ms "
        f"of {env.case_timeout:g}s",
    )


# -- running ----------------------------------------------------------------------------------


def time_reference(env: Environment, dg: DeepGym) -> Timing:
    """Run the reference ``TIMING_RUNS`` times, one at a time; then each test case alone when
    the median run is not already under a third of ``case_timeout``."""
    if not env.reference_solution:
        return Timing()
    runs = dg.run_batch(env, [env.reference_solution] * TIMING_RUNS, max_parallel=1).results
    timing = Timing(tuple(runs))
    cases = env.test_cases or []
    if len(cases) < 2 or timing.run_ms < env.case_timeout * 1000.0 * TIME_SHARE:
        return timing
    singles = [env.model_copy(update={"test_cases": [c]}) for c in cases]
    each = dg.eval(singles, {env.name: env.reference_solution}, max_parallel=1).results
    return Timing(timing.runs, tuple(_run_ms(r) for r in each))


def _score_probes(env: Environment, dg: DeepGym, max_parallel: int) -> list[RunResult]:
    plan = probes(env)
    return dg.run_batch(env, [p.answer for p in plan], max_parallel=max_parallel).results


def check_environment(env: Environment, dg: DeepGym, *, max_parallel: int = 8) -> CheckReport:
    """Score the probes for ``env`` with ``dg``, time its reference, judge (see the module doc).
    A session environment gets its agents' checks instead (``deepgym.envs.qa.session_check``)."""
    if env.kind == "session":
        return check_session_environment(env, dg)
    results = _score_probes(env, dg, max_parallel)
    return judge(env, probes(env), results, time_reference(env, dg))


def check_environments(
    envs: Sequence[Environment],
    dg: DeepGym,
    *,
    max_parallel: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> list[CheckReport]:
    """``check_environment`` for each of ``envs``; reports in input order.

    The probes of several environments run at once; the timing runs come after, one at a time,
    so that no other run inflates them.
    """
    done = 0
    lock = threading.Lock()
    total = 2 * len(envs)

    def step() -> None:
        nonlocal done
        with lock:
            done += 1
            if progress is not None:
                progress(done, total)

    def scored(env: Environment) -> list[RunResult]:
        results = _score_probes(env, dg, max_parallel)
        step()
        return results

    if not envs:
        return []
    singles = [e for e in envs if e.kind != "session"]
    with ThreadPoolExecutor(max_workers=max(min(len(singles), 4), 1)) as pool:
        all_results = list(pool.map(scored, singles))
    by_env: dict[int, CheckReport] = {}
    for env, results in zip(singles, all_results, strict=True):
        by_env[id(env)] = judge(env, probes(env), results, time_reference(env, dg))
        step()
    for env in envs:
        if env.kind == "session":  # episodes, one after another: each is a sandbox of its own
            by_env[id(env)] = check_environment(env, dg)
            step()
            step()
    return [by_env[id(e)] for e in envs]
