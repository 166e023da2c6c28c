"""Session environments built in a test's own folder, and a client whose sessions are checked
for leftovers when the test ends."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym
from deepgym.envs.registry import load_folder
from deepgym.models import Environment
from tests.procs import descendants

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "deepgym" / "envs" / "agent" / "fix_add"
FIX = "sed -i 's/a - b/a + b/' calc.py"
"""The one command that fixes the example's bug."""


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session records in the test's own folder (``sessions_dir``)."""
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))


@pytest.fixture
def example() -> Environment:
    return load_folder(EXAMPLE)


@pytest.fixture
def make_env(tmp_path: Path, example: Environment) -> Callable[..., Environment]:
    """The example environment with some fields or its verifier replaced."""

    def make(verifier: str | None = None, **fields: Any) -> Environment:
        update: dict[str, Any] = dict(fields)
        if verifier is not None:
            update["verifier_path"] = None
            update["verifier_code"] = textwrap.dedent(verifier)
        return example.model_copy(update=update)

    return make


@pytest.fixture
def dg() -> Iterator[DeepGym]:
    before = descendants(os.getpid())
    client = DeepGym()
    try:
        yield client
    finally:
        client.close()
    left = descendants(os.getpid()) - before
    assert not left, f"processes left after the client closed: {sorted(left)}"
