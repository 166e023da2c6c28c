"""What the adapters share: ``MaskedRate``, settings from the environment, light imports, and
the OpenRLHF route mounted in ``deepgym serve``'s app."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from deepgym.exceptions import ConfigError
from deepgym.integrations.reward import MaskedRate, reward_settings
from tests.integrations.conftest import ScriptedBackend

ADAPTERS = ["trl", "axolotl", "dapo", "verl", "openrlhf", "lm_eval", "reward"]
FRAMEWORKS = [
    "trl",
    "transformers",
    "torch",
    "verl",
    "ray",
    "lm_eval",
    "datasets",
    "fastapi",
    "gymnasium",
]


def test_more_than_five_in_a_block_of_a_hundred_warns(caplog: pytest.LogCaptureFixture) -> None:
    rate = MaskedRate("test")
    with caplog.at_level(logging.WARNING, logger="deepgym.integrations"):
        assert rate.update([True] * 5 + [False] * 95) == 0  # exactly 5: quiet
        assert rate.update([True] * 6 + [False] * 93) == 0  # block not full yet
        assert rate.add(False)  # the 100th sample closes a block with 6
    assert rate.alerts == 1 and rate.total == 200 and rate.masked == 11
    assert rate.rate == pytest.approx(11 / 200)
    assert caplog.text.count("test: 6 of the last 100 samples got no verdict") == 1


def test_masked_rate_checks_its_settings() -> None:
    with pytest.raises(ConfigError):
        MaskedRate(block=0)


def test_reward_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGYM_ENV", "two_sum")
    monkeypatch.setenv("DEEPGYM_MAX_PARALLEL", "4")
    monkeypatch.setenv("DEEPGYM_REWARD_TIMEOUT", "30")
    assert reward_settings() == {"env": "two_sum", "max_parallel": 4, "timeout": 30.0}
    monkeypatch.setenv("DEEPGYM_MAX_PARALLEL", "many")
    with pytest.raises(ConfigError, match="DEEPGYM_MAX_PARALLEL"):
        reward_settings()


@pytest.mark.parametrize("name", ADAPTERS)
def test_importing_an_adapter_imports_no_framework(name: str) -> None:
    code = (
        f"import json, sys, deepgym.integrations.{name}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert not loaded & set(FRAMEWORKS), loaded & set(FRAMEWORKS)


def test_adapters_never_import_each_other() -> None:
    import re
    from pathlib import Path

    import deepgym.integrations as pkg

    pattern = re.compile(
        r"^\s*(?:from\s+deepgym\.integrations\.(\w+)|from\s+deepgym\.integrations\s+import\s+(\w+)"
        r"|import\s+deepgym\.integrations\.(\w+))",
        re.M,
    )
    for path in Path(pkg.__file__).parent.glob("*.py"):
        for match in pattern.finditer(path.read_text()):
            target = next(g for g in match.groups() if g)
            assert target in ("reward", path.stem), f"{path.name} imports the {target} adapter"


def test_the_service_mounts_the_openrlhf_route() -> None:
    from deepgym.server.app import create_app

    backend = ScriptedBackend()
    app = create_app(backend, openrlhf=True, close_backend=True)
    body = {"query": ["Q: pass"], "prompts": ["Q:"], "labels": ["two_sum"]}
    with TestClient(app) as http:
        out = http.post("/openrlhf/get_reward", json=body).json()
    assert out["rewards"] == [1.0] and backend.answers == ["pass"]
