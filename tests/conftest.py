"""Fixtures for every test: a private ``DEEPGYM_HOME``, so nothing writes to the real run store,
with one folder of precompiled headers for the session; and a clean exit after the Ray tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _precompiled_headers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of precompiled headers for the whole session (``deepgym.sandbox.headers``):
    each is built once (a few seconds of CPU, in the background), not once per test's home."""
    return tmp_path_factory.mktemp("pch")


@pytest.fixture(autouse=True)
def _deepgym_home(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    _precompiled_headers: Path,
) -> Path:
    home = tmp_path_factory.mktemp("deepgym-home")
    monkeypatch.setenv("DEEPGYM_HOME", str(home))
    monkeypatch.setenv("DEEPGYM_PCH_DIR", str(_precompiled_headers))
    return home


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the Ray tests, leave at once with pytest's status: with every result reported and
    every cluster shut down, Ray's core worker can still crash in the interpreter's own
    finalisation (seen once in two full runs: a segfault after the summary line, turning a
    passing run into exit 139)."""
    if "ray" in sys.modules and _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
