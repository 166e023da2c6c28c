"""Each built-in environment's generate.py must reproduce its test_cases.json exactly."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType
from typing import Any

import pytest

from deepgym.envs import registry

BUILTIN = registry.BUILTIN_DIR
ALLOWED_KEYS = set(registry.METADATA_KEYS)
ENV_NAMES = sorted(p.name for p in BUILTIN.iterdir() if (p / "metadata.json").is_file())


def _metadata(name: str) -> dict[str, Any]:
    data = json.loads((BUILTIN / name / "metadata.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _load_generator(name: str) -> ModuleType:
    path = BUILTIN / name / "generate.py"
    spec = importlib.util.spec_from_file_location(f"_deepgym_builtin_generate_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_environments_found() -> None:
    assert len(ENV_NAMES) >= 30


@pytest.mark.parametrize("name", ENV_NAMES)
def test_metadata_keys(name: str) -> None:
    metadata = _metadata(name)
    assert set(metadata) <= ALLOWED_KEYS, sorted(set(metadata) - ALLOWED_KEYS)
    assert metadata["name"] == name
    assert metadata["kind"] in {"function", "script", "patch"}
    assert isinstance(metadata["seed"], int)
    if metadata["kind"] == "function":
        assert isinstance(metadata.get("entry_point"), str)
    else:
        assert "entry_point" not in metadata


@pytest.mark.parametrize("name", ENV_NAMES)
def test_generate_reproduces_test_cases(name: str) -> None:
    seed = _metadata(name)["seed"]
    generated = _load_generator(name).generate(seed)
    stored = json.loads((BUILTIN / name / "test_cases.json").read_text(encoding="utf-8"))
    assert generated == stored
    # Also guard against values that only compare equal before a JSON round trip
    # (tuples, non-string dict keys).
    assert json.loads(json.dumps(generated)) == stored
