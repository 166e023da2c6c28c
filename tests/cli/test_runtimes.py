"""``deepgym runtime build|list`` over a store the test owns: a stand-in for the scientific
runtime (``tests.built_runtimes.fake_scientific``), pip never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym import cli
from deepgym.runtimes import RuntimeStore
from tests.built_runtimes import fake_scientific


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEEPGYM_RUNTIMES", str(tmp_path / "runtimes"))
    return tmp_path / "runtimes"


def test_list_says_what_is_built_and_how_to_build_the_rest(root: Path) -> None:
    r = CliRunner().invoke(cli.cli, ["runtime", "list"])
    assert r.exit_code == 0, r.output
    assert "stdlib: the judge's Python, its standard library only" in r.stdout
    assert "scientific: not built (" in r.stdout
    assert "deepgym runtime build scientific" in r.stdout and f"kept in {root}" in r.stdout
    folder = fake_scientific(root)
    r = CliRunner().invoke(cli.cli, ["runtime", "list", "--json"])
    assert r.exit_code == 0, r.output
    listed = {row["name"]: row for row in json.loads(r.stdout)["runtimes"]}
    assert listed["stdlib"]["built"] and listed["stdlib"]["folder"] is None
    assert listed["scientific"]["built"] and listed["scientific"]["folder"] == str(folder)
    assert listed["scientific"]["packages"] == {"numpy": "stand-in"}


def test_build_leaves_a_built_runtime_as_it_is(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_scientific(root)
    r = CliRunner().invoke(cli.cli, ["runtime", "build", "stdlib"])
    assert r.exit_code == 0 and "the judge's Python, nothing to build" in r.stdout

    def no_build(self: RuntimeStore, name: str, say: object = None) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(RuntimeStore, "build", no_build)
    r = CliRunner().invoke(cli.cli, ["runtime", "build", "scientific"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("runtime scientific: already built: numpy stand-in")


def test_build_refuses_an_unknown_name_naming_the_runtimes(root: Path) -> None:
    r = CliRunner().invoke(cli.cli, ["runtime", "build", "numpy"])
    assert r.exit_code == 2, r.output
    assert "runtime must be one of stdlib, scientific, got 'numpy'" in r.stderr
    assert not root.exists()
