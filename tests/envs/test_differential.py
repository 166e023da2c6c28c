"""The differential step of mutation testing: the sandbox-side verifier, run here in-process
against answers held in this process, and the host's reading of its runs (pure)."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

from deepgym.envs.qa import differential as host
from deepgym.envs.qa.differential import Call, Domain
from deepgym.envs.registry import load_environment
from deepgym.envs.verifiers import differential
from deepgym.models import CaseResult, Environment, RunResult

REFERENCE = (
    "import time\n"
    "def f(x):\n"
    "    if x < 0:\n"
    "        raise ValueError('outside the task')\n"
    "    if x == 7:\n"
    "        time.sleep(5)\n"
    "    if x == 8:\n"
    "        return [0] * (1 << 40)\n"
    "    if x == 9:\n"
    "        return object()\n"
    "    return x * 2\n"
)


class _Answer:
    """An answer held here: ``solution.f(...)`` and ``solution.ahead('f', calls)``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.asked: list[Any] = []

    def ahead(self, name: str, calls: list[tuple[list[Any], dict[str, Any]]]) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.asked.append(args)
            return self.fn(*args, **kwargs)

        return call

    def __getattr__(self, name: str) -> Any:
        return self.fn


def _spec(xs: list[int], **more: Any) -> dict[str, Any]:
    calls = [["f", repr([[x], {}])] for x in xs]
    return {"reference": REFERENCE, "calls": calls, **more}


def test_an_input_the_reference_refuses_gets_no_case() -> None:
    """Raising, running past the time bound, allocating past the memory bound, returning what
    cannot be written down: outside the task, so the answer is never asked it."""
    answer = _Answer(lambda x: x * 2)
    report = differential.verify(answer, [_spec([1, -1, 7, 8, 9, 2], mode="domain")])
    assert [c["name"] for c in report["cases"]] == ["input_0", "input_5"]
    assert all(c["passed"] for c in report["cases"]) and report["passed"]
    timed = [ast.literal_eval(c["message"]) for c in report["cases"]]
    assert [v for _, v in timed] == [2, 4]
    assert all(0.0 <= t < differential.REFERENCE_S for t, _ in timed)
    assert answer.asked == [(1,), (2,)]


def test_the_domain_stops_asking_past_its_budget() -> None:
    spec = _spec([1, 2, 3], mode="domain", budget=0.0)
    assert [c["name"] for c in differential.verify(_Answer(lambda x: x * 2), [spec])["cases"]] == [
        "input_0"
    ]


def _stated(pairs: list[tuple[Any, Any]], **more: Any) -> dict[str, Any]:
    calls = [["f", repr([[x], {}]), repr(v)] for x, v in pairs]
    return {"mode": "compare", "calls": calls, **more}


def test_compare_stops_at_the_first_disagreement() -> None:
    answer = _Answer(lambda x: x * 2 if x < 3 else x + 2)
    spec = _stated([(1, 2), (2, 4), (3, 6), (4, 8)], first=True)
    report = differential.verify(answer, [spec])
    assert [(c["name"], c["passed"]) for c in report["cases"]] == [
        ("input_0", True), ("input_1", True), ("input_2", False),
    ]  # fmt: skip
    assert not report["passed"]


def test_a_raising_answer_disagrees_and_floats_agree_within_tolerance() -> None:
    spec = _stated([(1, 1 / 3)])
    assert differential.verify(_Answer(lambda x: x / 3 + 1e-12), [spec])["passed"]

    def boom(x: int) -> int:
        raise RuntimeError("no")

    (case,) = differential.verify(_Answer(boom), [spec])["cases"]
    assert not case["passed"] and case["message"] == "RuntimeError"


def test_a_tuple_stays_a_tuple() -> None:
    answer = _Answer(lambda t: (*t, 1))
    assert differential.verify(answer, [_stated([((2, 3), (2, 3, 1))])])["passed"]
    assert answer.asked == [((2, 3),)]
    # a value compares as the judge compares it: a tuple and a list alike
    assert differential.verify(answer, [_stated([((2, 3), [2, 3, 1])])])["passed"]


def test_the_bounds_are_undone() -> None:
    import resource
    import signal

    before = (signal.getsignal(signal.SIGALRM), resource.getrlimit(resource.RLIMIT_AS))
    differential.verify(_Answer(lambda x: x * 2), [_spec([7, 8, 1], mode="domain")])
    assert (signal.getsignal(signal.SIGALRM), resource.getrlimit(resource.RLIMIT_AS)) == before


def test_trace_records_the_calls_the_verifier_makes() -> None:
    verifier = (
        "def verify(solution, test_cases):\n"
        "    ok = isinstance(solution.f(3), int) and solution.f(x=4) == 8\n"
        "    g = solution.ahead('f', [([5], {}), ([6], {})])\n"
        "    return float(ok and g(5) == 10 and g(6) == 12)\n"
    )
    spec = {"mode": "trace", "verifier": verifier, "cases": [], "reference": REFERENCE}
    report = differential.verify(None, [spec])
    calls = [ast.literal_eval(c["message"]) for c in report["cases"]]
    assert calls == [["f", [3], {}], ["f", [], {"x": 4}], ["f", [5], {}], ["f", [6], {}]]


