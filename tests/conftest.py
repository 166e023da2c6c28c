"""Fixtures for every test: a private ``DEEPGYM_HOME``, so nothing writes to the real run store."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _deepgym_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("deepgym-home")
    monkeypatch.setenv("DEEPGYM_HOME", str(home))
    return home
