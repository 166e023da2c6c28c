"""What ``deepgym episode --agent`` takes: ``reference``, ``module:function`` or
``path/to/file.py:function``, and the agent it names.

Invariants:

- A spec is read by a pure function (``parse_agent_spec``): a module part that names a file
  (it ends in ``.py`` or holds a ``/``) is a path, anything else a module name.
- A module name is imported with the current directory first on the import path, as ``uvicorn``
  and ``python -m`` do, so that an agent beside the user is found without ``PYTHONPATH=.``.
- A file is imported from its path, with its own folder first on the import path (so that it
  can import its neighbours), under its stem or, where that name is taken, a name of its own.
- Every fault of the spec (its form, a missing file or module, a syntax error, a missing
  attribute, something not callable) is one ``ConfigError`` naming the spec and the fault: the
  command line prints one line, never a traceback. An error raised by the user's module as it
  runs is the user's code failing, and keeps its traceback.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from deepgym.exceptions import ConfigError
from deepgym.models import Environment
from deepgym.session import Agent

__all__ = ["AgentSpec", "load_agent", "parse_agent_spec"]

REFERENCE = "reference"
"""The spec of the environment's own reference agent."""

_FORMS = "'reference', module:function or path/to/agent.py:function"


@dataclass(frozen=True)
class AgentSpec:
    """A parsed ``--agent``: a module name or a file path, and the attribute path in it."""

    source: str
    attr: str
    is_file: bool


def parse_agent_spec(spec: str) -> AgentSpec:
    """Split ``module:attr`` or ``path/to/file.py:attr`` (the last ``:`` splits, so that a path
    may hold one); ``ConfigError`` when ``spec`` has neither form."""
    source, sep, attr = spec.rpartition(":")
    if not sep or not source or not attr:
        raise ConfigError(f"--agent must be {_FORMS}, got {spec!r}")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise ConfigError(f"--agent {spec}: {attr!r} is not a Python name")
    is_file = source.endswith(".py") or "/" in source
    if not is_file and not all(part.isidentifier() for part in source.split(".")):
        raise ConfigError(f"--agent {spec}: {source!r} is neither a module name nor a .py file")
    return AgentSpec(source, attr, is_file)


def _first_on_path(folder: str) -> None:
    if folder not in sys.path:
        sys.path.insert(0, folder)


def _syntax(spec: str, exc: SyntaxError) -> ConfigError:
    where = f"{exc.filename}:{exc.lineno}" if exc.filename else "its source"
    return ConfigError(f"--agent {spec}: syntax error in {where} ({exc.msg})")


def _import_module(spec: str, name: str) -> ModuleType:
    _first_on_path(str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{name}.".startswith(f"{exc.name}."):  # it, or a parent
            raise ConfigError(
                f"--agent {spec}: no module named {exc.name!r} (looked in the current "
                "directory and on the import path)"
            ) from exc
        raise ConfigError(f"--agent {spec}: importing {name!r} failed ({exc})") from exc
    except ImportError as exc:
        raise ConfigError(f"--agent {spec}: importing {name!r} failed ({exc})") from exc
    except SyntaxError as exc:
        raise _syntax(spec, exc) from exc


def _file_path(source: str) -> Path:
    path = Path(source).expanduser()
    if path.suffix != ".py" and not path.exists() and path.with_name(path.name + ".py").is_file():
        path = path.with_name(path.name + ".py")
    return path


def _import_file(spec: str, source: str) -> ModuleType:
    path = _file_path(source)
    if not path.is_file():
        what = "is a directory, not a .py file" if path.is_dir() else "no such file"
        raise ConfigError(f"--agent {spec}: {source}: {what}")
    path = path.resolve()
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    if loaded is not None or not name.isidentifier():
        name = f"deepgym_agent_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"--agent {spec}: {source}: cannot be imported as Python")
    module = importlib.util.module_from_spec(module_spec)
    _first_on_path(str(path.parent))
    sys.modules[name] = module  # as an import does: dataclasses and pickle look it up there
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, SyntaxError):
            raise _syntax(spec, exc) from exc
        if isinstance(exc, ImportError):
            raise ConfigError(f"--agent {spec}: importing {source} failed ({exc})") from exc
        raise  # the user's code failing as it runs: its traceback is what they need
    return module


def _attribute(spec: str, module: ModuleType, where: str, attr: str) -> Any:
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            names = [n for n in dir(value) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"--agent {spec}: {where} has no attribute {attr!r}{hint}")
        value = getattr(value, part)
    if not callable(value):
        raise ConfigError(
            f"--agent {spec}: {attr!r} in {where} is not callable ({type(value).__name__}); an "
            "agent is a callable from an Observation to an action"
        )
    return value


def load_agent(spec: str, env: Environment) -> Agent:
    """The agent ``spec`` names: ``reference`` (``env``'s reference agent), a module's callable
    or a file's (see the module doc); ``ConfigError`` naming the fault."""
    if spec == REFERENCE:
        from deepgym.envs.qa.session_check import reference_actions, scripted

        return scripted(reference_actions(env))
    parsed = parse_agent_spec(spec)
    if parsed.is_file:
        module = _import_file(spec, parsed.source)
    else:
        module = _import_module(spec, parsed.source)
    agent: Agent = _attribute(spec, module, parsed.source, parsed.attr)
    return agent
