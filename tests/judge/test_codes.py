"""The numbers the host and the judge share: one module that imports nothing, read by both."""

from __future__ import annotations

import ast
from pathlib import Path

from deepgym import verdict
from deepgym.judge import codes
from deepgym.sandbox import policy


def test_the_codes_module_imports_nothing() -> None:
    tree = ast.parse(Path(codes.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_host_and_judge_read_the_same_numbers() -> None:
    assert (codes.VERIFIER_BROKEN, codes.SETUP_FAILED) == (2, 121)
    assert verdict.VERIFIER_ERROR_EXIT == codes.VERIFIER_BROKEN
    solution = policy.argv(policy.SOLUTION, policy.Params(bwrap="bwrap"))
    assert ["--uid", str(codes.SOLUTION_UID)] == solution[solution.index("--uid") :][:2]
