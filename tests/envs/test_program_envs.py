"""The programs in other languages (``<language>/<problem>``, the suite ``programs``): each loads
by name with its reference in its own language, its test cases are the generator's, any_pair's
checker judges by testlib's convention, and every one passes ``deepgym check`` in the real
sandbox: the reference scores 1.0, and the empty source and the folder's wrong answer 0."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from deepgym import DeepGym, Environment, cli, languages, list_suites, load_environment, load_suite
from deepgym.envs.qa.check import check_environments, probes
from deepgym.envs.registry import (
    PROGRAMS_DIR,
    list_environments,
    list_program_environments,
    load_folder,
    solution_suffix,
)
from deepgym.exceptions import UnknownEnvironmentError
from deepgym.models import HARNESS_MARKER

PROGRAMS = list_program_environments()
SUM_PAIRS = [f"{lang}/sum_pairs" for lang in ("c", "cpp", "java", "js", "rust", "go")]
"""The problem every one of the first six languages has (the others have none here)."""
CHECKER = PROGRAMS_DIR / "cpp" / "any_pair" / "checker.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_deepgym_programs_generate", PROGRAMS_DIR / "generate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the folders -------------------------------------------------------------------------------


def test_every_problem_is_there() -> None:
    assert set(PROGRAMS) == {*SUM_PAIRS, "cpp/circle_area", "cpp/any_pair", "cpp/gcd"}
    assert not set(PROGRAMS) & set(list_environments())  # not in the builtin suite


@pytest.mark.parametrize("name", PROGRAMS)
def test_each_loads_by_name_with_its_own_language(name: str) -> None:
    lang, _, problem = name.partition("/")
    env = load_environment(name)
    assert (env.name, env.kind, env.language) == (name, "script", lang)
    assert env.source_dir == PROGRAMS_DIR / lang / problem
    reference = env.source_dir / f"reference_solution{solution_suffix(lang)}"
    assert env.reference_solution == reference.read_text()
    assert (env.source_dir / f"wrong_solution{solution_suffix(lang)}").is_file()
    assert env.task.startswith("# ") and env.description and env.difficulty
    assert 8 <= len(env.test_cases or []) <= 12
    assert load_folder(env.source_dir).name == name  # by path, the same name
    assert load_environment(name) is env  # cached


def test_the_suite_holds_them_all_and_is_always_listed() -> None:
    assert "programs" in list_suites()
    assert [e.name for e in load_suite("programs")] == PROGRAMS


def test_an_unknown_name_suggests_a_program() -> None:
    with pytest.raises(UnknownEnvironmentError, match="'cpp/sum_pairs'"):
        load_environment("cpp/sum_pair")


def test_a_python_folder_keeps_its_py_reference(tmp_path: Path) -> None:
    folder = tmp_path / "sum_py"
    folder.mkdir()
    (folder / "metadata.json").write_text('{"kind": "script"}')
    (folder / "test_cases.json").write_text('[{"stdin": "", "expected_stdout": ""}]')
    (folder / "reference_solution.py").write_text("print()\n")
    (folder / "reference_solution.cpp").write_text("int main() {}\n")
    assert load_folder(folder).reference_solution == "print()\n"


def test_generate_reproduces_every_test_set() -> None:
    gen = _generator()
    for name in PROGRAMS:
        folder = PROGRAMS_DIR / name
        stored = json.loads((folder / "test_cases.json").read_text())
        assert gen.generate(folder) == stored, name
    first = (PROGRAMS_DIR / SUM_PAIRS[0] / "test_cases.json").read_text()
    assert all((PROGRAMS_DIR / n / "test_cases.json").read_text() == first for n in SUM_PAIRS)


def test_probes_in_another_language_are_its_own() -> None:
    """No Python stub, echo or exploit: the empty source and the folder's wrong answer."""
    env = load_environment("cpp/sum_pairs")
    plan = {p.name: p for p in probes(env)}
    assert list(plan) == ["reference", "rerun_1", "rerun_2", "rerun_3", "empty", "wrong"]
    assert (
        plan["wrong"].answer
        == (env.source_dir or Path()).joinpath("wrong_solution.cpp").read_text()
    )
    assert (plan["empty"].answer, plan["empty"].expect, plan["wrong"].expect) == ("", "low", "low")
    bare = env.model_copy(update={"source_dir": None})
    assert [p.name for p in probes(bare)][-1] == "empty"  # no folder, no wrong answer
    python = [p.name for p in probes(load_environment("pair_sums"))]
    assert "echo" in python and any(n.startswith("exploit[") for n in python)


