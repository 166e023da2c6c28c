"""Amplified tests: cases added to an environment (declarative or HumanEval asserts), kept in a
folder's test_cases.json or a suite's side file, read back by ``load_suite(augmented=...)``;
and, in the real sandbox, ``augment`` keeping only what the reference passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.envs.augmented import (
    AmplifiedCase,
    fitting,
    humaneval_assert,
    read_side_file,
    side_file,
    unsupported,
    with_cases,
    write_folder,
    write_side_file,
)
from deepgym.envs.qa.augment import augment, suite_of
from deepgym.envs.qa.mutants import mutation_test
from deepgym.envs.registry import load_environment, load_folder, load_suite
from deepgym.exceptions import ConfigError
from deepgym.models import Environment

MUTATION_ENVS = Path(__file__).parent / "mutation_envs"


def _case(*args: object, expected: object, name: str = "f") -> AmplifiedCase:
    return AmplifiedCase(name, tuple(args), (), expected)


def test_a_declarative_environment_takes_cases_at_the_end() -> None:
    env = Environment(name="e", entry_point="f", test_cases=[{"args": [1], "expected": 2}])
    more = with_cases(env, [_case((1, 2), expected=(3,))])
    assert more.test_cases == [
        {"args": [1], "expected": 2},
        {"args": [[1, 2]], "expected": [3]},
    ]
    patch_case = AmplifiedCase("shop.shipping:shipping", (11,), (), 15)
    assert patch_case.declarative() == {
        "call": "shop.shipping:shipping", "args": [11], "expected": 15,
    }  # fmt: skip


def test_what_cannot_take_cases_says_why() -> None:
    verifier_only = Environment(name="v", entry_point="f", verifier_code="def verify(s, t): ...")
    assert "reads no test cases" in (unsupported(verifier_only) or "")
    odd = Environment(
        name="o", entry_point="f", verifier_code="def verify(s, t): ...", test_cases=[{"n": 1}]
    )
    assert "not a declarative case" in (unsupported(odd) or "")
    with pytest.raises(ConfigError, match="cannot add test cases"):
        with_cases(verifier_only, [_case(1, expected=2)])


def test_a_humaneval_problem_takes_asserts_in_its_check() -> None:
    env = load_environment("humaneval/8")  # sum_product: returns a tuple
    cases = [
        _case([], expected=(0, 1), name="sum_product"),
        _case([2, 5], expected=(7, 10), name="sum_product"),
    ]
    more = with_cases(env, cases)
    assert more.test_cases is not None
    test = more.test_cases[0]["test"]
    assert test.rstrip().endswith("assert candidate([2, 5]) == (7, 10)")
    assert "assert candidate([]) == (0, 1)" in test
    assert more.test_cases[0]["prompt"] == env.test_cases[0]["prompt"]  # type: ignore[index]


def test_a_humaneval_float_is_compared_within_a_tolerance() -> None:
    text = humaneval_assert("candidate", _case(3.0, 4.0, expected=6.0))
    assert text == "assert abs(candidate(3.0, 4.0) - 6.0) <= 1e-06 * max(1.0, abs(6.0))"
    assert humaneval_assert("candidate", _case(1, expected=[0.5])) is None
    env = load_environment("humaneval/0")
    assert fitting(env, [_case(1, expected=[0.5]), _case(1, expected=True)]) == [
        _case(1, expected=True)
    ]


def test_a_side_file_round_trips_each_case_once(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    first = [_case((1, 2), expected={"a": (3,)}), _case("x", expected=None)]
    assert write_side_file(path, "humaneval", {"humaneval/1": first}) == {"humaneval/1": 2}
    again = [first[0], _case(5, expected=5)]
    assert write_side_file(path, "humaneval", {"humaneval/1": again}) == {"humaneval/1": 1}
    kept = read_side_file(path)
    assert kept["humaneval/1"] == [*first, again[1]]
    assert json.loads(path.read_text())["suite"] == "humaneval"
    path.write_text('{"cases": {"x": [{"args": "[1"}]}}')
    with pytest.raises(ConfigError, match=r"cases\.x\[0\]"):
        read_side_file(path)


def test_load_suite_reads_the_side_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="no such side file"):
        load_suite("humaneval", augmented=True)
    case = _case([1.0, 2.0], expected=3.0, name="x")
    write_side_file(side_file("humaneval"), "humaneval", {"humaneval/2": [case]})
    envs = load_suite("humaneval", augmented=True)
    plain = load_suite("humaneval")
    assert envs[1] == plain[1] and envs[2] != plain[2]
    assert envs[2].test_cases is not None
    assert "assert abs(candidate([1.0, 2.0]) - 3.0)" in envs[2].test_cases[0]["test"]
    assert load_suite("humaneval", augmented=side_file("humaneval"))[2] == envs[2]


def test_a_folder_takes_cases_in_its_test_cases_json(tmp_path: Path) -> None:
    folder = tmp_path / "weak_prime"
    shutil.copytree(MUTATION_ENVS / "weak_prime", folder)
    assert write_folder(folder, [_case(0, expected=False), _case(2, expected=True)]) == 1
    assert write_folder(folder, [_case(0, expected=False)]) == 0
    cases = json.loads((folder / "test_cases.json").read_text())
    assert cases[-1] == {"args": [0], "expected": False} and len(cases) == 4


def test_where_an_environment_keeps_its_cases(tmp_path: Path) -> None:
    assert suite_of(load_environment("coin_change")) == "builtin"
    assert suite_of(load_environment("humaneval/3")) == "humaneval"
    shutil.copytree(MUTATION_ENVS / "weak_prime", tmp_path / "weak_prime")
    assert suite_of(load_folder(tmp_path / "weak_prime")) is None


@pytest.mark.sandbox
def test_augment_round_trips_a_folder(tmp_path: Path) -> None:
    """The killing inputs become test cases that the reference passes and that kill the
    survivors; reloaded, the environment reaches the threshold."""
    folder = tmp_path / "weak_prime"
    shutil.copytree(MUTATION_ENVS / "weak_prime", folder)
    env = load_folder(folder)
    with DeepGym() as dg:
        before = mutation_test(env, dg)
        done = augment(env, before, dg)
        after = mutation_test(load_folder(folder), dg)
    assert before.score is not None and before.score < 0.9
    assert done.written == folder / "test_cases.json" and done.added > 0
    assert done.killed == done.survivors == len(before.survivors) > 0
    assert after.score is not None and after.score > before.score and not after.survivors


@pytest.mark.sandbox
def test_augment_round_trips_a_humaneval_problem_through_its_side_file(tmp_path: Path) -> None:
    """humaneval/40's tests miss mutants that reuse an element of the triple: their killing
    inputs, as asserts in a side file, kill every one of them once ``load_suite`` reads it."""
    side = tmp_path / "humaneval.json"
    env = load_environment("humaneval/40")
    with DeepGym() as dg:
        before = mutation_test(env, dg)
        done = augment(env, before, dg, path=side)
        after = mutation_test(load_suite("humaneval", augmented=side)[40], dg)
    assert before.survivors and all(s.killing_input for s in before.survivors)
    assert done.written == side and done.added > 0 and done.killed == len(before.survivors)
    assert list(read_side_file(side)) == ["humaneval/40"]
    assert after.killed > before.killed and not after.survivors
