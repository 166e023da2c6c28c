"""The registry: folders, names, suites, and the environments it ships (HumanEval included)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym
from deepgym.envs import registry
from deepgym.envs.registry import (
    list_environments,
    list_suites,
    load_environment,
    load_folder,
    load_suite,
    resolve,
)
from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.models import Environment

BUILTIN = Path(registry.BUILTIN_DIR)


def write_folder(root: Path, **files: Any) -> Path:
    """An environment folder: ``metadata``/``test_cases`` as JSON, anything else as text."""
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if name in ("metadata", "test_cases"):
            (root / f"{name}.json").write_text(json.dumps(content))
        else:
            (root / name).write_text(content)
    return root


def add_folder(root: Path, **metadata: Any) -> Path:
    return write_folder(
        root,
        metadata={"kind": "function", "entry_point": "add", **metadata},
        test_cases=[{"args": [1, 2], "expected": 3}],
        **{
            "task.md": "Add two numbers.",
            "reference_solution.py": "def add(a, b):\n    return a + b\n",
        },
    )


# -- folders ----------------------------------------------------------------------------------


def test_unknown_metadata_key_is_named(tmp_path: Path) -> None:
    folder = add_folder(tmp_path / "env", tiemout=3)
    with pytest.raises(ConfigError) as info:
        load_folder(folder)
    assert "'tiemout'" in str(info.value)
    assert "metadata.json" in str(info.value)


def test_metadata_key_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'timeout' has the wrong type"):
        load_folder(add_folder(tmp_path / "env", timeout="3"))


def test_malformed_json_names_the_file(tmp_path: Path) -> None:
    folder = add_folder(tmp_path / "env")
    (folder / "test_cases.json").write_text("[{]")
    with pytest.raises(ConfigError, match=r"test_cases\.json: malformed JSON"):
        load_folder(folder)


def test_third_party_folder_by_path(tmp_path: Path) -> None:
    folder = add_folder(tmp_path / "my_env", timeout=3.5)
    for spec in (folder, str(folder)):
        env = load_environment(spec)
        assert env.name == "my_env"
        assert env.timeout == 3.5
        assert env.task == "Add two numbers."
        assert env.reference_solution and "return a + b" in env.reference_solution
        assert env.source_dir == folder
    assert resolve(folder).name == "my_env"


def test_third_party_folder_is_validated(tmp_path: Path) -> None:
    folder = write_folder(
        tmp_path / "bad", metadata={"entry_point": "f"}, test_cases=[{"args": [1]}]
    )
    with pytest.raises(ConfigError, match=r"(?s)bad: .*no 'expected'"):
        load_folder(folder)


# -- names and suites -------------------------------------------------------------------------


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownEnvironmentError) as info:
        load_environment("coin_chnge")
    assert "'coin_change'" in str(info.value)
    assert isinstance(info.value, KeyError)  # and a ConfigError: both ways to catch it


def test_unknown_suite_suggests_the_closest() -> None:
    with pytest.raises(UnknownEnvironmentError, match="'humaneval'"):
        load_suite("humanevl")


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter (nothing imported before it)."""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return out.stdout.strip()


def test_list_suites_in_a_fresh_process_names_every_suite() -> None:
    # The registry is data: nothing needs importing before the suites are known. (AgentBench's
    # is listed where its package, inspect-evals, is installed: make test installs it.)
    agentbench = importlib.util.find_spec("inspect_evals") is not None
    suites = str(["agentbench_os"] * agentbench + ["builtin", "humaneval", "programs"])
    assert _fresh("import deepgym; print(deepgym.list_suites())") == suites
    probe = (
        "import deepgym\n"
        "try:\n    deepgym.load_suite('nope')\nexcept deepgym.DeepGymError:\n    pass\n"
        "print(deepgym.list_suites())"
    )
    assert _fresh(probe) == suites  # the same after a failed load


def test_importing_deepgym_loads_no_suite_module() -> None:
    code = (
        "import sys, deepgym\ndeepgym.list_suites()\nprint('deepgym.envs.humaneval' in sys.modules)"
    )
    assert _fresh(code) == "False"


def test_a_suite_whose_data_is_missing_is_not_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = registry.Suite(load="deepgym.envs.humaneval:load_all", requires="no_such_module_x")
    monkeypatch.setitem(registry.SUITES, "ghost", missing)
    assert "ghost" not in list_suites()


