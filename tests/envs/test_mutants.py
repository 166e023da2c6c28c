"""Mutation testing of verifiers: the generator (pure), the runner on a fake engine, and the
real sandbox on a weak environment."""

from __future__ import annotations

import ast
import json

import pytest
from tests.fakes import FakeBackend

from deepgym import DeepGym
from deepgym.envs.qa.differential import (
    EQUIVALENCE_INPUTS,
    Agreement,
    Call,
    Comparison,
    Domain,
    candidate_calls,
    examples,
)
from deepgym.envs.qa.digests import digest_of, read_only_actions
from deepgym.envs.qa.extra_inputs import variations
from deepgym.envs.qa.mutants import (
    MUTATION_THRESHOLD,
    candidates,
    mutation_test,
    tally,
)
from deepgym.envs.qa.mutate import OPERATORS, equivalent_markers, generate
from deepgym.envs.registry import load_environment
from deepgym.models import Environment, RunResult
from deepgym.sandbox.base import Job, RawRun
from deepgym.verdict import Outcome

SOURCE = '''\
def grade(xs: list[int], limit: int) -> str:
    """Grades a list."""
    total = 0
    for x in xs:
        total += x * 2
    if total < limit and not xs == []:
        label = "low"
    else:
        label = "high"
    flag = True
    return label if flag else "none"
'''


def _by(operator: str, source: str = SOURCE) -> list[str]:
    return [m.description for m in generate(source) if m.operator == operator]


def test_every_mutant_compiles_differs_from_the_reference_and_is_unique() -> None:
    mutants = generate(SOURCE)
    reference = ast.unparse(ast.parse(SOURCE))
    keys = [ast.unparse(ast.parse(m.source)) for m in mutants]
    assert len(keys) == len(set(keys))
    assert reference not in keys
    for mutant in mutants:
        compile(mutant.source, "<mutant>", "exec")
    assert len({m.id for m in mutants}) == len(mutants)
    assert {m.operator for m in mutants} == set(OPERATORS)


def test_generation_is_deterministic() -> None:
    assert generate(SOURCE) == generate(SOURCE)


def test_comparison_operators_are_swapped() -> None:
    found = _by("comparison")
    assert "line 6: `<` -> `<=`" in found
    assert "line 6: `<` -> `>=`" in found
    assert "line 6: `==` -> `!=`" in found


def test_arithmetic_operators_are_swapped_augmented_too() -> None:
    found = _by("arithmetic")
    assert "line 5: `+=` -> `-=`" in found
    assert "line 5: `*` -> `/`" in found


def test_integer_constants_are_off_by_one() -> None:
    found = _by("constant")
    assert {"line 3: `0` -> `1`", "line 3: `0` -> `-1`", "line 5: `2` -> `3`"} <= set(found)


def test_branches_are_swapped_and_negated() -> None:
    found = _by("branch")
    assert "line 6: `if` condition negated" in found
    assert "line 6: `if`/`else` bodies swapped" in found
    assert "line 11: conditional expression's branches swapped" in found
    swapped = next(m for m in generate(SOURCE) if m.description.endswith("bodies swapped"))
    assert swapped.source.index("high") < swapped.source.index("low")


def test_statements_are_dropped_but_not_docstrings() -> None:
    found = _by("statement")
    assert "line 3: `total = 0` dropped" in found
    assert not any("Grades" in d for d in found)
    dropped = next(m for m in generate(SOURCE) if m.description == "line 3: `total = 0` dropped")
    assert "    pass\n" in dropped.source


def test_returns_made_constant_by_context_and_early() -> None:
    found = _by("return")
    assert "line 1: `return ''` at the start of `grade`" in found
    assert any(d.endswith("-> `return None`") for d in found)
    assert any(d.endswith("-> `return ''`") for d in found)
    early = next(m for m in generate(SOURCE) if "at the start" in m.description)
    lines = early.source.splitlines()
    assert lines[1] == '    """Grades a list."""'
    assert lines[2] == "    return ''"


