"""MultiPL-E (HumanEval and MBPP in 18 languages) as suites: ``multipl_e_humaneval_<lang>``.

MultiPL-E's files are JSON lines, one problem each: ``name``, ``language``, ``prompt`` (the
function's doc comment and signature), ``tests`` (a program that asserts on the completed
function: its first line closes the function where the language ends it with a brace) and
``stop_tokens``. A problem becomes a ``script`` environment in deepgym's language for it
(``LANGUAGES``), whose harness is the tests with the answer before them; the answer is a
MultiPL-E completion, a continuation of the prompt or a reply that writes the program out
(``answer_format="multipl_e"``: ``completions.multipl_e_code``), and the program passes by
exiting 0 (``compare="exit"``: its asserts held).

Data: ``load_file(path)`` reads any such file (a full data set a user downloaded, HumanEval or
MBPP). The registered suites read ``<dataset>-<lang>.jsonl`` from ``$DEEPGYM_MULTIPL_E``, or
``$DEEPGYM_HOME/data/multipl-e`` where it is unset; a suite whose file is not there is not
listed. Problem names are ``<suite>/<problem name>`` (``multipl_e_humaneval_cpp/
HumanEval_0_has_close_elements``).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.home import deepgym_home
from deepgym.models import HARNESS_MARKER, Environment

__all__ = [
    "DATASETS",
    "ENV_VAR",
    "LANGUAGES",
    "data_file",
    "harness",
    "load",
    "load_file",
    "load_problem",
    "suite_name",
]

LANGUAGES = {
    "cpp": "cpp",
    "cs": "csharp",
    "d": "d",
    "go": "go_test",
    "java": "java",
    "jl": "julia",
    "js": "js",
    "lua": "lua",
    "php": "php",
    "pl": "perl",
    "r": "r",
    "rb": "ruby",
    "rkt": "racket",
    "rs": "rust",
    "scala": "scala",
    "sh": "bash",
    "swift": "swift",
    "ts": "ts",
}
"""MultiPL-E's language codes -> deepgym's languages (Go's tests are a ``go test`` file)."""
DATASETS = ("humaneval", "mbpp")
ENV_VAR = "DEEPGYM_MULTIPL_E"
"""The folder of MultiPL-E's files (``humaneval-cpp.jsonl``, ``mbpp-rb.jsonl``, ...)."""
LIMITS: dict[str, float] = {"timeout": 20.0, "case_timeout": 15.0, "compile_timeout": 30.0}
"""A problem's time limits: its one program's run (a JVM's start included), and its compile."""


def suite_name(dataset: str, lang: str) -> str:
    """The suite of MultiPL-E's ``dataset`` in ``lang`` (MultiPL-E's code: ``cpp``, ``rb``)."""
    return f"multipl_e_{dataset}_{lang}"


def data_file(dataset: str, lang: str) -> Path:
    """Where the registered suite of ``dataset`` in ``lang`` reads its problems from."""
    folder = os.environ.get(ENV_VAR) or deepgym_home() / "data" / "multipl-e"
    return Path(folder) / f"{dataset}-{lang}.jsonl"


def _rows(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read MultiPL-E's problems ({exc.strerror}); put MultiPL-E's "
            f"files in ${ENV_VAR} (or $DEEPGYM_HOME/data/multipl-e), or load one with "
            "deepgym.envs.multipl_e.load_file(path)"
        ) from exc
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}:{i + 1}: not JSON ({exc})") from exc
        missing = [k for k in ("name", "prompt", "tests", "stop_tokens") if k not in row]
        if not isinstance(row, dict) or missing:
            raise ConfigError(f"{path}:{i + 1}: a MultiPL-E problem needs {', '.join(missing)}")
        rows.append(row)
    return rows


CSHARP_DEBUG = """
static class Debug {
    public static void Assert(bool ok) { if (!ok) throw new System.Exception("assert failed"); }
    public static void Assert(bool ok, string why) { if (!ok) throw new System.Exception(why); }
    public static void WriteLine(object value) { System.Diagnostics.Debug.WriteLine(value); }
    public static void WriteLine(string text) { System.Diagnostics.Debug.WriteLine(text); }
    public static void Write(object value) { System.Diagnostics.Debug.Write(value); }
}
"""
"""Mono's ``Debug.Assert`` prints nothing and returns where .NET's stops the program (as the
tests expect, and SandboxFusion's .NET does): the C# harness's ``Debug``, in the global
namespace, is found before ``System.Diagnostics``'s, and its ``Assert`` throws."""
RACKET_CHECKS = "(require rackunit)\n(current-check-handler raise)\n"
"""rackunit's failed check prints and goes on (the program still exits 0): raised instead, it
ends the program, exit 1."""


def harness(tests: str, language: str) -> str:
    """A problem's harness: the answer's code, then its tests, with what makes a failed
    assert end the program in the two runtimes where it would not (``CSHARP_DEBUG``,
    ``RACKET_CHECKS``)."""
    if language == "racket":
        tests = RACKET_CHECKS + tests
    elif language == "csharp":
        tests = tests + CSHARP_DEBUG
    return f"{HARNESS_MARKER}\n{tests}"


def _environment(row: dict[str, Any], suite: str, language: str) -> Environment:
    return Environment(
        name=f"{suite}/{row['name']}",
        task=row["prompt"],
        kind="script",
        language=language,
        harness=harness(row["tests"], language),
        answer_format="multipl_e",
        test_cases=[{"stdin": "", "stop_tokens": list(row["stop_tokens"])}],
        compare="exit",
        tags=("multipl_e",),
        **LIMITS,
    )


def load_file(path: str | Path, *, language: str | None = None) -> list[Environment]:
    """Every problem of a MultiPL-E file (HumanEval or MBPP, any language), in file order.
    ``language``: MultiPL-E's code for its language, where its name does not say it (the
    file ``humaneval-cpp.jsonl`` says ``cpp``; else each problem's ``language`` field)."""
    p = Path(path)
    rows = _rows(p)
    stem = p.name.removesuffix(".jsonl")
    dataset, _, lang_of_file = stem.rpartition("-")
    code = language or (lang_of_file if lang_of_file in LANGUAGES else None)
    envs = []
    for row in rows:
        lang = code or str(row.get("language", ""))
        if lang not in LANGUAGES:
            raise ConfigError(
                f"{p}: MultiPL-E language {lang!r} is not one of {', '.join(sorted(LANGUAGES))}"
            )
        suite = suite_name(dataset if dataset in DATASETS else "file", lang)
        envs.append(_environment(row, suite, LANGUAGES[lang]))
    return envs


@functools.cache
def _suite(dataset: str, lang: str) -> tuple[Environment, ...]:
    return tuple(load_file(data_file(dataset, lang), language=lang))


def load(dataset: str, lang: str) -> list[Environment]:
    """The registered suite ``multipl_e_<dataset>_<lang>`` (``registry.SUITES``)."""
    return list(_suite(dataset, lang))


def load_problem(dataset: str, lang: str, ident: str) -> Environment:
    """``multipl_e_<dataset>_<lang>/<problem name>``."""
    for env in _suite(dataset, lang):
        if env.name.partition("/")[2] == ident:
            return env
    raise UnknownEnvironmentError(
        f"unknown environment '{suite_name(dataset, lang)}/{ident}' (a problem's name, as "
        "HumanEval_0_has_close_elements)"
    )


def available(dataset: str, lang: str) -> bool:
    """Whether the registered suite's file is there (the suite is listed where it is)."""
    return data_file(dataset, lang).is_file()
