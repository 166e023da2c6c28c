"""MultiPL-E's HumanEval as suites (``multipl_e_humaneval_<lang>``), read in place from
SandboxFusion's sample of it (``../shared/data``, see its README): each of its 18 languages
loads, HumanEval's 161 problems (or the 154 to 160 of them MultiPL-E translated) in deepgym's
language for it; a suite whose file is missing is not listed; and a sample of each language's
``gpt_solution`` (a model's answer) scores on both sandboxes as the whole benchmark scores it
(``benchmarks/multipl_e.py``; the pass rates in ``benchmarks/RESULTS.md``), Swift and Julia
refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.sandbox.conftest import backend, dg, module_secret, sandbox
from tests.shared_data import shared_data

from deepgym import DeepGym, list_suites, load_suite
from deepgym.envs import multipl_e
from deepgym.exceptions import ConfigError

__all__ = ["backend", "dg", "module_secret", "sandbox"]

DATA = shared_data() / "sandboxfusion-samples" / "Multi-PLE"
CODES = sorted(multipl_e.LANGUAGES)
PROBLEMS = {
    **dict.fromkeys(("cpp", "js", "lua", "php", "pl", "r", "rb", "rkt"), 161),
    **{"cs": 158, "d": 156, "go": 154, "java": 158, "jl": 159, "rs": 156},
    **{"scala": 160, "sh": 158, "swift": 158, "ts": 159},
}
"""Each language's problems: HumanEval's 161, less those MultiPL-E could not translate."""

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason=f"no MultiPL-E files at {DATA}")


@pytest.fixture(autouse=True)
def data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(multipl_e.ENV_VAR, str(DATA))


def rows(code: str) -> list[dict[str, Any]]:
    text = (DATA / f"humaneval-{code}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("code", CODES)
def test_each_language_loads_as_a_suite(code: str) -> None:
    suite = multipl_e.suite_name("humaneval", code)
    assert suite in list_suites()
    envs = load_suite(suite)
    assert len(envs) == PROBLEMS[code] == len(rows(code))
    assert {e.language for e in envs} == {multipl_e.LANGUAGES[code]}
    first = envs[0]
    assert first.name == f"{suite}/HumanEval_0_has_close_elements", first.name
    assert (first.kind, first.answer_format, first.compare) == ("script", "multipl_e", "exit")
    assert first.task == rows(code)[0]["prompt"]


def test_a_suite_without_its_file_is_not_listed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(multipl_e.ENV_VAR, str(tmp_path))
    assert not any(s.startswith("multipl_e_") for s in list_suites())
    with pytest.raises(ConfigError, match="cannot read MultiPL-E's problems"):
        multipl_e.load_file(tmp_path / "humaneval-rb.jsonl")


def test_any_file_loads_by_path(tmp_path: Path) -> None:
    """A data set a user downloaded (MBPP here: its name says so), read by ``load_file``."""
    lines = (DATA / "humaneval-rb.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    path = tmp_path / "mbpp-rb.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    envs = multipl_e.load_file(path)
    assert [e.name for e in envs] == [
        "multipl_e_mbpp_rb/HumanEval_0_has_close_elements",
        "multipl_e_mbpp_rb/HumanEval_1_separate_paren_groups",
    ]
    assert {e.language for e in envs} == {"ruby"}


# -- a sample of the answers, on both sandboxes ------------------------------------------------

SAMPLE = (0, 2)
"""The problems of each language whose ``gpt_solution`` runs here (HumanEval_0, HumanEval_2)."""
FAILS = {
    ("go", 0): "the answer adds a test of its own that is wrong (1.4 - 1.0 < 0.5 expected false)",
    ("go", 2): "the answer's 6.12345 - 6 prints 0.12345000000000006, the test wants 0.12345",
    ("sh", 2): "the answer's bc prints .5, the test wants 0.5",
}
"""The answers of the sample that fail, each by its own fault (benchmarks/RESULTS.md)."""
REFUSED = ("jl", "swift")
"""MultiPL-E's languages Debian packages no toolchain for (``languages.unavailable``)."""


@pytest.mark.sandbox
@pytest.mark.parametrize("code", [c for c in CODES if c not in REFUSED])
def test_a_sample_of_the_answers_scores_as_the_benchmark_does(dg: DeepGym, code: str) -> None:
    envs = load_suite(multipl_e.suite_name("humaneval", code))
    answers = rows(code)
    batch = dg.run_batch(
        [envs[i] for i in SAMPLE], [answers[i]["gpt_solution"] for i in SAMPLE], max_parallel=2
    )
    for i, r in zip(SAMPLE, batch.results, strict=True):
        assert r.has_verdict, r
        assert r.passed is ((code, i) not in FAILS), (code, i, r)


@pytest.mark.sandbox
@pytest.mark.parametrize("code", REFUSED)
def test_a_language_without_a_toolchain_is_refused(dg: DeepGym, code: str) -> None:
    env = load_suite(multipl_e.suite_name("humaneval", code))[0]
    with pytest.raises(ConfigError, match=r"^language '\w+' is not run here: [^\n]+$"):
        dg.run(env, rows(code)[0]["gpt_solution"])
