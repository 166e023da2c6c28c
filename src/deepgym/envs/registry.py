"""Environment folders and the registry of built-ins.

A folder holds ``task.md`` (the prompt), ``metadata.json`` (validated strictly: an unknown key is
an error naming it), ``test_cases.json`` and/or ``verifier.py``, and a reference answer
(``reference_solution.py``, or ``reference_solution.diff`` with a ``repo/`` for a patch task,
whose test cases each name a ``call``, ``"package.module:function"`` in that repository).
Names resolve to built-in folders, registered suites, or a path to a third-party folder.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.models import Environment

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"

METADATA_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "kind": str,
    "entry_point": str,
    "difficulty": str,
    "tags": list,
    "description": str,
    "timeout": (int, float),
    "case_timeout": (int, float),
    "memory_mb": int,
    "compare": str,
    "seed": int,
    "max_processes": int,
    "max_file_mb": int,
}

SuiteLoader = Callable[[], list[Environment]]
_SUITES: dict[str, SuiteLoader] = {}
_PREFIXES: dict[str, Callable[[str], Environment]] = {}


def register_suite(name: str, loader: SuiteLoader) -> None:
    """Register a suite under ``name`` (loaded lazily)."""
    _SUITES[name] = loader


def register_prefix(prefix: str, loader: Callable[[str], Environment]) -> None:
    """Names ``prefix/<id>`` load through ``loader(id)`` (e.g. ``humaneval/0``)."""
    _PREFIXES[prefix] = loader


def _validate_metadata(meta: Any, where: Path) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise ConfigError(f"{where}: metadata.json must be a JSON object")
    for key, value in meta.items():
        if key not in METADATA_KEYS:
            allowed = ", ".join(sorted(METADATA_KEYS))
            raise ConfigError(f"{where}: unknown metadata key {key!r} (allowed: {allowed})")
        want = METADATA_KEYS[key]
        if not isinstance(value, want) or isinstance(value, bool):
            raise ConfigError(
                f"{where}: metadata key {key!r} has the wrong type ({type(value).__name__})"
            )
    return meta


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: malformed JSON ({exc.msg} at line {exc.lineno})") from exc
    except (ValueError, RecursionError) as exc:  # e.g. an integer past Python's digit limit
        raise ConfigError(f"{path}: unreadable JSON ({exc})") from exc


def load_folder(folder: str | Path) -> Environment:
    """Load one environment folder; every error names the file and field at fault."""
    d = Path(folder)
    if not d.is_dir():
        raise ConfigError(f"{d}: not an environment folder")
    meta_path = d / "metadata.json"
    meta = _validate_metadata(_read_json(meta_path), meta_path) if meta_path.is_file() else {}
    fields: dict[str, Any] = {k: v for k, v in meta.items() if k != "tags"}
    fields.setdefault("name", d.name)
    if "tags" in meta:
        fields["tags"] = tuple(meta["tags"])
    if (d / "task.md").is_file():
        fields["task"] = (d / "task.md").read_text()
    if (d / "test_cases.json").is_file():
        cases = _read_json(d / "test_cases.json")
        if not isinstance(cases, list):
            raise ConfigError(f"{d / 'test_cases.json'}: must be a JSON list of test cases")
        fields["test_cases"] = cases
    if (d / "verifier.py").is_file():
        fields["verifier_path"] = d / "verifier.py"
    for ref in ("reference_solution.py", "reference_solution.diff"):
        if (d / ref).is_file():
            fields["reference_solution"] = (d / ref).read_text()
    if (d / "repo").is_dir():
        fields["repo_path"] = d / "repo"
    fields["source_dir"] = d
    try:
        return Environment(**fields)
    except ValueError as exc:
        raise ConfigError(f"{d}: {exc}") from exc


@functools.cache
def _builtin_names() -> tuple[str, ...]:
    if not BUILTIN_DIR.is_dir():
        return ()
    return tuple(sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "metadata.json").is_file()))


def list_environments() -> list[str]:
    """Names of the built-in environments."""
    return list(_builtin_names())


def list_suites() -> list[str]:
    return sorted(["builtin", *_SUITES])


@functools.lru_cache(maxsize=1024)
def _load_builtin(name: str) -> Environment:
    return load_folder(BUILTIN_DIR / name)


def _unknown(name: str, known: list[str]) -> UnknownEnvironmentError:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UnknownEnvironmentError(f"unknown environment {name!r}{hint}")


def load_environment(name: str | Path) -> Environment:
    """A built-in by name, ``prefix/<id>`` of a registered family, or a folder by path."""
    if isinstance(name, Path) or ("/" in str(name) and Path(name).is_dir()):
        return load_folder(name)
    key = str(name)
    if key in _builtin_names():
        return _load_builtin(key)
    prefix, _, ident = key.partition("/")
    _ensure_plugins()
    if ident and prefix in _PREFIXES:
        return _PREFIXES[prefix](ident)
    raise _unknown(key, list(_builtin_names()) + [f"{p}/<id>" for p in _PREFIXES])


def load_suite(name: str) -> list[Environment]:
    """All environments of a suite: ``builtin``, or a registered one such as ``humaneval``."""
    if name == "builtin":
        return [_load_builtin(n) for n in _builtin_names()]
    _ensure_plugins()
    if name in _SUITES:
        return _SUITES[name]()
    raise _unknown(name, list_suites())


def resolve(env: Environment | str | Path) -> Environment:
    """An ``Environment`` as given, or loaded by name or path."""
    if isinstance(env, Environment):
        return env
    if isinstance(env, str | Path):
        return load_environment(env)
    raise ConfigError(f"env must be an Environment, a name or a path, got {type(env).__name__}")


@functools.cache
def _ensure_plugins() -> None:
    """Import the modules that register suites (lazily: their data loads on first use)."""
    from deepgym.envs import humaneval  # noqa: F401
