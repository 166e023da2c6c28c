"""Checker programs (testlib's convention), ``case_limit`` and ``stop_on_failure``: the checker's
exit codes as ``judge.checker`` maps them, and the runs they give, end to end in the pool."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym import DeepGym, Environment
from deepgym.judge import checker
from deepgym.languages import Toolchain
from deepgym.sandbox import doctor
from deepgym.sandbox.host import JUDGE_DIR

# Any two indices i < j whose values sum to the target, or -1: several answers are right.
ANY_PAIR_CHECKER = """\
import sys
inp, exp, out = (open(p).read() for p in sys.argv[1:4])
n, target, *vals = map(int, inp.split())
words = out.split()
if words == ["-1"]:
    sys.exit(0 if exp.split() == ["-1"] else 1)
if len(words) != 2 or not all(w.lstrip("-").isdigit() for w in words):
    print("two indices expected")
    sys.exit(2)
i, j = map(int, words)
sys.exit(0 if 0 <= i < j < n and vals[i] + vals[j] == target else 1)
"""
CASES = [
    {"stdin": "4 5\n1 4 2 3\n", "expected_stdout": "0 1\n"},
    {"stdin": "3 100\n1 2 3\n", "expected_stdout": "-1\n"},
    {"stdin": "5 7\n3 4 5 2 1\n", "expected_stdout": "0 1\n"},
]
# Right, but not the expected output's pair: the last pair found, not the first.
LAST_PAIR = """\
import sys
n, t, *v = map(int, sys.stdin.read().split())
pairs = [(i, j) for j in range(n) for i in range(j) if v[i] + v[j] == t]
print(*pairs[-1]) if pairs else print(-1)
"""


def run_checker(tmp_path: Path, source: str, output: str = "0 1\n") -> int:
    path = tmp_path / "checker.py"
    path.write_text(source)
    files = []
    for name, text in (("in", CASES[0]["stdin"]), ("exp", "0 1\n"), ("out", output)):
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    boot = str(JUDGE_DIR / "_boot.py")
    argv = [sys.executable, "-I", "-S", boot, "checker", str(path), *files]
    return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (ANY_PAIR_CHECKER, checker.ACCEPTED),
        ("import sys\nsys.exit(1)\n", checker.WRONG_ANSWER),
        ("import sys\nsys.exit(2)\n", checker.PRESENTATION_ERROR),
        ("import sys\nsys.exit(3)\n", checker.CHECKER_FAILED),
        ("raise ValueError('a bug of the checker')\n", checker.CHECKER_FAILED),
        ("import sys\nsys.exit('fail: no such case')\n", checker.CHECKER_FAILED),
        ("import sys\nsys.exit(7)\n", checker.CHECKER_FAILED),
        ("pass\n", checker.ACCEPTED),
    ],
)
def test_the_checkers_exit_is_testlibs_and_a_crash_is_its_own_failure(
    tmp_path: Path, source: str, code: int
) -> None:
    assert run_checker(tmp_path, source) == code


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def any_pair(tmp_path: Path, source: str = ANY_PAIR_CHECKER, **fields: object) -> Environment:
    path = tmp_path / "checker.py"
    path.write_text(source)
    return Environment(
        name="any_pair",
        kind="script",
        test_cases=CASES,
        checker_path=path,
        scoring="partial",
        **fields,  # type: ignore[arg-type]
    )


def test_a_checker_accepts_any_valid_answer_and_says_why_it_refuses_one(
    dg: DeepGym, tmp_path: Path
) -> None:
    env = any_pair(tmp_path)
    right = dg.run(env, LAST_PAIR)
    assert (right.score, right.passed, right.error_type) == (1.0, True, None)
    wrong = dg.run(env, "print(0, 2)\n")  # 1 + 2 != 5 on the first case
    assert wrong.has_verdict and not wrong.passed and wrong.error_type is None
    assert wrong.cases[0].message == "wrong answer"
    garbled = dg.run(env, "print('zero one')\n")
    assert garbled.cases[0].message == "presentation error: two indices expected"


def test_a_failed_checker_is_no_verdict_whatever_the_answer_printed(
    dg: DeepGym, tmp_path: Path
) -> None:
    env = any_pair(tmp_path, source="raise RuntimeError('the checker is broken')\n")
    r = dg.run(env, LAST_PAIR)
    assert not r.has_verdict and r.error_type == "verifier_error"
    assert "the checker raised RuntimeError" in (r.error or "")


def test_stop_on_failure_stops_at_the_first_failed_case(dg: DeepGym) -> None:
    cases = [{"stdin": "", "expected_stdout": text} for text in ("1\n", "2\n", "1\n")]
    env = Environment(
        name="stops", kind="script", test_cases=cases, stop_on_failure=True, scoring="partial"
    )
    r = dg.run(env, "print(1)\n")
    assert [c.passed for c in r.cases] == [True, False, False]
    assert r.cases[2].message == "not run: stopped at the first failed case"
    assert r.score == pytest.approx(1 / 3)
    whole = dg.run(env.model_copy(update={"stop_on_failure": False}), "print(1)\n")
    assert [c.passed for c in whole.cases] == [True, False, True]


def test_case_limit_judges_the_first_n_cases_only(dg: DeepGym) -> None:
    cases = [{"stdin": "", "expected_stdout": text} for text in ("1\n", "1\n", "2\n")]
    env = Environment(name="first_two", kind="script", test_cases=cases, case_limit=2)
    r = dg.run(env, "print(1)\n")
    assert (len(r.cases), r.passed) == (2, True)


@pytest.mark.parametrize(
    "fields",
    [{"checker_path": Path("checker.py")}, {"case_limit": 2}, {"stop_on_failure": True}],
)
def test_script_only_fields_are_refused_elsewhere_by_name(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=f"{next(iter(fields))} applies to kind 'script' only"):
        Environment(
            name="f",
            entry_point="f",
            test_cases=[{"args": [], "expected": 1}],
            **fields,  # type: ignore[arg-type]
        )


def test_the_doctor_names_the_package_of_an_absent_toolchain() -> None:
    found = [
        Toolchain("cpp", "/usr/bin/g++", "g++ 12.2.0", {"g++": "/usr/bin/g++"}),
        Toolchain("go", None, ""),
    ]
    rows = doctor.check_toolchains(found)
    assert [(r.name, r.status) for r in rows] == [
        ("language cpp", doctor.OK),
        ("language go", doctor.ABSENT),
    ]
    assert rows[1].fix == "apt-get install golang-go"
    report = doctor.Report((doctor.Check("python", doctor.OK, "3.11", "runs"), *rows))
    assert report.exit_code == 0  # an optional toolchain: the sandbox runs all the same