def test_boolean_operators_are_negated() -> None:
    found = _by("boolean")
    assert "line 6: `and` -> `or`" in found
    assert "line 6: `not` removed from `not xs == []`" in found
    assert "line 6: `not` added to `total < limit`" in found
    assert "line 10: `True` -> `False`" in found


def test_a_mutant_keeps_the_reference_formatting_outside_the_change() -> None:
    source = "def f(a):\n    # keep me\n    return a + 1  # and me\n"
    mutant = next(m for m in generate(source) if m.operator == "arithmetic")
    assert mutant.source == "def f(a):\n    # keep me\n    return a - 1  # and me\n"


def test_annotations_are_not_mutated() -> None:
    source = "def f(a: 'x' == 1) -> int:\n    return a\n"
    assert not _by("comparison", source)


def test_a_source_that_does_not_parse_raises() -> None:
    with pytest.raises(SyntaxError):
        generate("def f(:\n")


def test_equivalent_markers_are_read() -> None:
    source = (
        "x = 1  # deepgym: equivalent-mutant constant\n"
        "y = 2\n"
        "z = x < y  # deepgym: equivalent-mutant comparison, boolean\n"
        "w = 3  # deepgym: equivalent-mutant\n"
    )
    assert equivalent_markers(source) == {
        1: frozenset({"constant"}),
        3: frozenset({"comparison", "boolean"}),
        4: frozenset({"all"}),
    }


# -- the report (pure) -------------------------------------------------------------------------

WEAK = Environment(
    name="weak_clamp",
    entry_point="clamp",
    test_cases=[{"args": [3], "expected": 3}, {"args": [20], "expected": 10}],
    reference_solution=(
        "def clamp(x):\n"
        "    limit = 10  # deepgym: equivalent-mutant statement\n"
        "    return x if x < limit else 10\n"
    ),
)
"""A weak function task: its two tests miss ``limit = 9``, and ``<`` -> ``<=`` is equivalent."""


def _result(passed: bool, *, verdict: bool = True) -> RunResult:
    if not verdict:
        return RunResult.no_verdict("sandbox_error", "no sandbox")
    return RunResult(score=1.0 if passed else 0.0, passed=passed)


def test_tally_counts_killed_survived_no_verdict_and_marked() -> None:
    found = candidates(WEAK)
    marked = [c for c in found if c.marked]
    assert [c.mutant.operator for c in marked] == ["statement"]
    rest = [c for c in found if not c.marked]
    results = {c.mutant.id: _result(False) for c in rest}
    results[rest[0].mutant.id] = _result(True)
    results[rest[1].mutant.id] = _result(False, verdict=False)
    report = tally(WEAK, found, results, {})
    assert report.mutants == len(found)
    assert report.killed == len(rest) - 2
    assert report.no_verdict == 1
    assert report.survived == 1
    assert report.score == (len(rest) - 2) / (len(found) - 1 - 1)
    assert report.equivalents[0].why.startswith("marked in the reference")


def test_a_mutant_without_a_verdict_is_never_counted_killed() -> None:
    found = candidates(WEAK)
    results = {c.mutant.id: _result(False, verdict=False) for c in found}
    report = tally(WEAK, found, results, {})
    assert report.killed == 0
    assert report.no_verdict == len(found) - 1
    assert report.score is None
    assert not report.ok


def _domain(size: int, boundaries: int = 2) -> Domain:
    calls = tuple(Call("clamp", (i,), boundary=i < boundaries) for i in range(size))
    return Domain(calls, tuple(range(size)), tried=size + 10, boundaries=boundaries)


