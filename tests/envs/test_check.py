"""``deepgym check`` logic without sandboxes: the probes, and the judgement of their results."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from deepgym.envs.qa import check
from deepgym.envs.qa.check import Timing
from deepgym.envs.registry import load_environment, load_suite
from deepgym.judge import patch
from deepgym.judge.blame import BACKSTOP
from deepgym.models import (
    BatchResult,
    CaseResult,
    Environment,
    EvalResult,
    Evidence,
    RunResult,
    ServiceTime,
)

ADD = Environment(
    name="add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}],
    reference_solution="def add(a: int, b: int) -> int:\n    return a + b\n",
)
STACK = Environment(
    name="stack",
    entry_point="Stack",
    verifier_code="def verify(solution, test_cases):\n    return 1.0\n",
    reference_solution=(
        "class Stack:\n"
        "    def __init__(self) -> None:\n        self.items = []\n"
        "    def push(self, x: int) -> None:\n        self.items.append(x)\n"
    ),
)
PATCH_ENVS = [e for e in load_suite("builtin") if e.kind == "patch"]


def result(
    score: float = 1.0,
    *,
    passed: bool | None = None,
    error_type: str | None = None,
    verdict: bool = True,
    cases: Sequence[bool] = (),
    ms: float = 20.0,
) -> RunResult:
    if not verdict:
        return RunResult.no_verdict(error_type or "sandbox_error", "boom", execution_time_ms=ms)
    return RunResult(
        score=score,
        passed=score == 1.0 if passed is None else passed,
        error_type=error_type,
        cases=[CaseResult(name=f"test_{i}", passed=p) for i, p in enumerate(cases)],
        execution_time_ms=ms,
        service=ServiceTime(start_ms=2.0, total_ms=ms),
    )


def good_results(env: Environment) -> list[RunResult]:
    """What a sound environment's probes score."""
    out = []
    for p in check.probes(env):
        if p.expect == "full":
            out.append(result(1.0))
        elif p.expect in ("low", "not_passed", "zero"):
            out.append(result(0.0))
        else:
            out.append(result(0.0, error_type=p.expect))
    return out


def timing(ms: float = 20.0, n: int = 3) -> Timing:
    return Timing(tuple(result(1.0, ms=ms) for _ in range(n)))


def names(report: check.CheckReport) -> list[str]:
    return [c.name for c in report.failures]


# -- probes -----------------------------------------------------------------------------------


def test_function_probes() -> None:
    plan = check.probes(ADD)
    got = [p.name for p in plan]
    assert got[:4] == ["reference", "rerun_1", "rerun_2", "rerun_3"]
    assert {"empty", "stub", *(f"constant[{label}]" for label, _ in check.CONSTANTS)} <= set(got)
    assert all(p.expect == "low" for p in plan[4:] if not p.name.startswith("exploit["))
    assert all(p.expect == "zero" for p in plan if p.name.startswith("exploit["))


def test_stub_keeps_the_signature_and_does_nothing() -> None:
    stub = check.stub_answer(ADD)
    (fn,) = ast.parse(stub).body
    assert isinstance(fn, ast.FunctionDef) and fn.name == "add"
    assert [a.arg for a in fn.args.args] == ["a", "b"]
    assert isinstance(fn.body[0], ast.Pass) and len(fn.body) == 1
    assert "int" not in stub  # annotations dropped: a stub cannot fail on a missing import


def test_class_stub_and_constant() -> None:
    stub = check.stub_answer(STACK)
    namespace: dict[str, Any] = {}
    exec(stub, namespace)
    obj = namespace["Stack"]()
    assert obj.push(3) is None
    namespace = {}
    exec(check.constant_answer(STACK, "-1"), namespace)
    assert namespace["Stack"](1, 2).push(3) == -1 and namespace["Stack"]().anything() == -1


@pytest.mark.parametrize("label,source", check.CONSTANTS)
def test_constant_answers_return_their_constant(label: str, source: str) -> None:
    namespace: dict[str, Any] = {}
    exec(check.constant_answer(ADD, source), namespace)
    assert namespace["add"](1, 2, key=3) == ast.literal_eval(source)


def test_stub_without_a_reference_entry() -> None:
    env = ADD.model_copy(update={"reference_solution": "add = lambda a, b: a + b\n"})
    assert check.stub_answer(env) == "def add(*args, **kwargs):\n    pass\n"


def test_script_probes() -> None:
    env = load_environment("grid_paths")
    plan = {p.name: p for p in check.probes(env)}
    assert plan["empty"].answer == "" and plan["echo"].answer == check.ECHO_PROGRAM
    assert "stub" not in plan


