"""``deepgym doctor``: its table, ``--json`` and its three exit codes.

The checks themselves are tested in ``tests/sandbox/test_doctor.py``; here they are replaced by
canned reports, except in the one test that checks this host for real.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from deepgym import cli
from deepgym.sandbox import doctor

OK = doctor.Check("python", doctor.OK, "Python 3.12.1", "runs the judge")
WEAK = doctor.Check(
    "memory limit", doctor.WEAK, "no writable cgroup v1 memory controller", "rlimits only", "root"
)
FAIL = doctor.Check(
    "user namespaces",
    doctor.FAIL,
    "a seccomp filter refuses to create namespaces",
    "no sandbox can be made",
    "run the container with --security-opt seccomp=unconfined",
)


def invoke(*args: str, columns: int = 80) -> Result:
    env = {"COLUMNS": str(columns)}
    return CliRunner().invoke(cli.cli, ["doctor", *args], env=env, catch_exceptions=False)


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> list[doctor.Check]:
    """The checks the next ``diagnose`` returns."""
    checks: list[doctor.Check] = []
    monkeypatch.setattr(doctor, "diagnose", lambda: doctor.Report(tuple(checks)))
    return checks


@pytest.mark.parametrize(
    ("rows", "code", "summary"),
    [
        ([OK], 0, "the default sandbox runs here with full isolation and limits"),
        ([OK, WEAK], 1, "the sandbox runs, with weaker limits (memory limit)"),
        ([OK, WEAK, FAIL], 2, "the sandbox cannot run here (user namespaces)"),
    ],
)
def test_three_exit_codes(
    canned: list[doctor.Check], rows: list[doctor.Check], code: int, summary: str
) -> None:
    canned[:] = rows
    result = invoke()
    assert result.exit_code == code
    assert result.output.rstrip().endswith(summary)
    for check in rows:
        assert check.name in result.output and check.status in result.output


def test_the_table_gives_the_fix(canned: list[doctor.Check]) -> None:
    canned[:] = [OK, FAIL]
    output = invoke(columns=400).output  # wide enough for a table with no wrapped cell
    assert "┃ fix" in output
    assert "a seccomp filter refuses to create namespaces" in output
    assert "--security-opt seccomp=unconfined" in output


def test_json(canned: list[doctor.Check]) -> None:
    canned[:] = [OK, WEAK]
    result = invoke("--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["exit_code"] == 1 and data["summary"].startswith("the sandbox runs, with weaker")
    assert data["checks"][1] == {
        "name": "memory limit",
        "status": "weak",
        "found": "no writable cgroup v1 memory controller",
        "means": "rlimits only",
        "fix": "root",
    }


@pytest.mark.sandbox
def test_this_host() -> None:
    result = invoke("--json")
    data = json.loads(result.output)
    assert result.exit_code == data["exit_code"] == doctor.diagnose().exit_code
    assert data["exit_code"] in (0, 1), data["summary"]
    assert "doctor" in CliRunner().invoke(cli.cli, ["--help"]).output