def test_a_survivor_is_judged_by_its_comparison_with_the_reference() -> None:
    """Agreeing on enough inputs, every boundary among them: likely equivalent; on fewer:
    undecided (counted against the score); disagreeing: a survivor with its killing input;
    a comparison without a verdict: undecided."""
    found = [c for c in candidates(WEAK) if not c.marked][:5]
    results = {c.mutant.id: _result(True) for c in found}
    dom = _domain(EQUIVALENCE_INPUTS + 5)
    kill = '{"args": [9], "expected": 9}'
    agreements = {
        found[0].mutant.id: Agreement(True, False, EQUIVALENCE_INPUTS + 5, 2, True),
        found[1].mutant.id: Agreement(True, False, 17, 2, True),
        found[2].mutant.id: Agreement(True, True, 3, 0, kill=(dom.calls[3], 9), killing_input=kill),
        found[3].mutant.id: Agreement(False),
        found[4].mutant.id: Agreement(True, False, EQUIVALENCE_INPUTS + 5, 1, False),
    }
    report = tally(WEAK, found, results, agreements, comparison=Comparison(dom))
    assert [e.id for e in report.equivalents] == [found[0].mutant.id]
    assert report.equivalents[0].agreed == EQUIVALENCE_INPUTS + 5
    assert f"{EQUIVALENCE_INPUTS + 5} distinct generated inputs" in report.equivalents[0].why
    assert [s.id for s in report.survivors] == [found[2].mutant.id]
    assert report.survivors[0].killing_input == kill
    assert report.kills == ((found[2].mutant.id, dom.calls[3], 9),)
    undecided = {u.id: u for u in report.undecideds}
    assert list(undecided) == [found[1].mutant.id, found[3].mutant.id, found[4].mutant.id]
    assert undecided[found[1].mutant.id].agreed == 17
    assert "only 17 distinct inputs" in undecided[found[1].mutant.id].why
    assert "had no verdict" in undecided[found[3].mutant.id].why
    assert "1 of the 2 boundary values" in undecided[found[4].mutant.id].why
    # undecided and survivors count alike: 0 killed of 5 - 1 equivalent
    assert report.undecided == 3 and report.survived == 1 and report.score == 0.0


def test_a_survivor_of_a_kind_not_compared_is_a_survivor() -> None:
    found = [c for c in candidates(WEAK) if not c.marked][:1]
    report = tally(WEAK, found, {found[0].mutant.id: _result(True)})
    assert report.survivors[0].killing_input is None and not report.undecideds


def test_a_survivor_without_a_domain_is_undecided() -> None:
    found = [c for c in candidates(WEAK) if not c.marked][:1]
    comparison = Comparison(None, why="the reference accepted none of the 12 inputs")
    report = tally(WEAK, found, {found[0].mutant.id: _result(True)}, comparison=comparison)
    assert "accepted none of the 12 inputs" in report.undecideds[0].why


def test_a_settled_mutant_is_equivalent_when_it_passed_or_was_not_run() -> None:
    found = [c for c in candidates(WEAK) if not c.marked][:3]
    ids = [c.mutant.id for c in found]
    settled = {i: "the same digest" for i in ids}
    results = {ids[1]: _result(True), ids[2]: _result(False)}
    report = tally(WEAK, found, results, settled=settled)
    assert [e.id for e in report.equivalents] == ids[:2] and report.killed == 1


def test_the_json_shape() -> None:
    found = candidates(WEAK)
    results = {c.mutant.id: _result(c is found[0]) for c in found}
    data = tally(WEAK, found, results, {}, seconds=1.23456).to_json()
    assert list(data) == [
        "env", "kind", "mutants", "killed", "equivalent", "survived", "undecided", "no_verdict",
        "score", "seconds", "threshold", "ok", "gated", "survivors", "undecideds", "equivalents",
    ]  # fmt: skip
    assert data["threshold"] == MUTATION_THRESHOLD
    assert data["seconds"] == 1.235
    assert list(data["survivors"][0]) == [
        "id", "operator", "line", "description", "diff", "killing_input",
    ]  # fmt: skip
    assert list(data["equivalents"][0]) == [
        "id", "operator", "line", "description", "diff", "why", "agreed",
    ]  # fmt: skip
    assert json.loads(json.dumps(data)) == data


