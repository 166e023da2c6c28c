"""Patch tasks against the real sandboxes: the diff is applied by the verifier, and the patched
code, which runs only in the solution process, can neither reach nor sway the scoring.

Threat model (DESIGN.md): the diff is hostile. The verifier parses and applies it in pure
Python; the patched files travel to the solution process, which imports them. That code must not
see the test data or the verifier's copy of the repository, write to either, or pass a check with
a value that only claims to be right.
"""

from __future__ import annotations

import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym, Environment
from deepgym.exceptions import SandboxUnavailableError
from deepgym.judge.patch import make_diff
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend

from .conftest import ADD, ADD_OK, HostGuard

pytestmark = pytest.mark.sandbox

NOTFOUND = "NOTFOUND"
CORE = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module", params=["strict", "pool"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test here (the conftest's ``host`` guard knows its processes)."""
    try:
        return make_backend(request.param)
    except SandboxUnavailableError as exc:
        pytest.skip(f"the {request.param} sandbox cannot run on this host: {exc}")


@pytest.fixture(scope="module")
def dg(backend: Backend) -> Iterator[DeepGym]:
    """One warm client per backend (the conftest's ``host`` guard uses this one here)."""
    client = DeepGym(backend=backend)
    try:
        try:
            warm = client.run(ADD, ADD_OK)
        except SandboxUnavailableError as exc:
            pytest.skip(f"the {backend.name} sandbox cannot run on this host: {exc}")
        assert warm.has_verdict and warm.score == 1.0, warm
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "spypkg").mkdir()
    (root / "spypkg/__init__.py").write_text("")
    (root / "spypkg/core.py").write_text(CORE)
    return root


def patch_env(repo: Path, name: str, cases: list[dict[str, Any]], **limits: Any) -> Environment:
    return Environment(
        name=name,
        kind="patch",
        repo_path=repo,
        test_cases=cases,
        **{"timeout": 8.0, "case_timeout": 4.0, "memory_mb": 256, "max_processes": 16, **limits},
    )


def diff(new_files: dict[str, str], core: str = FIXED) -> str:
    old = {"spypkg/core.py": CORE}
    return make_diff(old, {"spypkg/core.py": core, **new_files})


ADDS = [
    {"call": "spypkg.core:add", "args": [1, 2], "expected": 3},
    {"call": "spypkg:core.add", "args": [5, 7], "expected": 12},
]

SPY = textwrap.dedent(
    """
    import glob, os, stat, sys

    SKIP = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/proc", "/sys",
            os.path.realpath(sys.base_prefix)}

    def probe(token, plant=False):
        if plant:  # the control: a file it can reach that holds the token
            with open("/tmp/planted.txt", "w") as f:
                f.write(token)
        found = []
        targets = [
            "/judge/env/test_cases.json", "/judge/env/repo/spypkg/core.py", "/judge/job.json",
            *glob.glob("/judge/envs/*/*"), *glob.glob("/judge/envs/*/repo/spypkg/*"),
            *glob.glob("/tmp/deepgym-*/envs/*/*"), *glob.glob("/tmp/deepgym-*/envs/*/repo/*/*"),
            *glob.glob("/dev/shm/deepgym-*/envs/*/*"),
            *glob.glob("/dev/shm/deepgym-*/envs/*/repo/*/*"),
        ]
        for path in targets:
            try:
                with open(path, "a") as f:
                    f.write("# tampered")
                found.append("wrote " + path)
            except OSError:
                pass
        for root, dirs, files in os.walk("/"):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in SKIP]
            for name in files:
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                    if stat.S_ISREG(st.st_mode) and st.st_size < 2**20:
                        with open(path, "rb") as f:
                            if token.encode() in f.read():
                                found.append("holds the token: " + path)
                except OSError:
                    pass
        return "NOTFOUND" if not found else found
    """
)


def test_reference_and_rules_on_every_backend(dg: DeepGym, host: HostGuard, repo: Path) -> None:
    env = patch_env(repo, "patch-basic", ADDS)
    good = diff({})
    runs = {
        "fix": good,
        "fenced": f"The sign was wrong.\n\n```diff\n{good}```\n",
        "empty": "",
        "tests": good + make_diff({}, {"tests/test_core.py": "assert True\n"}),
        "escape": make_diff({}, {"../escape.py": "x = 1\n"}),
        "stale": good.replace("-    return a - b", "-    return a * b"),
    }
    batch = dg.run_batch(env, list(runs.values()))
    got = {
        k: (r.has_verdict, r.score, r.error_type) for k, r in zip(runs, batch.results, strict=True)
    }
    assert got == {
        "fix": (True, 1.0, None),
        "fenced": (True, 1.0, None),
        "empty": (True, 0.0, "invalid_patch"),
        "tests": (True, 0.0, "test_infra_tampering"),
        "escape": (True, 0.0, "patch_apply_failed"),
        "stale": (True, 0.0, "patch_apply_failed"),
    }
    assert not (repo.parent / "escape.py").exists()
    host.check()


def test_patched_code_cannot_reach_the_test_data_or_the_verifiers_repo(
    dg: DeepGym, host: HostGuard, repo: Path
) -> None:
    token = "tok-" + secrets.token_hex(16)
    cases = [
        {"call": "spypkg.spy:probe", "args": [token], "expected": NOTFOUND},
        {"call": "spypkg.spy:probe", "args": [token, True], "expected": NOTFOUND},
        *ADDS,
    ]
    env = patch_env(repo, "patch-spy", cases)
    r = dg.run(env, diff({"spypkg/spy.py": SPY}))
    assert r.has_verdict, r
    passed = [c.passed for c in r.cases]
    # Nothing of the test data, nor a write; the control (a file it planted) is found, and the
    # verifier's repository still scores the fix: nothing the probe did reached it.
    assert passed == [True, False, True, True], r.cases
    assert "holds the token: /tmp/planted.txt" in r.cases[1].message
    assert "wrote" not in r.cases[0].message + r.cases[1].message
    assert (repo / "spypkg/core.py").read_text() == CORE
    host.check()


def test_values_that_claim_equality_do_not_pass(dg: DeepGym, host: HostGuard, repo: Path) -> None:
    liar = (
        "class Yes:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = None\n\n\n"
        "def add(a, b):\n    return Yes()\n"
    )
    r = dg.run(patch_env(repo, "patch-liar", ADDS), diff({}, core=liar))
    assert r.has_verdict and r.score == 0.0 and not r.passed, r


def test_a_dead_solution_restarts_with_the_patched_files(
    dg: DeepGym, host: HostGuard, repo: Path
) -> None:
    crash = "import os\n\n\ndef crash():\n    os._exit(7)\n"
    cases = [{"call": "spypkg.crash:crash", "args": [], "expected": None}, *ADDS]
    r = dg.run(patch_env(repo, "patch-crash", cases), diff({"spypkg/crash.py": crash}))
    assert r.has_verdict, r
    assert [c.passed for c in r.cases] == [False, True, True], r.cases
    assert "exited with code 7" in r.cases[0].message
    host.check()


def test_patched_code_that_exits_on_import_is_a_judged_zero(
    dg: DeepGym, host: HostGuard, repo: Path
) -> None:
    r = dg.run(patch_env(repo, "patch-exit", ADDS), diff({}, core="import os\nos._exit(0)\n"))
    assert r.has_verdict and r.score == 0.0 and r.error_type is None, r
    host.check()