@pytest.mark.parametrize("env", PATCH_ENVS, ids=lambda e: e.name)
def test_patch_probes_do_what_they_say(env: Environment) -> None:
    """Pure check of each probe against the diff rules: no sandbox needed to know the status."""
    assert env.repo_path is not None and env.reference_solution
    repo = {
        p.relative_to(env.repo_path).as_posix(): p.read_text(encoding="utf-8")
        for p in env.repo_path.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    plan = {p.name: p for p in check.probes(env)}
    assert set(plan) >= {"empty", "tampering", "garbled", "stale_context", "noop"}
    patch.patch_repo(env.reference_solution, repo)  # applies
    for name in ("empty", "tampering", "garbled", "stale_context"):
        with pytest.raises(patch.PatchError) as info:
            patch.patch_repo(plan[name].answer, repo)
        assert info.value.status == plan[name].expect, name
    noop = patch.patch_repo(plan["noop"].answer, repo)
    changed = [k for k in repo if noop[k] != repo[k]]
    assert len(changed) == 1 and noop[changed[0]] == check.NOOP_COMMENT + repo[changed[0]]


# -- judging ----------------------------------------------------------------------------------


@pytest.mark.parametrize("env", [ADD, STACK, load_environment("grid_paths"), *PATCH_ENVS])
def test_a_sound_environment_passes(env: Environment) -> None:
    report = check.judge(env, check.probes(env), good_results(env), timing())
    assert report.ok, report.summary()
    assert {"reference", "deterministic", "time_limits", "empty"} <= {c.name for c in report.checks}


def replace(env: Environment, name: str, r: RunResult) -> list[RunResult]:
    plan = check.probes(env)
    results = good_results(env)
    results[[p.name for p in plan].index(name)] = r
    return results


@pytest.mark.parametrize(
    "probe,bad,message",
    [
        ("reference", result(0.5), "the reference answer scored 0.50"),
        ("reference", result(0.0, verdict=False), "no verdict"),
        ("constant[0]", result(0.5), "a wrong answer scored 0.50"),
        ("stub", result(0.25), "it must score 0"),
        ("raising_stub", result(0.25, passed=False), "a wrong answer scored 0.25"),
        ("empty", result(1.0), "scored 1.00 and passed"),
        ("constant[None]", result(0.0, verdict=False), "no verdict (sandbox_error"),
    ],
)
def test_a_failing_probe_names_itself(probe: str, bad: RunResult, message: str) -> None:
    report = check.judge(ADD, check.probes(ADD), replace(ADD, probe, bad), timing())
    assert not report.ok
    assert probe in names(report)
    failed = next(c for c in report.failures if c.name == probe)
    assert message in failed.message
    assert probe in report.summary()


def test_a_wrong_answer_at_the_bound_is_fine() -> None:
    results = replace(ADD, "constant[0]", result(check.MAX_WRONG_SCORE))
    assert check.judge(ADD, check.probes(ADD), results, timing()).ok


def test_no_wrong_answer_may_earn_anything() -> None:
    """The bound is 0: a wrong answer that earns even a little reward fails its check."""
    assert check.MAX_WRONG_SCORE == 0.0
    for probe in ("empty", "stub", "raising_stub", "constant[None]"):
        results = replace(ADD, probe, result(0.01, passed=False))
        report = check.judge(ADD, check.probes(ADD), results, timing())
        assert [c.name for c in report.failures] == [probe]


def test_the_raising_stub_raises_from_the_entry_point() -> None:
    namespace: dict[str, object] = {}
    exec(check.raising_stub_answer(ADD), namespace)
    with pytest.raises(NotImplementedError):
        namespace["add"](1, 2)  # type: ignore[operator]
    assert "raising_stub" in [p.name for p in check.probes(ADD)]


def test_reruns_must_agree_test_for_test() -> None:
    plan = check.probes(ADD)
    results = good_results(ADD)
    results[0] = result(0.5, cases=[True, False])
    results[1] = result(0.5, cases=[False, True])
    report = check.judge(ADD, plan, results, timing())
    assert "deterministic" in names(report)
    same = good_results(ADD)
    flaky_timing = Timing((result(1.0), result(0.0, passed=False)))
    assert "deterministic" in names(check.judge(ADD, plan, same, flaky_timing))


def test_a_run_the_host_failed_says_nothing_about_determinism() -> None:
    """A reference run held back by a loaded host (``timeout``, no verdict) is left out of the
    comparison; one its verifier failed (``verifier_error``) is the environment's and counts."""
    plan = check.probes(ADD)
    held = result(0.0, verdict=False, error_type="timeout")
    starved = Timing((result(1.0), held, result(1.0)))
    report = check.judge(ADD, plan, good_results(ADD), starved)
    kept = next(c for c in report.checks if c.name == "deterministic")
    assert kept.ok and "1 the host failed left out" in kept.message
    assert report.ok
    crashed = Timing((result(1.0), result(0.0, verdict=False, error_type="verifier_error")))
    failed = next(
        c
        for c in check.judge(ADD, plan, good_results(ADD), crashed).checks
        if c.name == "deterministic"
    )
    assert not failed.ok and "verifier_error" in failed.message
    # all but one held back: too few judged runs to tell
    good = zip(plan, good_results(ADD), strict=True)
    results = [held if p.name.startswith("rerun_") else r for p, r in good]
    alone = check.judge(ADD, plan, results, Timing((held, held, held)))
    few = next(c for c in alone.checks if c.name == "deterministic")
    assert not few.ok and "only 1 of 7 runs" in few.message


@pytest.mark.parametrize(
    "t,expected",
    [
        (timing(ms=10_000 / 3 + 50), "over a third of timeout=10s"),
        (Timing(timing(ms=900).runs), "over a third of case_timeout=2s"),
        (Timing(timing(ms=900).runs, (10.0, 700.0)), "slowest case takes 700 ms"),
        (Timing(), "no judged run"),
    ],
)
def test_time_limits(t: Timing, expected: str) -> None:
    report = check.judge(ADD, check.probes(ADD), good_results(ADD), t)
    assert names(report) == ["time_limits"]
    assert expected in report.failures[0].message


def test_time_limits_fine_when_each_case_is_short() -> None:
    t = Timing(timing(ms=900).runs, (10.0, 200.0))
    assert check.judge(ADD, check.probes(ADD), good_results(ADD), t).ok


def test_timing_uses_the_median_of_the_run_times_without_start_up() -> None:
    t = Timing((result(ms=12.0), result(ms=502.0), result(ms=32.0)))
    assert t.run_ms == 30.0


def test_timing_reads_the_answers_cpu_time_as_the_limits_do() -> None:
    """A loaded host stretches the clock, not the CPU time the limits are judged on: 2,000 ms
    on the clock with 100 ms of CPU reads as the backstop's share of the clock; an answer that
    uses its CPU reads as that CPU time."""

    def timed(cpu: float, wall: float) -> RunResult:
        return result(ms=wall).model_copy(update={"evidence": Evidence(solution_cpu_ms=cpu)})

    loaded = Timing((timed(100.0, 2002.0),) * 3)
    assert loaded.run_ms == pytest.approx(2000.0 / BACKSTOP)
    assert Timing((timed(900.0, 1002.0),) * 3).run_ms == 900.0
    assert Timing((result(ms=1002.0),) * 3).run_ms == 1000.0  # no CPU time measured: the clock


@pytest.mark.parametrize("env", PATCH_ENVS[:1], ids=lambda e: e.name)
@pytest.mark.parametrize(
    "probe,bad",
    [
        ("empty", result(0.0)),  # a judged 0, but not for the reason the rules give
        ("tampering", result(0.0, error_type="patch_apply_failed")),
        ("garbled", result(0.0, error_type="solution_error")),
        ("noop", result(1.0)),
        ("noop", result(0.0, error_type="patch_apply_failed")),  # the no-op must apply
    ],
)
def test_patch_rules(env: Environment, probe: str, bad: RunResult) -> None:
    report = check.judge(env, check.probes(env), replace(env, probe, bad), timing())
    assert names(report) == [probe]


def test_no_reference_fails_by_name() -> None:
    env = ADD.model_copy(update={"reference_solution": None})
    results = [result(0.0) for _ in check.probes(env)]
    report = check.judge(env, check.probes(env), results, Timing())
    assert "reference" in names(report)
    assert "no reference answer" in report.failures[0].message


CRASH = (
    "Traceback (most recent call last):\n"
    '  File "/opt/deepgym/deepgym_judge/harness.py", line 272, in run_custom\n'
    "    return report_from_value(verify(SolutionProxy(j.session), j.cases()))\n"
    '  File "/judge/envs/432a/verifier.py", line 2, in helper\n'
    '    return x["missing"]\n'
    "KeyError: 'missing'\n"
)


def test_a_crashing_verifier_is_named_in_a_line_in_every_check() -> None:
    crashed = RunResult.no_verdict("verifier_error", CRASH)
    results = [crashed] * len(check.probes(ADD))
    report = check.judge(ADD, check.probes(ADD), results, timing())
    said = [c.message for c in report.failures if "verifier_error" in c.message]
    assert said and all("KeyError: 'missing' (verifier.py:2 in helper)" in m for m in said)
    assert not any("deepgym_judge" in m or "\n" in m or "Traceback" in m for m in said)


# -- running, with a fake client --------------------------------------------------------------


class FakeClient:
    """``run_batch`` / ``eval`` as ``DeepGym`` has them, scoring answers with ``score``."""

    def __init__(self, score: Callable[[Environment, str], RunResult]) -> None:
        self.score = score
        self.batches: list[tuple[str, int, int]] = []
        self.evals: list[int] = []

    def run_batch(
        self, env: Environment, outputs: Sequence[str], *, max_parallel: int = 8
    ) -> BatchResult:
        self.batches.append((env.name, len(outputs), max_parallel))
        return BatchResult(results=[self.score(env, o) for o in outputs])

    def eval(
        self, envs: Sequence[Environment], outputs: Mapping[str, str], *, max_parallel: int = 8
    ) -> EvalResult:
        self.evals.append(max_parallel)
        results = [self.score(e, outputs[e.name]) for e in envs]
        return EvalResult(results=results, env_names=[e.name for e in envs])


def by_answer(env: Environment, answer: str) -> RunResult:
    if answer == env.reference_solution:
        return result(1.0, ms=900.0 if len(env.test_cases or []) > 1 else 50.0)
    return result(0.0)


def test_check_environment_times_cases_alone_when_the_run_is_long() -> None:
    dg = FakeClient(by_answer)
    report = check.check_environment(ADD, dg)  # type: ignore[arg-type]
    assert report.ok, report.summary()
    probe_batch, timing_batch = dg.batches
    assert probe_batch == ("add", len(check.probes(ADD)), 8)
    assert timing_batch == ("add", check.TIMING_RUNS, 1)  # one at a time
    assert dg.evals == [1]
    tl = next(c for c in report.checks if c.name == "time_limits")
    assert "slowest case at most 48 ms" in tl.message


def test_check_environments_keeps_order_and_reports_progress() -> None:
    dg = FakeClient(by_answer)
    seen: list[tuple[int, int]] = []
    envs = [ADD, STACK, ADD.model_copy(update={"name": "add2"})]
    reports = check.check_environments(envs, dg, progress=lambda d, t: seen.append((d, t)))  # type: ignore[arg-type]
    assert [r.env_name for r in reports] == ["add", "stack", "add2"]
    assert seen[-1] == (6, 6) and len(seen) == 6
    assert check.check_environments([], dg) == []  # type: ignore[arg-type]


def test_check_environment_finds_a_weak_environment() -> None:
    def weak(env: Environment, answer: str) -> RunResult:
        if answer in (check.constant_answer(env, "0"), env.reference_solution):
            return result(1.0)
        return result(0.0)

    report = check.check_environment(ADD, FakeClient(weak))  # type: ignore[arg-type]
    assert names(report) == ["constant[0]"]
    assert not report.ok


def test_a_constant_that_scores_too_much_says_how_to_fix_the_test_set() -> None:
    env = ADD.model_copy(
        update={"test_cases": [{"args": [0, 0], "expected": 0}, *(ADD.test_cases or [])]}
    )
    plan = check.probes(env)
    i = next(i for i, p in enumerate(plan) if p.name == "constant[0]")
    results = good_results(env)
    results[i] = result(1.0, passed=True, cases=[True, True, True])
    (failed,) = check.judge(env, plan, results, timing()).failures
    assert failed.message == (
        "a wrong answer scored 1.00 and passed (it must score 0) (3/3 tests passed); to fix: "
        "add a test case that `return 0` fails"
    )
    # With a verifier of its own there is no test case to add: the verifier is what to fix.
    custom = env.model_copy(update={"verifier_code": "def verify(solution, cases):\n    ..."})
    (failed,) = check.judge(custom, plan, results, timing()).failures
    assert failed.message.endswith("to fix: make the verifier fail `return 0` (it passed)")
    # Under partial credit, the cases a constant passes pay: the advice names the scoring.
    partial = env.model_copy(update={"scoring": "partial"})
    results[i] = result(1 / 3, passed=False, cases=[True, False, False])
    (failed,) = check.judge(partial, plan, results, timing()).failures
    assert failed.message == (
        "a wrong answer scored 0.33 (it must score 0) (1/3 tests passed); to fix: with scoring "
        "'partial' the 1 case(s) it passes pay; score all-or-nothing (scoring 'all', the "
        "default), or make every case fail `return 0`"
    )


def test_runs_that_agree_on_no_verdict_are_not_deterministic() -> None:
    """A verifier that always raises: every run of the reference agrees, on no verdict; the
    check fails and says no run had one (it used to say "7 runs agree")."""
    plan = check.probes(ADD)
    results = [result(0.0, verdict=False, error_type="verifier_error") for _ in plan]
    broken = Timing(
        tuple(result(0.0, verdict=False, error_type="verifier_error") for _ in range(3))
    )
    report = check.judge(ADD, plan, results, broken)
    failed = next(c for c in report.checks if c.name == "deterministic")
    assert not failed.ok
    assert "no run of the reference had a verdict" in failed.message
    assert "agree" not in failed.message
    assert not report.ok