def test_suites_registered_as_data_and_by_entry_point(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = Environment(name="toy", entry_point="f", test_cases=[{"args": [], "expected": 1}])
    registry.register_suite("mine", lambda: [env], problem=lambda ident: env)
    try:
        assert "mine" in list_suites()
        assert load_suite("mine") == [env]
        assert load_environment("mine/7") is env
    finally:
        del registry.SUITES["mine"]
    with pytest.raises(ConfigError, match="suite name"):
        registry.register_suite("a/b", lambda: [])

    class EntryPoint:
        name = "plugged"
        value = "json:loads"

    monkeypatch.setattr(registry, "_installed_suites", registry._installed_suites.__wrapped__)
    monkeypatch.setattr(
        "importlib.metadata.entry_points", lambda group: [EntryPoint()] if group else []
    )
    assert "plugged" in list_suites()
    broken = registry.Suite(load="no_such_module_y:load")
    monkeypatch.setitem(registry.SUITES, "broken", broken)
    with pytest.raises(ConfigError, match="cannot load 'no_such_module_y:load'"):
        load_suite("broken")


def test_builtin_suite() -> None:
    envs = load_suite("builtin")
    assert [e.name for e in envs] == list_environments()
    kinds = [e.kind for e in envs]
    assert kinds.count("function") >= 25
    assert kinds.count("script") >= 4
    assert kinds.count("patch") >= 3
    assert all(e.reference_solution for e in envs)


def test_builtin_is_cached_and_by_name() -> None:
    assert load_environment("coin_change") is load_environment("coin_change")


# -- patch environments -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fix_word_count", "add_duration_format", "refactor_discounts"])
def test_patch_environments_load(name: str) -> None:
    env = load_environment(name)
    assert env.kind == "patch"
    assert env.repo_path is not None and env.repo_path.is_dir()
    assert env.reference_solution and env.reference_solution.startswith("diff --git ")
    assert len(env.test_cases or []) >= 10
    assert "## Repository" in env.task


def copy_patch_env(tmp_path: Path, name: str = "fix_word_count") -> Path:
    folder = tmp_path / name
    shutil.copytree(BUILTIN / name, folder)
    return folder


def test_patch_folder_needs_its_repo(tmp_path: Path) -> None:
    folder = copy_patch_env(tmp_path)
    shutil.rmtree(folder / "repo")
    with pytest.raises(ConfigError, match="needs repo_path"):
        load_folder(folder)


@pytest.mark.parametrize(
    "case,match",
    [
        ({"args": ["a b"], "expected": 2}, r"test_cases\[0\]\.call"),
        ({"call": "word_count", "args": ["a"], "expected": 1}, r"package\.module:function"),
        ({"call": ":word_count", "expected": 1}, r"test_cases\[0\]\.call"),
        ({"call": "textstats.counting:word_count", "args": ["a"]}, "no 'expected'"),
    ],
)
def test_patch_test_cases_name_a_callable(tmp_path: Path, case: dict[str, Any], match: str) -> None:
    folder = copy_patch_env(tmp_path)
    (folder / "test_cases.json").write_text(json.dumps([case]))
    with pytest.raises(ConfigError, match=match):
        load_folder(folder)


def test_patch_with_a_verifier_needs_no_call(tmp_path: Path) -> None:
    env = load_folder(copy_patch_env(tmp_path, "refactor_discounts"))
    assert env.verifier_path is not None
    assert any("absent" in c for c in env.test_cases or [])


def test_patch_environment_needs_a_way_to_check(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs test_cases or a verifier"):
        Environment(name="p", kind="patch", repo_path=tmp_path)


# -- HumanEval --------------------------------------------------------------------------------


def test_humaneval_suite() -> None:
    envs = load_suite("humaneval")
    assert len(envs) == 164
    assert len({e.name for e in envs}) == 164
    assert envs[0].name == "humaneval/0"
    assert load_environment("humaneval/163") is envs[163]
    with pytest.raises(UnknownEnvironmentError, match=r"0\.\.163"):
        load_environment("humaneval/164")


@pytest.mark.sandbox
def test_every_humaneval_canonical_solution_passes() -> None:
    envs = load_suite("humaneval")
    answers = {e.name: e.reference_solution or "" for e in envs}
    with DeepGym(sandbox="pool") as dg:
        result = dg.eval(envs, answers, max_parallel=16)
    failed = [
        f"{name}: {r.error_type} {r.error[:100]} {[c.message for c in r.cases if not c.passed][:1]}"
        for name, r in zip(result.env_names, result.results, strict=True)
        if not (r.has_verdict and r.passed and r.score == 1.0)
    ]
    assert not failed, failed
    assert result.total == 164 and result.pass_rate == 1.0 and result.no_verdict_count == 0


def test_a_folder_without_metadata_says_the_file_is_missing(tmp_path: Path) -> None:
    folder = add_folder(tmp_path / "env")
    (folder / "metadata.json").unlink()
    with pytest.raises(ConfigError, match=r"metadata\.json: no such file"):
        load_folder(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"no metadata\.json, test_cases\.json or verifier\.py"):
        load_folder(empty)
