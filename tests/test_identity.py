"""An environment's one identity (``deepgym.identity.env_key``): a digest of its content, the
same in every process, computed once per object."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import deepgym.identity as identity
from deepgym.envs.registry import load_environment
from deepgym.identity import env_key
from deepgym.models import Environment

ENV = Environment(
    name="toy",
    entry_point="f",
    test_cases=[{"args": [1, "x"], "expected": [1]}],
    timeout=30.0,
    reference_solution="ref",
)

_CHILD = """
import json, sys
from deepgym.envs.registry import load_environment
from deepgym.identity import env_key
from deepgym.models import Environment
env = Environment.model_validate_json(sys.argv[1])
print(json.dumps([env_key(env), env_key(load_environment("two_sum"))]))
"""


def test_the_key_is_the_same_in_another_process_whatever_its_hash_seed(tmp_path: Path) -> None:
    verifier = tmp_path / "verifier.py"
    verifier.write_text("def verify(solution, test_cases):\n    return 1.0\n")
    env = ENV.model_copy(update={"test_cases": None, "verifier_path": verifier})
    here = [env_key(env), env_key(load_environment("two_sum"))]
    for seed in ("1", "2"):  # Python's own hash() differs between these two
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, env.model_dump_json()],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(child.stdout) == here


def test_the_key_is_the_content_not_the_name_and_a_file_s_bytes_count(tmp_path: Path) -> None:
    base = env_key(ENV)
    assert len(base) == 64 and int(base, 16) >= 0  # a sha256 digest
    assert env_key(ENV.model_copy(update={"name": "renamed", "task": "x", "tags": ("a",)})) == base
    for change in ({"reference_solution": "ref2"}, {"timeout": 20.0}, {"memory_mb": 512}):
        assert env_key(ENV.model_copy(update=change)) != base, change
    verifier = tmp_path / "verifier.py"
    verifier.write_text("def verify(solution, test_cases):\n    return 1.0\n")
    before = env_key(ENV.model_copy(update={"test_cases": None, "verifier_path": verifier}))
    verifier.write_text("def verify(solution, test_cases):\n    return 0.5\n")
    after = env_key(ENV.model_copy(update={"test_cases": None, "verifier_path": verifier}))
    assert after != before  # a new object sees the file's new bytes


def test_the_key_is_computed_once_per_object_and_forgotten_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dumps: list[object] = []
    feed = identity.feed_content

    def counted(h: object, env: Environment) -> None:
        dumps.append(env)
        feed(h, env)

    monkeypatch.setattr(identity, "feed_content", counted)
    env = ENV.model_copy(update={"name": "once"})
    first = env_key(env)
    assert all(env_key(env) == first for _ in range(100))
    assert len(dumps) == 1
    dumps.clear()
    kept = len(identity._KEYS)
    del env
    gc.collect()
    assert len(identity._KEYS) == kept - 1
