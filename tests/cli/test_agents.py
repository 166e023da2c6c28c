"""``deepgym episode --agent``: a module from the current directory, a file by its path, and one
``error:`` line for every bad spec (``deepgym.cli.agents``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym.cli import cli
from deepgym.cli.agents import AgentSpec, load_agent, parse_agent_spec
from deepgym.envs.registry import load_environment
from deepgym.exceptions import ConfigError
from deepgym.session import Action, Observation

AGENT = """
from deepgym.session import Action

def agent(obs):
    return Action("done")

class Holder:
    @staticmethod
    def act(obs):
        return Action("bash", command="ls")

NOT_CALLABLE = 3
"""

ENV = load_environment("agent/fix_add")


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agent's own folder, the current directory, with nothing of it on the import path
    (as under the ``deepgym`` console script); what a test imports is forgotten after it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def write(folder: Path, name: str, text: str = AGENT) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def acts(agent: object) -> Action:
    assert callable(agent)
    action: Action = agent(Observation(task="t", step=0))
    return action


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("my_agent:agent", AgentSpec("my_agent", "agent", False)),
        ("pkg.mod:Holder.act", AgentSpec("pkg.mod", "Holder.act", False)),
        ("./my_agent.py:agent", AgentSpec("./my_agent.py", "agent", True)),
        ("path/to/agent:agent", AgentSpec("path/to/agent", "agent", True)),
        ("/a:b/agent.py:agent", AgentSpec("/a:b/agent.py", "agent", True)),
    ],
)
def test_specs_parse(spec: str, parsed: AgentSpec) -> None:
    assert parse_agent_spec(spec) == parsed


def test_a_module_in_the_current_directory_loads_without_pythonpath(folder: Path) -> None:
    write(folder, "dg_cwd_agent_a.py")
    assert acts(load_agent("dg_cwd_agent_a:agent", ENV)) == Action("done")
    assert acts(load_agent("dg_cwd_agent_a:Holder.act", ENV)) == Action("bash", command="ls")


@pytest.mark.parametrize(
    "spec",
    ["./dg_file_agent_b.py:agent", "dg_file_agent_b.py:agent", "./dg_file_agent_b:agent"],
)
def test_a_file_loads_by_its_path(folder: Path, spec: str) -> None:
    write(folder, "dg_file_agent_b.py")
    assert acts(load_agent(spec, ENV)) == Action("done")


def test_a_file_elsewhere_imports_its_neighbours(folder: Path) -> None:
    write(
        folder, "sub/dg_helper_c.py", "from deepgym.session import Action\nDONE = Action('done')\n"
    )
    write(
        folder,
        "sub/dg_main_c.py",
        "from dg_helper_c import DONE\n\ndef agent(obs):\n    return DONE\n",
    )
    assert acts(load_agent(str(folder / "sub" / "dg_main_c.py") + ":agent", ENV)) == Action("done")


def test_a_file_named_as_a_loaded_module_does_not_replace_it(folder: Path) -> None:
    write(folder, "json.py")
    assert acts(load_agent("./json.py:agent", ENV)) == Action("done")
    import json

    assert json.dumps([1]) == "[1]" and sys.modules["json"] is json


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nocolon", "must be 'reference', module:function or path/to/agent.py:function"),
        ("m:", "must be"),
        ("a b:agent", "'a b' is neither a module name nor a .py file"),
        ("m:not-a-name", "'not-a-name' is not a Python name"),
        ("./missing.py:agent", "./missing.py: no such file"),
        ("./sub:agent", "./sub: is a directory, not a .py file"),
        ("dg_no_such_module_d:agent", "no module named 'dg_no_such_module_d'"),
        ("dg_agent_e:agnt", "dg_agent_e has no attribute 'agnt'; did you mean 'agent'?"),
        ("./dg_agent_e.py:NOT_CALLABLE", "'NOT_CALLABLE' in ./dg_agent_e.py is not callable (int)"),
        ("./dg_agent_e.py:Holder.nope", "has no attribute 'Holder.nope'"),
        ("./dg_broken_f.py:agent", "syntax error in"),
        ("dg_broken_f:agent", "syntax error in"),
        ("./dg_needs_g.py:agent", "importing ./dg_needs_g.py failed (No module named 'dg_absent"),
        ("dg_needs_g:agent", "importing 'dg_needs_g' failed (No module named 'dg_absent"),
    ],
)
def test_a_bad_spec_is_one_error_line(folder: Path, spec: str, message: str) -> None:
    write(folder, "dg_agent_e.py")
    write(folder, "dg_broken_f.py", "def agent(obs:\n")
    write(folder, "dg_needs_g.py", "import dg_absent_module\n")
    (folder / "sub").mkdir()
    with pytest.raises(ConfigError, match=r"^--agent ") as info:
        load_agent(spec, ENV)
    assert message in str(info.value)
    r = CliRunner().invoke(cli, ["episode", "agent/fix_add", "--agent", spec, "--no-store"])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("Error: --agent") and message in r.output
    assert "Traceback" not in r.output and r.output.count("\n") == 1


def test_an_error_in_the_agents_own_code_keeps_its_traceback(folder: Path) -> None:
    write(folder, "dg_raises_h.py", "raise RuntimeError('the agent module failed')\n")
    with pytest.raises(RuntimeError, match="the agent module failed"):
        load_agent("./dg_raises_h.py:agent", ENV)
    assert not any("dg_raises_h" in name for name in sys.modules)


@pytest.mark.sandbox
@pytest.mark.parametrize("spec", ["my_agent:agent", "./my_agent.py:agent"])
def test_the_console_script_runs_an_agent_from_its_own_folder(tmp_path: Path, spec: str) -> None:
    """The user's case: ``deepgym episode`` in the agent's folder, no ``PYTHONPATH=.``."""
    write(tmp_path, "my_agent.py")
    deepgym = Path(sys.executable).parent / "deepgym"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src, "DEEPGYM_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [str(deepgym), "episode", "agent/fix_add", "--agent", spec, "--no-store"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert "--- step 1: done" in done.stdout and "--- verdict: 0.000" in done.stdout
    assert done.returncode == 1, done.stdout + done.stderr  # judged, and not passed