def test_candidate_inputs_are_seeded_and_leave_the_examples_range() -> None:
    calls = candidate_calls(WEAK, examples(WEAK))
    assert calls == candidate_calls(WEAK, examples(WEAK))
    values = [c.args[0] for c in calls]
    assert values[:2] == [3, 20]  # the examples first
    assert {0, 1, -1, 2, 21, 1_000_000} <= set(values)  # the boundaries
    assert min(values) < -100 and sorted(values)[-2] > 100  # and far past the range
    assert len(set(values)) == len(values)
    assert examples(WEAK.model_copy(update={"entry_point": None})) == []


def test_read_only_actions_are_those_the_digest_did_not_see() -> None:
    assert read_only_actions(["a", "a", "b", "b", "c"]) == {1, 3}
    assert read_only_actions(["a"]) == set()
    line = "ab" * 32 + "  -\n"
    assert digest_of(line) == "ab" * 32
    assert digest_of("sha256sum: command not found") is None


def test_a_grid_keeps_its_shape() -> None:
    grid = ["1100", "0110", "0001"]
    for args in variations([[grid]], 20, seed=1):
        assert [len(row) for row in args[0]] == [4, 4, 4]
        assert set("".join(args[0])) <= {"0", "1"}


def test_a_patch_task_is_mutated_only_on_the_lines_its_diff_adds() -> None:
    env = load_environment("fix_word_count")
    found = candidates(env)
    assert found
    for c in found:
        assert c.answer.startswith("diff --git a/textstats/counting.py")
        assert c.mutant.description.startswith("textstats/counting.py line 6:")


class _DownForMinus(FakeBackend):
    """Fails to start any answer holding ``9`` (no verdict); every other answer passes."""

    async def run(self, job: Job) -> RawRun:
        if "9" in job.answer:
            self.calls[job.answer] += 1
            outcome = Outcome(report=None, in_play=False, start_failed=True, detail="no sandbox")
            return RawRun(outcome=outcome, report=None, isolation="fake", total_ms=1.0)
        return await super().run(job)


def test_a_mutant_without_a_verdict_is_retried_once_then_left_out() -> None:
    fake = _DownForMinus()
    env = WEAK.model_copy(update={"time_limit": 5.0})
    with DeepGym(backend=fake) as dg:
        report = mutation_test(env, dg, extra_inputs=0)
    down = [a for a in fake.calls if "9" in a]
    # two batches (the first, then the retry), each with the engine's own retry of a failed start
    assert len(down) == 2 and all(fake.calls[a] == 4 for a in down)
    assert report.no_verdict == len(down)
    assert report.killed == 0


@pytest.mark.sandbox
def test_a_weak_environment_gets_a_survivor_with_its_killing_input() -> None:
    with DeepGym() as dg:
        report = mutation_test(WEAK, dg)
    survivor = next(s for s in report.survivors if s.description == "line 2: `10` -> `9`")
    assert survivor.killing_input is not None
    case = json.loads(survivor.killing_input)
    (x,) = case["args"]
    assert case["expected"] == (x if x < 10 else 10) and x in (9, 10)
    why = {e.description: e.why for e in report.equivalents}
    assert why["line 3: `<` -> `<=`"].startswith("agrees with the reference")
    assert why["line 2: `limit = 10` dropped"].startswith("marked in the reference")


@pytest.mark.sandbox
def test_a_sessions_read_only_actions_are_equivalent_by_their_digests() -> None:
    """``cat calc.py`` and the final check change nothing the verifier sees: the digests of
    the work dir and the shell before and after them agree, so dropping them is equivalent
    (and not played); dropping the fix is killed."""
    env = load_environment("agent/fix_add")
    with DeepGym() as dg:
        report = mutation_test(env, dg)
    why = {e.description.split(":")[0]: e.why for e in report.equivalents}
    assert why["action 1 dropped"].startswith("action 1 left the work dir and the shell")
    assert why["action 3 dropped"].startswith("action 3 left the work dir and the shell")
    assert report.killed == 1 and report.score == 1.0 and report.ok and report.gated
