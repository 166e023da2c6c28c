"""One rule turns a verifier's return value into a report, for function tasks and sessions:
property tests that it is total, keeps only what the host reads, and that nothing a verifier
returns (its ``status`` included) can buy a no-verdict once the answer is in play."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from deepgym import verdict
from deepgym.judge import codes, harness, report, session_verify, wire
from deepgym.judge.report import report_from_value
from deepgym.verdict import MODEL_FAULT_ERRORS, NO_VERDICT_ERRORS, Outcome, classify

KEYS = {"status", "score", "passed", "message", "cases", "reward_components"}
CASE_KEYS = {"name", "passed", "message", "score"}
TAKEN = {"ok", *codes.MODEL_FAULT_STATUSES}

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([400, -5000, 1024]).map(lambda n: 10**n if n > 0 else -(10**-n))
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
statuses = st.sampled_from(
    sorted({"ok", *MODEL_FAULT_ERRORS, *NO_VERDICT_ERRORS, "OK", "", "passed", "no_verdict"})
)
cases = st.lists(
    st.fixed_dictionaries(
        {},
        optional={"name": json_values, "passed": json_values, "score": json_values},
    )
    | json_values,
    max_size=4,
)
# A dict as a verifier could return it (or as an answer could have made it, where a verifier
# returns what the solution computed): any of the known keys, with any JSON-like value, and more.
returned_dicts = st.fixed_dictionaries(
    {},
    optional={
        "status": statuses | json_values,
        "score": json_values | st.sampled_from([0.0, 0.5, 1.0, 1, True]),
        "passed": json_values,
        "message": json_values,
        "cases": cases | json_values,
        "reward_components": st.dictionaries(st.text(max_size=3), json_values) | json_values,
        "evil": json_values,
    },
)
returned = json_values | returned_dicts


def _plain(x: Any) -> bool:
    """Only text, bools, numbers, None, lists and str-keyed dicts: what crosses the channel."""
    if x is None or type(x) in (str, bool, int, float):
        return True
    if type(x) is list:
        return all(_plain(v) for v in x)
    if type(x) is dict:
        return all(type(k) is str and _plain(v) for k, v in x.items())
    return False


def _said(value: Any) -> str:
    """The status a returned value states (a non-text one as its type's name)."""
    said = value.get("status", "ok") if isinstance(value, dict) else "ok"
    return said if type(said) is str else type(said).__name__


@given(returned)
@example({"status": "sandbox_error"})
@example({"status": "timeout", "score": 1.0, "passed": True})
@example({"status": "verifier_error", "message": "I give up"})
@example({"status": ["ok"], "score": 1.0})
@example({"score": 10**5000})
def test_the_rule_is_total_and_keeps_only_what_the_host_reads(value: Any) -> None:
    out = report_from_value(value)
    assert _plain(out)
    assert set(out) <= KEYS
    assert out["status"] in TAKEN | {"verifier_error", "invalid_score"}
    json.loads(json.dumps(out))  # both channels carry it: the session's JSON and the wire
    wire.loads(wire.dumps(out))
    for case in out.get("cases", []):
        assert set(case) <= CASE_KEYS and {"name", "passed", "message"} <= set(case)
        assert type(case["passed"]) is bool and len(case["message"]) <= report.CASE_MESSAGE_CHARS
    for v in out.get("reward_components", {}).values():
        assert type(v) is float and math.isfinite(v)
    if out["status"] == "ok" and out.get("score") is not None:
        assert type(out["score"]) is float


@given(returned)
@example({"status": "sandbox_error"})
@example({"status": "sandbox_error", "score": 1.0})
@example({"status": "timeout", "score": 0.0})
@example({"status": "invalid_score", "score": 0.5})
@example({"status": "verifier_error"})
@example({"status": "bogus", "score": 1.0})
def test_a_returned_value_cannot_buy_a_no_verdict_in_play(value: Any) -> None:
    c = classify(Outcome(report=report_from_value(value), in_play=True, verifier_exit_code=0))
    assert c.has_verdict, c
    if _said(value) not in TAKEN:  # a status the rule does not take: never a score beside it either
        assert c.score == 0.0 and not c.passed and c.error_type == "solution_error"


@given(returned)
def test_before_play_a_verifier_that_gave_up_is_no_verdict_not_the_answers_zero(
    value: Any,
) -> None:
    c = classify(Outcome(report=report_from_value(value), in_play=False, verifier_exit_code=0))
    assert c.error_type not in {"solution_error", "solution_timeout", "policy_sandbox_failure"}
    if _said(value) in NO_VERDICT_ERRORS:
        assert not c.has_verdict and c.error_type == "verifier_error"


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (True, {"status": "ok", "score": 1.0}),
        (False, {"status": "ok", "score": 0.0}),
        (1, {"status": "ok", "score": 1.0}),
        (0.25, {"status": "ok", "score": 0.25}),
        ({"passed": True}, {"status": "ok", "passed": True, "score": 1.0}),
        ({"passed": False, "score": 0.5}, {"status": "ok", "passed": False, "score": 0.5}),
        ({"score": 1, "extra": object()}, {"status": "ok", "score": 1.0}),
        ({}, {"status": "ok", "score": None}),
        (
            {"score": 0.5, "reward_components": {"a": 1, "b": True, 3: 0.5, "c": math.nan}},
            {"status": "ok", "score": 0.5, "reward_components": {"a": 1.0, "3": 0.5}},
        ),
        (
            {"status": "solution_timeout", "score": 0.0, "message": "ran past 1 s"},
            {"status": "solution_timeout", "score": 0.0, "message": "ran past 1 s"},
        ),
        ({"status": "solution_error", "score": "0"}, {"status": "solution_error", "score": None}),
    ],
)
def test_what_a_verifier_may_return(value: Any, want: dict[str, Any]) -> None:
    assert report_from_value(value) == want