# -- any_pair's checker -------------------------------------------------------------------------


def _check(tmp_path: Path, stdin: str, expected: str, output: str | bytes) -> tuple[int, str]:
    paths = []
    for name, text in (("input", stdin), ("expected", expected), ("output", output)):
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        paths.append(str(path))
    done = subprocess.run(
        [sys.executable, str(CHECKER), *paths], capture_output=True, text=True, timeout=30
    )
    return done.returncode, done.stdout.strip()


@pytest.mark.parametrize(
    ("output", "code"),
    [
        ("1 4\n", 0),  # the expected pair
        ("2 5", 0),  # another valid pair
        ("  2\n5  \n", 0),  # any whitespace
        ("2 1\n", 1),  # i > j
        ("2 2\n", 1),  # one index twice: 0 + 0 = 0, yet no pair
        ("1 2\n", 1),  # -3 + 0
        ("0 4\n", 1),  # out of range
        ("-1\n", 1),  # a pair exists
        ("", 2),
        ("1\n", 2),
        ("1 two\n", 2),
        ("1 4 5\n", 2),
        (b"\xff\xfe 1\n", 2),  # not UTF-8
    ],
)
def test_the_checker_accepts_any_valid_pair(tmp_path: Path, output: str | bytes, code: int) -> None:
    got, message = _check(tmp_path, "5 0\n-3 0 7 3 0\n", "1 4\n", output)
    assert got == code, message


def test_the_checker_judges_no_pair(tmp_path: Path) -> None:
    assert _check(tmp_path, "1 10\n5\n", "-1\n", "-1\n")[0] == 0
    assert _check(tmp_path, "1 10\n5\n", "-1\n", "1 1\n")[0] == 1


def test_a_test_that_contradicts_itself_is_the_checkers_failure(tmp_path: Path) -> None:
    """Testlib's exit 3 (no verdict), never a wrong answer: the test is at fault."""
    code, message = _check(tmp_path, "2 3\n1 2\n", "-1\n", "1 2\n")
    assert code == 3 and "contradicts" in message, message
    assert _check(tmp_path, "3 5\n1 2\n", "-1\n", "-1\n")[0] == 3  # n=3, two values
    assert _check(tmp_path, "", "-1\n", "-1\n")[0] == 3


def test_the_checker_agrees_with_every_stored_case(tmp_path: Path) -> None:
    cases = load_environment("cpp/any_pair").test_cases or []
    for i, case in enumerate(cases):
        code, message = _check(
            tmp_path, case["stdin"], case["expected_stdout"], case["expected_stdout"]
        )
        assert code == 0, (i, message)


def test_the_checker_is_the_environments_where_the_registry_names_it() -> None:
    env = load_environment("cpp/any_pair")
    if "checker_path" not in Environment.model_fields or env.checker_path is None:
        pytest.skip("the registry does not name checker.py yet (checker_path)")
    assert env.checker_path == CHECKER


# -- deepgym check, in the real sandbox --------------------------------------------------------


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


@pytest.mark.sandbox
def test_every_program_passes_its_check(dg: DeepGym) -> None:
    for name in PROGRAMS:
        tc = languages.toolchain(name.partition("/")[0])
        if not tc.present:
            pytest.skip(f"{name}: this host lacks {languages.LANGUAGES[tc.language].package}")
    envs = load_suite("programs")
    reports = check_environments(envs, dg)
    failed = [r.summary() for r in reports if not r.ok]
    assert not failed, "\n".join(failed)
    for report in reports:
        assert [c.name for c in report.checks] == [
            "reference",
            "empty",
            "wrong",
            "deterministic",
            "time_limits",
        ], report.env_name


@pytest.mark.sandbox
def test_the_cli_checks_a_program() -> None:
    r = CliRunner().invoke(cli.cli, ["check", "cpp/sum_pairs"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "all 5 checks passed" in r.output


def test_a_function_task_runs_the_answer_in_its_harness() -> None:
    env = load_environment("cpp/gcd")
    assert env.harness is not None and HARNESS_MARKER in env.harness
    assert "int main" not in (env.reference_solution or "")  # the answer is the function only
