"""The runtimes table and store (``deepgym.runtimes``), with pip replaced: no sandbox starts,
nothing is downloaded. The real build, and answers in it on both sandboxes, are in
``tests/sandbox/test_runtimes.py``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, get_args

import pytest

import deepgym.runtimes as rt
from deepgym.envs.registry import load_folders
from deepgym.exceptions import ConfigError, SandboxUnavailableError
from deepgym.judge.codes import IN_RUNTIME, RUNTIME_ENV
from deepgym.models import Environment, RuntimeName
from deepgym.runtimes import RUNTIMES, RuntimeStore, runtime, runtime_key

SCRIPT = {"name": "s", "kind": "script", "test_cases": [{"stdin": "", "expected_stdout": ""}]}


def test_the_table_is_the_models_list_of_names() -> None:
    assert tuple(RUNTIMES) == get_args(RuntimeName)
    assert rt.DEFAULT == "stdlib" == Environment.model_fields["runtime"].default
    assert RUNTIMES["stdlib"].requirements is None
    for name, entry in RUNTIMES.items():
        assert entry.name == name
        if entry.requirements is not None:
            assert Path(rt.__file__).with_name(entry.requirements).is_file()


def test_every_pin_is_exact_and_the_five_packages_are_there() -> None:
    text = Path(rt.__file__).with_name("scientific.txt").read_text()
    pins = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert all("==" in p and ">" not in p.split(";")[0] for p in pins), pins
    named = {p.split("==")[0] for p in pins}
    assert {"numpy", "pandas", "scipy", "scikit-learn", "sympy"} <= named


def test_an_unknown_runtime_is_refused_naming_the_runtimes() -> None:
    with pytest.raises(ConfigError, match="runtime must be one of stdlib, scientific, got 'nope'"):
        runtime("nope")
    with pytest.raises(ValueError, match="runtime"):
        Environment(**SCRIPT, runtime="nope")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"language": "cpp"}, "language 'cpp'"),
        (
            {
                "image": "debian:bookworm",
                "kind": "function",
                "entry_point": "f",
                "test_cases": [{"args": [], "expected": 1}],
            },
            "image",
        ),
    ],
)
def test_a_runtime_is_for_python_answers_on_the_hosts_system(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=f"runtime 'scientific' applies to .*not to {named}"):
        Environment(**{**SCRIPT, **fields, "runtime": "scientific"})
    Environment(**{**SCRIPT, **fields})  # the same without the runtime is fine


def test_a_session_takes_no_runtime() -> None:
    with pytest.raises(ValueError, match="not to kind 'session'"):
        Environment(
            name="s", kind="session", verifier_code="def verify(w, t): pass", runtime="scientific"
        )


def test_an_environment_folder_names_its_runtime(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text(
        json.dumps({"name": "np", "kind": "script", "runtime": "scientific"})
    )
    (tmp_path / "test_cases.json").write_text(json.dumps(SCRIPT["test_cases"]))
    (env,) = load_folders(tmp_path)
    assert env.runtime == "scientific"


def test_the_key_names_the_python_the_machine_and_the_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    key = runtime_key(RUNTIMES["scientific"])
    assert key.startswith(f"scientific-{sys.implementation.cache_tag}-")
    monkeypatch.setattr(sys.implementation, "cache_tag", "cpython-399")
    assert runtime_key(RUNTIMES["scientific"]) != key  # another Python: another folder


def test_the_pins_digest_leaves_comments_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pins = tmp_path / "pins.txt"
    monkeypatch.setattr(rt, "_requirements", lambda _: pins)
    scientific = RUNTIMES["scientific"]
    pins.write_text("# the pins\nnumpy==1.26.3\nsympy==1.12\n")
    key = runtime_key(scientific)
    pins.write_text("# the pins, said otherwise\n\nnumpy==1.26.3  # (a note)\nsympy==1.12\n")
    assert runtime_key(scientific) == key
    pins.write_text("numpy==1.26.4\nsympy==1.12\n")
    assert runtime_key(scientific) != key  # another pin: another folder


def test_the_store_is_under_deepgym_home_unless_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DEEPGYM_RUNTIMES", raising=False)
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))
    assert RuntimeStore().root == tmp_path / "home" / "runtimes"
    monkeypatch.setenv("DEEPGYM_RUNTIMES", str(tmp_path / "elsewhere"))
    assert RuntimeStore().root == tmp_path / "elsewhere"
    # a relative folder (``make pytest``'s build/runtimes) is the working directory's, made
    # absolute once: a sandbox mounts it wherever its process runs
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPGYM_RUNTIMES", "build/runtimes")
    assert RuntimeStore().root == tmp_path / "build" / "runtimes"
    assert RuntimeStore(Path("kept")).root == tmp_path / "kept"


class FakePip:
    """``subprocess.run`` for the store's pip and import check: pip writes one package into
    its ``--target`` (or fails, ``pip_fails``); the check passes (or fails, ``check_fails``).
    Counts the pip runs."""

    def __init__(self, pip_fails: str = "", check_fails: str = "") -> None:
        self.pip_fails = pip_fails
        self.check_fails = check_fails
        self.builds = 0
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        if "pip" in cmd:
            self.builds += 1
            self.gate.wait(10)
            if self.pip_fails:
                return subprocess.CompletedProcess(cmd, 1, "", f"ERROR: {self.pip_fails}\n")
            target = Path(cmd[cmd.index("--target") + 1])
            (target / "numpy").mkdir(parents=True)
            (target / "numpy" / "__init__.py").write_text("")
            (target / "numpy-1.26.3.dist-info").mkdir()
            return subprocess.CompletedProcess(cmd, 0, "", "")
        assert cmd[1:3] == ["-I", "-S"] and "import numpy" in cmd[-1]
        assert kw["env"]["OPENBLAS_NUM_THREADS"] == "1"
        if self.check_fails:
            return subprocess.CompletedProcess(cmd, 1, "", f"ImportError: {self.check_fails}\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")


def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pip: FakePip) -> RuntimeStore:
    monkeypatch.setattr(rt.subprocess, "run", pip)
    return RuntimeStore(tmp_path / "runtimes", say=lambda line: None)


def test_a_build_is_kept_under_its_key_with_its_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    lines: list[str] = []
    store = _store(tmp_path, monkeypatch, pip)
    assert store.find("scientific") is None
    built = store.build("scientific", say=lines.append)
    assert built is not None and built.path == store.folder("scientific")
    assert built.manifest["key"] == built.path.name
    assert built.manifest["packages"] == {"numpy": "1.26.3"}
    assert (built.site / "numpy" / "__init__.py").is_file()
    assert [p.name for p in store.root.iterdir() if p.name != ".lock"] == [built.path.name]
    assert lines[0].startswith("building runtime scientific for Python ")
    assert lines[1].startswith("runtime scientific built in ")
    assert built.solution_env() == {
        **RUNTIMES["scientific"].env,
        RUNTIME_ENV: f"{IN_RUNTIME}/site-packages",
    }
    assert store.build("scientific") == built and pip.builds == 1  # found, not built again
    assert store.build("stdlib") is None and store.find("stdlib") is None


@pytest.mark.parametrize("fails", ["pip", "check"])
def test_a_build_that_fails_leaves_nothing_and_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    why = "No matching distribution found for numpy==1.26.3"
    pip = FakePip(pip_fails=why) if fails == "pip" else FakePip(check_fails="libgfortran.so")
    store = _store(tmp_path, monkeypatch, pip)
    with pytest.raises(SandboxUnavailableError) as info:
        store.build("scientific")
    message = str(info.value)
    assert message.startswith("runtime scientific is not built and cannot be built here: ")
    assert (why if fails == "pip" else "libgfortran.so") in message
    assert "deepgym runtime build scientific" in message and str(store.root) in message
    assert store.find("scientific") is None
    assert [p.name for p in store.root.iterdir()] == [".lock"]  # no half-built folder


def test_a_folder_without_its_manifest_is_not_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path, monkeypatch, FakePip())
    folder = store.folder("scientific")
    (folder / "site-packages").mkdir(parents=True)
    assert store.find("scientific") is None
    (folder / "runtime.json").write_text(json.dumps({"key": "another"}))
    assert store.find("scientific") is None


def test_runs_waiting_for_a_runtime_share_one_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    pip.gate.clear()
    store = _store(tmp_path, monkeypatch, pip)

    async def main() -> list[Any]:
        waiting = [asyncio.ensure_future(store.ready("scientific")) for _ in range(5)]
        await asyncio.sleep(0.2)
        pip.gate.set()
        return list(await asyncio.gather(*waiting, store.ready("stdlib")))

    *built, none = asyncio.run(main())
    assert pip.builds == 1 and none is None
    assert all(b == built[0] and b is not None for b in built)


def test_a_failed_build_is_tried_again_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip(pip_fails="the index is down")
    store = _store(tmp_path, monkeypatch, pip)

    async def main() -> Any:
        with pytest.raises(SandboxUnavailableError, match="the index is down"):
            await store.ready("scientific")
        pip.pip_fails = ""
        return await store.ready("scientific")

    assert asyncio.run(main()) is not None and pip.builds == 2