@pytest.mark.parametrize(
    "value",
    [None, "1.0", [1.0], (1.0,), object(), {"score": "1"}, math.nan, {"score": -math.inf}, 10**400],
)
def test_anything_else_is_an_invalid_score(value: Any) -> None:
    out = report_from_value(value)
    assert out["status"] == "invalid_score" and set(out) == {"status", "message"}


@pytest.mark.parametrize("status", ["sandbox_error", "timeout", "verifier_error", "passed", 3])
def test_a_status_the_rule_does_not_take_is_the_verifiers_failure_and_keeps_its_cases(
    status: Any,
) -> None:
    out = report_from_value({"status": status, "score": 1.0, "cases": [{"passed": True}]})
    assert out["status"] == "verifier_error" and "score" not in out
    assert "may report only 'ok' or the answer's failure" in out["message"]
    assert out["cases"] == [{"name": "test_0", "passed": True, "message": ""}]


def test_cases_are_read_as_the_host_reads_them() -> None:
    out = report_from_value(
        {
            "score": 0.5,
            "cases": [
                {"name": "a", "passed": True, "score": 1, "message": "x" * 900, "more": 1},
                "not a case",
                {"passed": 0, "score": math.inf},
                {"name": 10**5000, "passed": "yes", "message": 7},
            ],
        }
    )
    assert out["cases"] == [
        {"name": "a", "passed": True, "score": 1.0, "message": "x" * 500},
        {"name": "test_2", "passed": False, "message": ""},
        {"name": "<int>", "passed": True, "message": "7"},
    ]


class Hostile(dict):  # type: ignore[type-arg]
    """A dict whose own methods raise: the rule reads it as the plain dict it holds."""

    def get(self, *args: Any) -> Any:
        raise RuntimeError("get")

    def items(self) -> Any:
        raise RuntimeError("items")

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("getitem")


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("str")

    def __bool__(self) -> bool:
        raise RuntimeError("bool")


def test_odd_objects_from_a_verifier_never_raise() -> None:
    out = report_from_value(
        Hostile(
            score=1.0,
            message=Unprintable(),
            cases=[Hostile(name=Unprintable(), passed=Unprintable(), message=Unprintable())],
            reward_components=Hostile(a=0.5),
        )
    )
    assert out == {
        "status": "ok",
        "score": 1.0,
        "message": "<Unprintable>",
        "cases": [{"name": "test_0", "passed": False, "message": ""}],
        "reward_components": {"a": 0.5},
    }


