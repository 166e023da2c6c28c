"""Weak tests fall short, strong ones pass: deliberately weak environments (a type-only
verifier, three hand-picked points, missing boundaries, a verifier that checks the length only,
a patch task whose test covers one branch) and their strong twins, in ``mutation_envs/``,
mutation-tested in the real sandbox."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym import DeepGym, cli
from deepgym.envs.qa.mutants import MUTATION_THRESHOLD, mutation_test
from deepgym.envs.registry import load_folder

HERE = Path(__file__).parent / "mutation_envs"
WEAK = sorted(p.name for p in HERE.iterdir() if p.name.startswith("weak_"))
STRONG = [w.replace("weak_", "strong_") for w in WEAK]

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def test_every_weak_environment_has_its_strong_twin() -> None:
    assert WEAK == [
        "weak_grade", "weak_prime", "weak_running_total", "weak_shipping", "weak_sort",
    ]  # fmt: skip
    assert all((HERE / s).is_dir() for s in STRONG)


@pytest.mark.parametrize("name", WEAK)
def test_a_weak_environment_falls_short_naming_survivors_with_killing_inputs(
    dg: DeepGym, name: str
) -> None:
    report = mutation_test(load_folder(HERE / name), dg)
    assert report.score is not None and report.score < MUTATION_THRESHOLD, report.to_json()
    assert report.survivors and all(s.killing_input for s in report.survivors)
    for s in report.survivors:
        case = json.loads(s.killing_input or "")
        assert set(case) >= {"args", "expected"}


@pytest.mark.parametrize("name", STRONG)
def test_its_strong_twin_reaches_the_threshold(dg: DeepGym, name: str) -> None:
    report = mutation_test(load_folder(HERE / name), dg)
    assert report.ok and not report.survivors and not report.undecideds, report.to_json()


def test_the_equivalent_mutants_are_told_by_evidence(dg: DeepGym) -> None:
    """``i * i <= n`` -> ``i + i <= n`` still tests every divisor it must: equivalent on the
    evidence of hundreds of inputs, none of which three hand-picked points would give."""
    report = mutation_test(load_folder(HERE / "strong_prime"), dg)
    (eq,) = [e for e in report.equivalents if e.description == "line 5: `*` -> `+`"]
    assert eq.agreed is not None and eq.agreed >= 300


def test_qa_mutants_exits_1_on_a_folder_with_a_weak_environment(tmp_path: Path) -> None:
    for name in ("weak_prime", "strong_prime"):
        shutil.copytree(HERE / name, tmp_path / name)
    r = CliRunner().invoke(
        cli.cli, ["qa", "--mutants", "--no-store", "--suite", str(tmp_path)], catch_exceptions=False
    )
    assert r.exit_code == 1, r.output
    assert "1/2 environments reach the mutation threshold 0.9; below: weak_prime" in r.output
    assert "weak_prime: survivor" in r.output and "killed by this test case:" in r.output