def test_a_patch_tasks_reference_is_imported_from_memory_and_forgotten() -> None:
    import sys

    repo = {
        "pkg/__init__.py": "",
        "pkg/mod.py": "from pkg.util import two\ndef f(x):\n    return x * two()\n",
        "pkg/util.py": "def two():\n    return 2\n",
    }
    calls = [["pkg.mod:f", repr([[5], {}])]]
    spec = {"mode": "domain", "reference": None, "repo": repo, "calls": calls}
    assert differential.verify(_Answer(lambda x: 10), [spec])["passed"]
    assert "pkg" not in sys.modules and "pkg.mod" not in sys.modules


# -- the host's side (pure) --------------------------------------------------------------------

ENV = Environment(
    name="double",
    entry_point="f",
    test_cases=[{"args": [1], "expected": 2}, {"args": [5], "expected": 10}],
    reference_solution=REFERENCE,
)


def _result(cases: list[tuple[str, bool, str]], **fields: Any) -> RunResult:
    return RunResult(
        score=1.0,
        passed=all(p for _, p, _ in cases),
        cases=[CaseResult(name=n, passed=p, message=m) for n, p, m in cases],
        **fields,
    )


def test_the_domain_is_what_the_reference_agreed_with_itself_on_boundaries_first() -> None:
    calls = [Call("f", (i,), boundary=i % 2 == 0) for i in range(7)]
    learned = _result(
        [
            ("input_0", True, "[0.5, 0]"),
            ("input_1", True, "[1.5, 2]"),
            ("input_2", True, "[0.9, 4]"),
            ("input_3", False, ""),
            ("input_5", True, "[0.1, 10]"),
            ("input_6", True, ""),
        ]
    )
    dom = host.domain(calls, learned, budget=1.5)
    # the boundaries (0, 2) are kept whatever they cost; 1 is past the budget; 3 disagreed
    # with itself; 4 was refused; 6's value did not fit in a message
    assert [c.args for c in dom.calls] == [(0,), (2,), (5,)]
    assert dom.values == (0, 4, 10)
    assert dom.boundaries == 2 and dom.tried == 7


def test_an_agreement_reads_the_kill_or_the_evidence() -> None:
    calls = (Call("f", (1,), boundary=True), Call("f", (2,)), Call("f", (3,)))
    dom = Domain(calls, (2, 4, 6), 9, 1)
    agreed = host.agreement(dom, _result([(f"input_{i}", True, "") for i in range(3)]))
    assert (agreed.judged, agreed.disagreed, agreed.agreed, agreed.all_boundaries) == (
        True, False, 3, True,
    )  # fmt: skip
    assert agreed.equivalent(needed=3) and not agreed.equivalent(needed=4)
    killed = host.agreement(dom, _result([("input_0", True, ""), ("input_1", False, "")]))
    assert killed.disagreed and killed.kill == (dom.calls[1], 4)
    assert killed.killing_input is not None
    assert json.loads(killed.killing_input) == {"args": [2], "expected": 4}
    none = host.agreement(dom, RunResult.no_verdict("sandbox_error", "down"))
    assert not none.judged and not none.equivalent(needed=0)
    whole = RunResult(score=0.0, passed=False, error_type="solution_timeout")
    assert host.agreement(dom, whole).disagreed


def test_a_patch_tasks_killing_input_names_its_call() -> None:
    call = Call("shop.shipping:shipping", (11,))
    assert call.test_case(15) == {"call": "shop.shipping:shipping", "args": [11], "expected": 15}


def test_examples_come_from_the_cases_or_from_a_trace() -> None:
    assert [c.args for c in host.examples(ENV)] == [(1,), (5,)]
    assert host.trace_env(ENV) is None  # no verifier to trace
    humaneval_like = ENV.model_copy(
        update={
            "test_cases": [{"prompt": "p"}],
            "verifier_code": "def verify(s, t):\n    return 1.0\n",
        }
    )
    assert host.examples(humaneval_like) == []
    tracer = host.trace_env(humaneval_like)
    assert tracer is not None and tracer.test_cases is not None
    spec = tracer.test_cases[0]
    assert spec["mode"] == "trace" and spec["verifier"].startswith("def verify")
    assert spec["cases"] == [{"prompt": "p"}] and spec["reference"] == REFERENCE
    recorded = _result(
        [("call_0", True, repr(["f", [3], {}])), ("call_1", True, repr(["g", [1], {}]))]
    )
    assert [c.args for c in host.traced_calls(humaneval_like, recorded)] == [(3,)]


def test_a_patch_task_is_compared_on_its_patched_repository() -> None:
    env = load_environment("fix_word_count")
    assert host.comparable(env)
    found = host.examples(env)
    assert found and all(c.name.startswith("textstats") and ":" in c.name for c in found)
    learner = host.domain_env(env, host.candidate_calls(env, found, 100))
    assert learner is not None and learner.test_cases is not None
    repo = learner.test_cases[0]["repo"]
    assert "return text.split()" in repo["textstats/counting.py"]


def test_classes_generators_and_scripts_are_not_compared() -> None:
    assert not host.comparable(load_environment("lru_cache"))
    assert not host.comparable(load_environment("prime_generator"))
    assert not host.comparable(load_environment("grid_paths"))
    assert host.comparable(load_environment("coin_change"))