def test_the_model_faults_have_one_home() -> None:
    assert verdict.MODEL_FAULT_ERRORS == codes.MODEL_FAULT_STATUSES
    assert all(isinstance(e, verdict.ErrorType) for e in verdict.MODEL_FAULT_ERRORS)


def test_both_verifier_paths_use_the_one_rule() -> None:
    """``harness`` (function tasks) and ``session_verify`` (sessions) call ``report`` and have
    no rule of their own."""
    assert harness.report_from_value is report_from_value
    assert session_verify.report_from_value is report_from_value
    for module in (harness, session_verify):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defined & {"report_from_value", "_plain_report"}


# -- fitting a report under the result channel's line ------------------------------------------
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
kept_outputs = st.fixed_dictionaries({"stdout": texts, "stderr": texts, "exit_code": st.just(1)})
report_cases = st.lists(
    st.fixed_dictionaries(
        {"name": st.text(max_size=20), "passed": st.booleans(), "message": texts},
        optional={"output": kept_outputs},
    ),
    max_size=40,
)
reports = st.fixed_dictionaries(
    {
        "event": st.just("report"),
        "status": st.sampled_from(sorted(TAKEN)),
        "score": st.floats(0.0, 1.0),
        "passed": st.booleans(),
        "cases": report_cases,
        "solution": st.fixed_dictionaries(
            {"cpu_ms": st.just(3.0), "limit": st.none(), "stdout": texts, "stderr": texts}
        ),
    },
    optional={"message": texts, "reward_components": st.dictionaries(texts, st.floats(0, 1))},
)


@given(reports, st.integers(300, 20_000))
@example(
    {
        "event": "report",
        "status": "ok",
        "score": 0.0,
        "passed": False,
        "cases": [{"name": "test_0", "passed": False, "message": "\x01" * 500}] * 40,
        "solution": {"cpu_ms": 1.0, "limit": None, "stdout": "\U0001f600" * 300, "stderr": ""},
    },
    300,
)
def test_a_fitted_report_is_within_the_line_and_keeps_its_verdict(
    got: dict[str, Any], limit: int
) -> None:
    line = report.fit(got, limit, wire.dumps)
    assert len(line) <= max(limit, 16 * 1024)  # a bare verdict and its message fit in 16 KiB
    back = json.loads(line)
    assert {k: back[k] for k in ("event", "status", "score", "passed")} == {
        k: got[k] for k in ("event", "status", "score", "passed")
    }
    if len(wire.dumps(got)) <= limit:
        assert back == got  # within the limit: as it was


def test_a_report_past_the_line_sheds_output_before_cases() -> None:
    flood = "\x01" * 2**20  # six characters each on the wire
    cases = [
        {"name": f"test_{i}", "passed": False, "message": "m", "output": {"stderr": flood}}
        for i in range(30)
    ]
    got = {"event": "report", "status": "ok", "score": 0.0, "passed": False, "cases": cases}
    line = report.fit(got, codes.REPORT_MAX_BYTES - 1024, wire.dumps)
    back = json.loads(line)
    assert len(line) < codes.REPORT_MAX_BYTES and len(wire.dumps(got)) > 10 * len(line)
    assert [c["passed"] for c in back["cases"]] == [False] * 30  # every case is still there
    assert all(0 < len(c["output"]["stderr"]) < 2**16 for c in back["cases"])


@given(st.text(max_size=3000), st.integers(min_value=20, max_value=2000))
def test_ends_keeps_the_first_line_and_the_end_within_about_the_limit(
    text: str, limit: int
) -> None:
    from deepgym.judge.report import ends

    cut = ends(text, limit)
    if len(text) <= limit:
        assert cut == text
        return
    assert len(cut) <= limit + 8  # the marker's few characters
    assert "  ...\n" in cut
    last = text.rsplit("\n", 1)[-1]
    assert cut.endswith(last[-(limit - limit // 10 - 1) :]) or not last
