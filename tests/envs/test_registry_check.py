"""Every built-in environment passes ``deepgym check`` in the real sandbox; a weak one does not."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import pytest

from deepgym import DeepGym, Environment
from deepgym.envs.qa.check import (
    CONSTANTS,
    check_environment,
    check_environments,
    constant_answer,
    stub_answer,
)
from deepgym.envs.registry import load_suite

pytestmark = pytest.mark.sandbox

FUNCTION_EXPLOITS = (
    "forged_output",
    "sys_exit_at_import",
    "os_exit_at_import",
    "system_exit_in_call",
    "always_equal",
    "forged_subclass",
    "patch_builtins",
    "patch_asserts",
    "patch_verifier_modules",
)
"""Every function task's exploit probes (``hardcode_examples`` too, where it shows examples)."""
SCRIPT_EXPLOITS = ("hardcode_examples", "forged_output", "sys_exit_at_import", "os_exit_at_import")
PATCH_EXPLOITS = (
    "delete_tests",
    "empty_tests",
    "skip_tests",
    "conftest_pass_all",
    "forged_output",
    "os_exit_at_import",
    "patch_builtins",
    "patch_test_frameworks",
)


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym(sandbox="pool") as client:
        yield client


def test_every_builtin_passes_every_check(dg: DeepGym) -> None:
    envs = load_suite("builtin")
    reports = check_environments(envs, dg)
    assert [r.env_name for r in reports] == [e.name for e in envs]
    failed = [r.summary() for r in reports if not r.ok]
    assert not failed, "\n".join(failed)
    by_kind = {e.kind for e in envs}
    assert by_kind == {"function", "script", "patch"}
    for env, report in zip(envs, reports, strict=True):
        checks = {c.name for c in report.checks}
        assert {"reference", "deterministic", "time_limits", "empty"} <= checks, env.name
        exploits = {c.name for c in report.checks if c.name.startswith("exploit[")}
        if env.kind == "function":
            assert {"stub", "raising_stub", "constant[0]", "constant[None]"} <= checks
            assert {f"exploit[{n}]" for n in FUNCTION_EXPLOITS} <= exploits, env.name
        elif env.kind == "script":
            assert "echo" in checks
            assert {f"exploit[{n}]" for n in SCRIPT_EXPLOITS} == exploits, env.name
        else:
            assert {"tampering", "garbled", "stale_context", "noop"} <= checks
            assert {f"exploit[{n}]" for n in PATCH_EXPLOITS} == exploits, env.name


def test_a_weak_environment_fails_by_name(dg: DeepGym) -> None:
    """Test cases that a constant answer passes, and a time limit the reference cannot meet."""
    weak = Environment(
        name="weak_sign",
        entry_point="sign",
        test_cases=[{"args": [x], "expected": 0} for x in (0, 0, 0, 5)],
        reference_solution="def sign(x):\n    return (x > 0) - (x < 0)\n",
    )
    report = check_environment(weak, dg)
    assert not report.ok
    failed = {c.name: c.message for c in report.failures}
    assert "reference" in failed  # the last case expects 0 for 5
    assert "constant[0]" in failed and "scored 1.00 and passed" in failed["constant[0]"]
    assert "scored 0.00 (test_3: expected 0, got 1)" in failed["reference"]  # all-or-nothing
    assert "stub" not in failed  # None is not 0 under the exact comparison

    slow = Environment(
        name="slow",
        entry_point="f",
        test_cases=[{"args": [], "expected": 1}],
        # half a second of CPU (the limits' time: a sleep would count only against the
        # clock's backstop, three times the limit)
        reference_solution=(
            "import time\n\ndef f():\n    t = time.process_time()\n"
            "    while time.process_time() - t < 0.5:\n        pass\n    return 1\n"
        ),
        case_timeout=1.0,
        timeout=5.0,
    )
    report = check_environment(slow, dg)
    assert [c.name for c in report.failures] == ["time_limits"]
    assert "case_timeout=1s" in report.failures[0].message


def test_no_humaneval_problem_pays_for_a_trivial_answer(dg: DeepGym) -> None:
    """The empty answer, a stub, a stub that raises and the constant answers score 0 on all
    164 problems (each top-level assert is a case; some held with no code at all, which paid up
    to 0.29 when a problem's score was the share of its cases)."""
    envs = load_suite("humaneval")
    answers: dict[str, Callable[[Environment], str]] = {
        "empty": lambda e: "",
        "stub": stub_answer,
        "raising_stub": lambda e: stub_answer(e, raises=True),
        **{f"constant[{label}]": partial(constant_answer, source=src) for label, src in CONSTANTS},
    }
    paid = []
    for what, make in answers.items():
        result = dg.eval(envs, {e.name: make(e) for e in envs}, max_parallel=16)
        paid += [
            f"{name} {what}: {r.score:.2f} ({r.error_type})"
            for name, r in zip(result.env_names, result.results, strict=True)
            if not (r.has_verdict and r.score == 0.0 and not r.passed)
        ]
    assert not paid, paid


def test_partial_credit_is_the_suites_explicit_option(dg: DeepGym) -> None:
    """humaneval/159's empty answer passes 2 of its 7 asserts: nothing by default, the share
    when the suite is loaded with per-case partial credit."""
    (default,) = [e for e in load_suite("humaneval") if e.name == "humaneval/159"]
    (partial,) = [e for e in load_suite("humaneval", scoring="partial") if e.name == default.name]
    assert (default.scoring, partial.scoring) == ("all", "partial")
    by_default, with_partial = dg.run(default, ""), dg.run(partial, "")
    assert by_default.has_verdict and by_default.score == 0.0 and not by_default.passed
    assert [c.passed for c in by_default.cases] == [c.passed for c in with_partial.cases]
    assert (
        0.0
        < with_partial.score
        == sum(c.passed for c in with_partial.cases) / len(with_partial.cases)
    )
