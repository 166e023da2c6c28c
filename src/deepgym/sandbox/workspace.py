"""A backend's private folder: each environment's files staged once, and a folder per run.

The folder is made with mode 0700 (no other user of the host reads a run's answer or test data)
and removed at ``close``. Staged environments are keyed by their content, so runs of one
environment share one copy, which sandboxes mount read-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from deepgym.models import Environment


def _env_key(env: Environment) -> str:
    blob = json.dumps(
        [
            env.name,
            env.kind,
            env.test_cases,
            env.verifier_code,
            str(env.verifier_path) if env.verifier_path else None,
            str(env.repo_path) if env.repo_path else None,
            str(env.tests_path) if env.tests_path else None,
            env.step_verifier_code,
        ],
        sort_keys=True,
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class Workspace:
    """A backend's private temporary folder: ``envs/<key>`` per environment, ``run-*`` per run."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="deepgym-"))
        os.chmod(self.root, 0o700)
        self.envs = self.root / "envs"
        """Every staged environment, one folder each (a pool worker mounts it whole)."""
        self.envs.mkdir()
        self._staged: dict[str, Path] = {}

    def env_dir(self, env: Environment) -> Path:
        """The folder holding ``env``'s test data, verifier and repository (staged at first
        use, then reused): what the verifier reads, never the answer."""
        key = _env_key(env)
        cached = self._staged.get(key)
        if cached is not None:
            return cached
        d = self.envs / key
        d.mkdir(parents=True, exist_ok=True)
        if env.test_cases is not None:
            (d / "test_cases.json").write_text(json.dumps(env.test_cases))
        if env.verifier_code is not None:
            (d / "verifier.py").write_text(env.verifier_code)
        elif env.verifier_path is not None:
            shutil.copyfile(env.verifier_path, d / "verifier.py")
        if env.repo_path is not None:  # a patch task's repository, read by the verifier only
            shutil.copytree(
                env.repo_path,
                d / "repo",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        if env.step_verifier_code is not None:  # a session's per-step verifier
            (d / "step_verifier.py").write_text(env.step_verifier_code)
        if env.tests_path is not None:  # a session's hidden tests, beside its verifier
            shutil.copytree(env.tests_path, d / "tests", dirs_exist_ok=True)
        self._staged[key] = d
        return d

    def run_dir(self) -> Path:
        """A new, empty folder for one run (the caller removes it when the run ends)."""
        return Path(tempfile.mkdtemp(dir=self.root, prefix="run-"))

    def close(self) -> None:
        """Remove the folder and everything staged in it."""
        shutil.rmtree(self.root, ignore_errors=True)
