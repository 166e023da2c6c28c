"""The QA report's shape: what ``validate_entries`` accepts, the field each refusal names, the
group of each check, and the summary the console lists."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.envs.qa_sample import sample_entries

from deepgym.envs.qa.report import check_group, summarize, validate_entries, validate_meta
from deepgym.exceptions import ConfigError


def test_the_contracts_report_reads_whole() -> None:
    entries = validate_entries(sample_entries())
    assert [e.env for e in entries] == ["coin_change", "fizzbuzz", "agent/fix_add"]
    m = entries[1].mutation
    assert m is not None and m.score == 0.8 and not m.ok
    assert [s.killing_input for s in m.survivors] == ["fizzbuzz('<script>alert(1)</script>')", None]
    assert entries[2].mutation is None and entries[2].kind == "session"


def test_a_check_report_without_kind_or_mutation_reads() -> None:
    """What ``check --json`` printed before mutation testing: no ``kind``, no ``mutation``."""
    (e,) = validate_entries([{"env": "a", "ok": True, "checks": []}])
    assert e.kind is None and e.mutation is None


def test_a_report_kept_before_undecided_mutants_reads_them_as_none() -> None:
    """The sample is a report of that time: no ``undecided``, ``undecideds`` or ``agreed``."""
    entries = sample_entries()
    assert "undecided" not in entries[0]["mutation"]
    m = validate_entries(entries)[0].mutation
    assert m is not None and m.undecided == 0 and m.undecideds == []
    assert m.equivalents[0].agreed is None


def test_undecided_mutants_read_with_their_evidence() -> None:
    entries = sample_entries()
    mutation = entries[0]["mutation"]
    undecided = {
        "id": "coin_change-u1",
        "operator": "constant",
        "line": 3,
        "description": "`1` to `2`",
        "diff": "-    x = 1\n+    x = 2\n",
        "why": "no input told it apart, but it agreed on only 17 distinct inputs",
        "agreed": 17,
    }
    mutation.update(undecided=1, undecideds=[undecided])
    mutation["equivalents"][0]["agreed"] = 640
    m = validate_entries(entries)[0].mutation
    assert m is not None and m.undecided == 1 and m.undecideds[0].agreed == 17
    assert m.equivalents[0].agreed == 640
    bad = sample_entries()
    bad[0]["mutation"].update(undecided=-1)
    with pytest.raises(ConfigError, match=r"entries\[0\]\.mutation\.undecided"):
        validate_entries(bad)


def test_fields_it_does_not_know_are_kept() -> None:
    entries = sample_entries()
    entries[0]["probes_seconds"] = 1.5
    (e, *_) = validate_entries(entries)
    assert e.model_dump()["probes_seconds"] == 1.5


def _with(path: tuple[Any, ...], value: Any) -> list[dict[str, Any]]:
    entries = sample_entries()
    target: Any = entries
    for key in path[:-1]:
        target = target[key]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return entries


_DROP = object()


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ((0, "ok"), "yes", "entries[0].ok"),
        ((1, "env"), _DROP, "entries[1].env"),
        ((0, "checks", 2, "message"), None, "entries[0].checks[2].message"),
        ((1, "mutation", "score"), 1.5, "entries[1].mutation.score"),
        ((1, "mutation", "score"), math.nan, "entries[1].mutation.score"),
        ((1, "mutation", "killed"), True, "entries[1].mutation.killed"),  # a bool is no count
        ((1, "mutation", "survived"), -1, "entries[1].mutation.survived"),
        ((1, "mutation", "seconds"), "12", "entries[1].mutation.seconds"),
        ((1, "mutation", "survivors", 1, "diff"), 3, "entries[1].mutation.survivors[1].diff"),
        ((0, "mutation", "equivalents", 0, "why"), _DROP, "entries[0].mutation.equivalents[0].why"),
        ((0, "mutation", "threshold"), math.inf, "entries[0].mutation.threshold"),
    ],
)
def test_a_bad_field_is_named(path: tuple[Any, ...], value: Any, named: str) -> None:
    with pytest.raises(ConfigError, match=rf"^QA report: {_re(named)}: "):
        validate_entries(_with(path, value))


def _re(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")


@pytest.mark.parametrize(
    ("entries", "said"),
    [({"env": "a"}, "entries: a list"), ([], "entries: no environment"), ([3], r"entries\[0\]")],
)
def test_not_a_list_of_entries_is_refused(entries: Any, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        validate_entries(entries)


def test_meta_holds_plain_values_only() -> None:
    assert validate_meta({"command": "qa", "mutants": True, "sandbox": None, "n": 2}) == {
        "command": "qa",
        "mutants": True,
        "sandbox": None,
        "n": 2,
    }
    for bad, said in (
        ([], "meta: a mapping"),
        ({"a": [1]}, "meta.a: a string"),
        ({"t": math.inf}, "meta.t: a finite number"),
        ({1: "x"}, "meta: names are strings"),
    ):
        with pytest.raises(ConfigError, match=said):
            validate_meta(bad)


def test_each_check_has_its_group() -> None:
    groups = {
        n: check_group(n)
        for n in (
            "reference",
            "rerun_1",
            "deterministic",
            "time_limits",
            "empty",
            "stub",
            "constant[0]",
            "echo",
            "noop",
            "busy",
            "exploit[sys_exit]",
        )
    }
    assert {n for n, g in groups.items() if g == "reference"} == {
        "reference",
        "rerun_1",
        "deterministic",
        "time_limits",
    }
    assert {n for n, g in groups.items() if g == "probe"} == {"exploit[sys_exit]"}


def test_the_summary_counts_and_averages_the_scores_there_are() -> None:
    s = summarize(validate_entries(sample_entries()))
    assert (s.environments, s.passed, s.scored) == (3, 2, 2)
    assert s.mean_score == pytest.approx((0.95 + 0.8) / 2) and s.min_score == 0.8
    none = summarize(validate_entries([{"env": "a", "ok": False, "checks": []}]))
    assert (none.passed, none.scored, none.mean_score, none.min_score) == (0, 0, None, None)


@given(st.lists(st.one_of(st.none(), st.floats(0.0, 1.0)), min_size=1, max_size=30))
def test_the_mean_lies_between_the_lowest_score_and_1(scores: list[float | None]) -> None:
    entries = []
    for i, score in enumerate(scores):
        m = sample_entries()[0]["mutation"] | {"score": score}
        entries.append({"env": f"e{i}", "ok": True, "checks": [], "mutation": m})
    s = summarize(validate_entries(entries))
    given_scores = [x for x in scores if x is not None]
    assert s.scored == len(given_scores)
    if given_scores:
        assert s.min_score is not None and s.mean_score is not None
        assert s.min_score == min(given_scores) and s.min_score - 1e-12 <= s.mean_score <= 1
    else:
        assert s.mean_score is None
