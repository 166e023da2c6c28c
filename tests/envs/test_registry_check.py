"""Every built-in environment passes ``deepgym check`` in the real sandbox; a weak one does not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deepgym import DeepGym, Environment
from deepgym.envs.check import check_environment, check_environments
from deepgym.envs.registry import load_suite

pytestmark = pytest.mark.sandbox


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
        if env.kind == "function":
            assert {"stub", "constant[0]", "constant[None]", "constant[-1]"} <= checks
        elif env.kind == "script":
            assert "echo" in checks
        else:
            assert {"tampering", "garbled", "stale_context", "noop"} <= checks


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
    assert "scored 0.75" in failed["reference"]
    assert "stub" not in failed  # None is not 0 under the exact comparison

    slow = Environment(
        name="slow",
        entry_point="f",
        test_cases=[{"args": [], "expected": 1}],
        reference_solution="import time\n\ndef f():\n    time.sleep(0.5)\n    return 1\n",
        case_timeout=1.0,
        timeout=5.0,
    )
    report = check_environment(slow, dg)
    assert [c.name for c in report.failures] == ["time_limits"]
    assert "case_timeout=1s" in report.failures[0].message
