"""SandboxFusion's HTTP API on ``deepgym serve``: ``POST /run_code``, ``POST /submit``, the
dataset routes (``GET /list_datasets``, ``POST /list_ids``, ``/get_prompts``,
``/get_prompt_by_id``: deepgym's suites as SandboxFusion's registered datasets) and ``GET
/v1/ping``, so that a trainer that calls SandboxFusion (verl's code reward, SkyRL, tinker
cookbook) switches to deepgym by changing one URL.

The request and response shapes are SandboxFusion's (``sandbox_fusion.models``); the rules that
differ are deepgym's contract:

- Where deepgym has no verdict (its sandbox, limits or host failed, or the host held a compiler
  back), the reply is **HTTP 504** with ``status: "SandboxError"`` and the cause in
  ``message``: verl retries a 504, where it would score a ``SandboxError`` 0.
- A ``/run_code`` request waits for a sandbox no longer than its client waits for the reply:
  verl gives up after ``compile_timeout + run_timeout + 10`` seconds (``client_deadline``), so a
  run that has not started by the time it could still end before then (``start_by``) never
  starts: a 504 at once, which verl retries, never a reply it no longer reads.
- A compile that failed once the compiler had started on the code (a refusal, an internal
  compiler error, a limit, its time), or the program's own failure (a non-zero exit, a crash, a
  time limit), is a normal reply, as SandboxFusion gives it: ``status: "Failed"`` with
  ``compile_result`` (the compiler's own words in its ``stderr``; ``TimeLimitExceeded`` for a
  compile past its time) and ``run_result`` (none after a failed compile) saying what
  happened.
- A limit of ours is never the program's failure: a request that cannot fit the service's
  limits (a ``/submit`` whose tests' ``run_timeout`` add up past ``--max-time-limit``) is
  refused with a 400 naming the limit before anything runs, and the run's whole wall limit is a
  backstop past the tests' own (``timeout_kind="backstop"``): a run it cuts short is a 504.
- The code runs in the service's sandbox (``pool`` by default, ``strict`` by choice). A service
  started with ``--sandbox unsafe`` runs it unisolated, and SandboxFusion's reply has no field
  to say so: never serve these routes that way to anything but a test.

Everything that decides a reply (the language's name, the environment a request becomes, a
result's SandboxFusion shape) is a pure function here; the routes only drive them.
"""

from __future__ import annotations

import binascii
import functools
import json
import posixpath
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepgym.completions import extract_code_kind
from deepgym.envs.registry import list_suites, load_suite
from deepgym.exceptions import ConfigError
from deepgym.judge import files as run_files
from deepgym.judge.report import MAX_CASES
from deepgym.languages import require
from deepgym.models import CaseOutput, Environment, RunResult
from deepgym.runtimes import DEFAULT as DEFAULT_RUNTIME
from deepgym.sandbox.base import RunInput
from deepgym.server.inputs import MESSAGE_CHARS, Limits, check_time_limit, in_runtime, runtime_of
from deepgym.server.service import Service
from deepgym.text import one_line
from deepgym.verdict import COMPILER_STARTED

__all__ = [
    "DATASET_ROUTES",
    "GUARDED",
    "LANGUAGES",
    "ROUTES",
    "PromptByIdRequest",
    "PromptsRequest",
    "RunCodeRequest",
    "SubmitRequest",
    "add_fusion",
    "backstop",
    "check_files",
    "check_tests_fit",
    "client_deadline",
    "datasets",
    "ids",
    "language_of",
    "problem",
    "prompts",
    "run_code_env",
    "run_code_input",
    "run_code_reply",
    "run_code_source",
    "start_by",
    "submit_env",
    "submit_reply",
]

DATASET_ROUTES = ("/list_datasets", "/list_ids", "/get_prompts", "/get_prompt_by_id")
"""SandboxFusion's dataset routes: deepgym's suites as its registered datasets (``/submit``
scores an answer to one of their problems by ``dataset`` and ``id``)."""
GUARDED = ("/run_code", "/submit", *DATASET_ROUTES)
"""SandboxFusion's routes behind the service's token (as ``/v1``; the token may also come as
``?token=`` or in the path, ``/t/<token>/...``)."""
ROUTES = (*GUARDED, "/v1/ping")
"""SandboxFusion's routes this service answers."""
LANGUAGES = {
    "python": "python",
    "python3": "python",
    "cpp": "cpp",
    "c": "c",
    "nodejs": "js",
    "javascript": "js",
    "js": "js",
    "java": "java",
    "rust": "rust",
    "go": "go",
    "bash": "bash",
    "typescript": "ts",
    "ts": "ts",
    "php": "php",
    "ruby": "ruby",
    "lua": "lua",
    "perl": "perl",
    "R": "r",
    "r": "r",
    "csharp": "csharp",
    "scala": "scala",
    "kotlin_script": "kotlin",
    "kotlin": "kotlin",
    "D_ut": "d",
    "d": "d",
    "racket": "racket",
    "verilog": "verilog",
    "sql": "sql",
    "pytest": "pytest",
    "junit": "junit",
    "go_test": "go_test",
    "jest": "jest",
    "julia": "julia",
    "swift": "swift",
    "lean": "lean",
    "cuda": "cuda",
    "python_gpu": "python_gpu",
}
"""SandboxFusion's language names (and deepgym's own) -> deepgym's ``language``."""
SLACK_S = 5.0
"""The run's wall limit past its tests' own (a sandbox's start, the report). A program that
runs past ``run_timeout`` is stopped there, as a case's time limit: the answer's."""
CASE_SLACK_S = 0.5
"""The run's wall limit past each test's own (starting, stopping and reaping its program)."""
DEFAULT_TIMEOUT_S = 10.0
CLIENT_MARGIN_S = 10.0
"""What verl's ``call_sandbox_api`` waits past a request's ``compile_timeout + run_timeout``
before it gives up on the reply (its ``API_TIMEOUT``; it then records an API error)."""
DIALECT = "sandbox_fusion"
"""How these routes build a compiled answer: with SandboxFusion's command lines
(``Environment.dialect``), so that an answer builds and behaves as it does there."""
START_MARGIN_S = 2.0
"""A started run's own time besides its program's: the sandbox's start, and the reply."""


class RunCodeRequest(BaseModel):
    """``POST /run_code``'s body, as SandboxFusion and verl send it (other fields ignored)."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: str
    stdin: str | None = None
    compile_timeout: float = DEFAULT_TIMEOUT_S
    run_timeout: float = DEFAULT_TIMEOUT_S
    memory_limit_MB: int = -1
    """SandboxFusion's (and verl's) name; -1 or 0: the environment's default memory limit."""
    files: dict[str, str | None] = Field(default_factory=dict)
    fetch_files: list[str] = Field(default_factory=list)


class SubmitConfig(BaseModel):
    """``config`` of ``POST /submit``: the tests in ``provided_data``."""

    model_config = ConfigDict(extra="ignore")

    language: str | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None


class SubmitRequest(BaseModel):
    """``POST /submit``'s body: a completion to extract code from, and the tests to run it on
    (``config.provided_data``), or the problem ``id`` of a registered ``dataset`` to score it
    as."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    completion: str
    config: SubmitConfig


class PromptsRequest(BaseModel):
    """``POST /list_ids`` and ``/get_prompts``'s body (SandboxFusion's ``GetPromptsRequest``):
    a dataset, its problems from ``offset``, at most ``limit`` of them; ``config.language``,
    where given, keeps those in that language."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    config: SubmitConfig = Field(default_factory=SubmitConfig)
    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=1_000_000, ge=0)


class PromptByIdRequest(BaseModel):
    """``POST /get_prompt_by_id``'s body (SandboxFusion's ``GetPromptByIdRequest``)."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    config: SubmitConfig = Field(default_factory=SubmitConfig)


def language_of(name: str) -> str:
    """deepgym's language for SandboxFusion's ``name``; ``ConfigError`` (400) naming it and
    the languages this service knows, or, for one it knows, why it is not run here (a language
    refused by name, or a toolchain this host lacks: ``languages.require``)."""
    lang = LANGUAGES.get(name)
    if lang is None:
        known = ", ".join(sorted(LANGUAGES))
        raise ConfigError(f"language {name!r} is not run here; this service runs: {known}")
    if lang != "python":  # refused here, or its toolchain missing: the request's fault, a 400
        require(lang)
    return lang


def _seconds(value: float | None, what: str, limits: Limits) -> float:
    got = check_time_limit(value if value is not None else DEFAULT_TIMEOUT_S, limits, what)
    return got if got is not None else DEFAULT_TIMEOUT_S


def _memory(mb: int) -> dict[str, int]:
    """SandboxFusion's ``memory_limit_MB`` (-1 or 0: its default, none) as deepgym's field."""
    return {"memory_mb": mb} if mb > 0 else {}


def _normal(name: str) -> str:
    """A file's name as the work dir holds it (``./a`` and ``a//b`` are ``a`` and ``a/b``, as
    SandboxFusion's ``os.path.join`` reads them); anything else is left for ``check_name``."""
    return posixpath.normpath(name) if isinstance(name, str) and name else name


def check_files(
    files: dict[str, str | None], fetch: list[str]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """A request's ``files`` (name: base64; a null content is skipped, as SandboxFusion skips
    it) and ``fetch_files``, checked before anything runs (``ConfigError``, a 400 naming the
    field): names relative to the work dir with no ``..`` (``judge.files.check_name``), no file
    inside another, at most ``MAX_FILES`` files of ``MAX_FILES_BYTES`` in all, valid base64, at
    most ``MAX_FETCH`` names. The files and the names to read back, as the work dir names them."""
    given = [(name, content) for name, content in files.items() if content is not None]
    if len(given) > run_files.MAX_FILES:
        raise ConfigError(f"files: {len(given)} files, over the {run_files.MAX_FILES} a run takes")
    out: dict[str, str] = {}
    size = 0
    for name, content in given:
        normal = _normal(name)
        why = run_files.check_name(normal)
        if why or normal in out:
            raise ConfigError(f"files: {name!r}: {why or 'named twice'}")
        if not isinstance(content, str):
            raise ConfigError(f"files: {name!r}: the content must be base64 text")
        try:
            size += len(binascii.a2b_base64(content))
        except (binascii.Error, ValueError) as exc:
            raise ConfigError(f"files: {name!r}: not base64 ({exc})") from None
        out[normal] = content
    if size > run_files.MAX_FILES_BYTES:
        raise ConfigError(
            f"files: {size} bytes in all, over the {run_files.MAX_FILES_BYTES} a run takes"
        )
    for normal in out:
        parts = normal.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in out:
                raise ConfigError(f"files: {normal!r} is inside another file, {parts[i - 1]!r}")
    if len(fetch) > run_files.MAX_FETCH:
        raise ConfigError(
            f"fetch_files: {len(fetch)} names, over the {run_files.MAX_FETCH} a run reads back"
        )
    names = []
    for name in fetch:
        normal = _normal(name)
        why = run_files.check_name(normal) if normal != run_files.PROGRAM_NAME else ""
        if why:
            raise ConfigError(f"fetch_files: {name!r}: {why}")
        names.append(normal)
    return tuple(out.items()), tuple(dict.fromkeys(names))


def backstop(run: float, tests: int) -> float:
    """The whole wall limit of a run of ``tests`` programs, each limited to ``run`` seconds: a
    bound of ours past their own limits (``timeout_kind="backstop"``), never the answer's: a
    run it cuts short has no verdict (a 504)."""
    return tests * (run + CASE_SLACK_S) + SLACK_S


def run_code_env(
    req: RunCodeRequest, limits: Limits, runtime: str = DEFAULT_RUNTIME
) -> Environment:
    """The one-case script environment a ``/run_code`` request runs in: its language and
    limits (and a Python answer's ``runtime``), its program's output kept, nothing compared.
    The request's own stdin and files are the run's (``run_code_input``), never the
    environment's, so one environment, made once, serves every request with the same settings
    (``_prepared``): nothing is made or staged per request."""
    run = _seconds(req.run_timeout, "run_timeout", limits)
    settings = {
        "language": language_of(req.language),
        "dialect": DIALECT,
        "case_timeout": run,
        "timeout": backstop(run, 1),
        "compile_timeout": _seconds(req.compile_timeout, "compile_timeout", limits),
        **_memory(req.memory_limit_MB),
    }
    if settings["language"] == "python":  # (a runtime is packages for Python)
        settings["runtime"] = runtime
    return _prepared(tuple(sorted(settings.items())))


PREPARED = 256
"""The ``/run_code`` environments kept made (one per language and limits a client sends)."""


@functools.lru_cache(maxsize=PREPARED)
def _prepared(settings: tuple[tuple[str, Any], ...]) -> Environment:
    """The ``/run_code`` environment of ``settings`` (made once: the same object each time, so
    its key and its staged folder are computed once too). Its one test case stands in for the
    run's own (``run_code_input``)."""
    try:
        return Environment(
            name="run_code",
            kind="script",
            test_cases=[{"stdin": "", "expected_stdout": ""}],
            keep_output=True,
            timeout_kind="backstop",
            scoring="partial",
            **dict(settings),
        )
    except ValueError as exc:
        raise ConfigError(one_line(str(exc), MESSAGE_CHARS)) from exc


PHP_OPEN = "<?php"


def run_code_source(code: str, language: str) -> str:
    """The program ``/run_code`` runs for ``code``: as sent, but PHP without its opening tag
    gets one (SandboxFusion's rule: a PHP file that does not start with the tag would print its
    own text)."""
    if language == "php" and not code.lstrip().startswith(PHP_OPEN):
        return f"{PHP_OPEN}\n{code.lstrip()}"
    return code


def run_code_input(req: RunCodeRequest) -> RunInput:
    """A ``/run_code`` request's own part of its run: its stdin as the one case, its files
    written into the program's work dir, the files read back (``check_files``)."""
    given, fetch = check_files(req.files, req.fetch_files)
    case = {"stdin": req.stdin or "", "expected_stdout": ""}
    return RunInput(cases=(case,), files=given, fetch=fetch)


def client_deadline(req: RunCodeRequest, arrived: float) -> float:
    """When the client of a ``/run_code`` request that ``arrived`` then gives up on it: verl's
    request timeout, ``compile_timeout + run_timeout + CLIENT_MARGIN_S`` seconds."""
    return arrived + req.compile_timeout + req.run_timeout + CLIENT_MARGIN_S


def start_by(env: Environment, deadline: float) -> float:
    """The latest instant a run of ``env`` may start and still reply by ``deadline``: its
    program's limit (``case_timeout``, judged on CPU time: an idle host takes no longer), a
    compiled language's compile phase (``compile_timeout``), and ``START_MARGIN_S``."""
    compiling = env.compile_timeout if env.language != "python" else 0.0
    return deadline - env.case_timeout - compiling - START_MARGIN_S


def _command(
    status: str,
    seconds: float | None,
    code: int | None,
    stdout: str = "",
    stderr: str = "",
) -> dict[str, Any]:
    return {
        "status": status,
        "execution_time": seconds,
        "return_code": code,
        "stdout": stdout,
        "stderr": stderr,
    }


def _failed_compile(result: RunResult) -> bool:
    """Whether the run ended in its compile phase (a judged compile error or compile timeout:
    the compiler had started, and no program ran)."""
    return result.error_type == "compile_error" or result.evidence.in_play_by == COMPILER_STARTED


ONE_COMMAND = frozenset(
    {"python", "pytest", "js", "ts", "php", "bash", "lua", "perl", "r", "ruby", "racket"}
    | {"csharp", "kotlin", "go_test", "sql"}
)
"""The languages SandboxFusion runs as one command, with no compile step of its own (an
interpreter, or ``dotnet run``, ``kotlin``, ``go test`` building inside the run): their
``compile_result`` is null, and a failed check or build of ours is the run's failure."""


def _compile_result(result: RunResult, language: str) -> dict[str, Any] | None:
    """SandboxFusion's ``compile_result``: none for the languages it runs as one command
    (``ONE_COMMAND``); the compile's end otherwise, with the compiler's diagnostics where it
    failed."""
    if language in ONE_COMMAND:
        return None
    if not _failed_compile(result):
        return _command("Finished", (result.evidence.compile_ms or 0.0) / 1000.0, 0)
    return _compile_failure(result)


def _compile_failure(result: RunResult) -> dict[str, Any]:
    """A failed compile phase as a command's end: past its time limit, or return code 1, with
    the compiler's (or check's) diagnostics on stderr."""
    seconds = (result.evidence.compile_ms or 0.0) / 1000.0
    if result.error_type == "solution_timeout":
        return _command("TimeLimitExceeded", seconds, None, "", result.error)
    return _command("Finished", seconds, 1, "", result.error)


def _run_result(
    result: RunResult, output: CaseOutput | None, language: str
) -> dict[str, Any] | None:
    """SandboxFusion's ``run_result`` of one program run (a signal's return code is minus it);
    where the compile phase failed, none, or, for a language SandboxFusion runs as one command,
    that failure as the run's (its diagnostics on stderr, return code 1)."""
    if _failed_compile(result):
        return _compile_failure(result) if language in ONE_COMMAND else None
    if output is None:  # past the run's whole limit: no case reported
        return _command("TimeLimitExceeded", result.time_limit_s, None)
    seconds = output.time_ms / 1000.0
    if output.timed_out:
        return _command("TimeLimitExceeded", seconds, None, output.stdout, output.stderr)
    code = output.exit_code if output.signal is None else -output.signal
    return _command("Finished", seconds, code, output.stdout, output.stderr)


def _exec_info(
    result: RunResult, language: str, output: CaseOutput | None, fetch: list[str] | None = None
) -> dict[str, Any]:
    """One run in SandboxFusion's ``RunCodeResponse`` shape (a run that has a verdict); its
    ``files``: those of ``fetch`` (the names as the request gave them) read back."""
    compiled = _compile_result(result, language)
    ran = _run_result(result, output, language)
    ok = (compiled is None or compiled["return_code"] == 0) and (
        ran is not None and ran["status"] == "Finished" and ran["return_code"] == 0
    )
    got, left_out = (output.files, output.files_left_out) if output is not None else ({}, [])
    files = {name: got[_normal(name)] for name in fetch or () if _normal(name) in got}
    message = ""
    if left_out:
        named = ", ".join(repr(n) for n in left_out)
        message = (
            f"fetch_files: {named} not returned: past the {run_files.FETCH_MAX_BYTES} bytes of "
            "files a run returns"
        )
    return {
        "status": "Success" if ok else "Failed",
        "message": message,
        "compile_result": compiled,
        "run_result": ran,
        "executor_pod_name": None,
        "files": files,
    }


def no_verdict_body(result: RunResult) -> dict[str, Any]:
    """The 504 body of a run without a verdict: SandboxFusion's ``SandboxError``, the cause."""
    cause = one_line(result.error or result.error_type or "no verdict", MESSAGE_CHARS)
    return {
        "status": "SandboxError",
        "message": f"deepgym has no verdict for this run ({result.error_type}): {cause}; "
        "retry it (a failure of the sandbox, not of the code)",
        "compile_result": None,
        "run_result": None,
        "executor_pod_name": None,
        "files": {},
    }


def run_code_reply(
    result: RunResult, language: str, fetch: list[str] | None = None
) -> tuple[int, dict[str, Any]]:
    """``/run_code``'s HTTP status and body for ``result``: 504 without a verdict, else 200,
    with the files of ``fetch`` (the request's ``fetch_files``) read back."""
    if not result.has_verdict:
        return 504, no_verdict_body(result)
    output = result.cases[0].output if result.cases else None
    return 200, _exec_info(result, language, output, fetch)


# -- /submit ------------------------------------------------------------------------------------
def _tests(data: Any) -> list[tuple[str, str]]:
    """(stdin, expected stdout) of each test in ``provided_data``: SandboxFusion's
    ``{"test": [{"input": {"stdin"}, "output": {"stdout"}}]}`` or a list of those, or the
    ``{"inputs": [...], "outputs": [...]}`` of APPS and CodeContests (also under
    ``input_output``, as an object or its JSON text)."""
    if isinstance(data, dict) and "input_output" in data:
        data = data["input_output"]
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise ConfigError(f"config.provided_data.input_output: not JSON ({exc})") from exc
    if isinstance(data, dict) and "inputs" in data and "outputs" in data:
        ins, outs = data["inputs"], data["outputs"]
        if not (isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs)):
            raise ConfigError("config.provided_data: inputs and outputs must be lists alike long")
        return [(str(i), str(o)) for i, o in zip(ins, outs, strict=True)]
    tests = data.get("test", data.get("tests")) if isinstance(data, dict) else data
    if not isinstance(tests, list) or not tests:
        raise ConfigError(
            "config.provided_data: give the tests as {'test': [{'input': {'stdin': ...}, "
            "'output': {'stdout': ...}}, ...]} or {'inputs': [...], 'outputs': [...]}"
        )
    out = []
    for i, test in enumerate(tests):
        try:
            out.append((str(test["input"].get("stdin", "")), str(test["output"]["stdout"])))
        except (KeyError, TypeError, AttributeError):
            raise ConfigError(
                f"config.provided_data.test[{i}]: needs input.stdin and output.stdout"
            ) from None
    return out


def check_tests_fit(tests: int, run: float, limits: Limits) -> None:
    """Refuse (400, naming the limit) a ``/submit`` whose tests cannot all run within this
    service's limits, before anything runs: never a run cut short by a limit of ours, which
    would score a right answer 0. The tests' own time limits add up (they run one after
    another) to at most ``Limits.max_time_limit``; a result carries at most ``MAX_CASES``."""
    if run * tests > limits.max_time_limit:
        raise ConfigError(
            f"config.run_timeout of {run:g} s for each of {tests} tests is {run * tests:g} s in "
            f"all, over this service's maximum of {limits.max_time_limit:g} s (deepgym serve "
            "--max-time-limit): send fewer tests or a shorter run_timeout"
        )
    if tests > MAX_CASES:
        raise ConfigError(
            f"config.provided_data: {tests} tests, over the {MAX_CASES} one /submit runs "
            "(a result carries no more): send them in several requests"
        )


def submit_env(req: SubmitRequest, limits: Limits) -> tuple[Environment, str, str, str]:
    """The environment a ``/submit`` runs, the code extracted from the completion, how it was
    found, and its language. With ``config.provided_data``: its tests as cases, output kept,
    words compared. Without: the problem ``id`` of the registered ``dataset`` (``problem``), as
    the suite has it, output kept."""
    code, kind = extract_code_kind(req.completion)
    if req.config.provided_data is None:
        try:
            env = problem(req.dataset, req.id, req.config.language)
        except ConfigError as exc:
            raise ConfigError(f"{exc}; or give the tests in config.provided_data") from None
        kept = env.model_copy(update={"keep_output": True, "dialect": DIALECT})
        return kept, code, kind, env.language
    tests = _tests(req.config.provided_data)
    language = language_of(req.config.language or "python")
    run = _seconds(req.config.run_timeout, "config.run_timeout", limits)
    check_tests_fit(len(tests), run, limits)
    try:
        env = Environment(
            name=f"submit/{one_line(str(req.dataset), 60) or 'dataset'}".replace(" ", "_")[:100],
            kind="script",
            language=language,
            test_cases=[{"stdin": i, "expected_stdout": o} for i, o in tests],
            compare="tokens",
            keep_output=True,
            case_timeout=run,
            timeout=backstop(run, len(tests)),
            timeout_kind="backstop",
            compile_timeout=_seconds(req.config.compile_timeout, "config.compile_timeout", limits),
            scoring="partial",
            dialect=DIALECT,
        )
    except ValueError as exc:
        raise ConfigError(one_line(str(exc), MESSAGE_CHARS)) from exc
    return env, code, kind, language


def submit_reply(
    req: SubmitRequest, env: Environment, result: RunResult, code: str, kind: str, language: str
) -> tuple[int, dict[str, Any]]:
    """``/submit``'s HTTP status and body: 504 without a verdict, else SandboxFusion's
    ``EvalResult`` with one entry per test."""
    if not result.has_verdict:
        return 504, no_verdict_body(result)
    if req.config.provided_data is None:  # a registered dataset's problem: its own cases
        return 200, _eval_result(req, result, code, kind, _problem_tests(result, language))
    cases = env.test_cases or []
    tests = []
    for i, case in enumerate(cases):
        got = result.cases[i] if i < len(result.cases) else None
        info = _exec_info(result, language, got.output if got is not None else None)
        tests.append(
            {
                "passed": bool(got is not None and got.passed),
                "exec_info": info,
                "test_info": {
                    "input": {"stdin": case["stdin"]},
                    "output": {"stdout": case["expected_stdout"]},
                },
            }
        )
    return 200, _eval_result(req, result, code, kind, tests)


def _eval_result(
    req: SubmitRequest, result: RunResult, code: str, kind: str, tests: list[dict[str, Any]]
) -> dict[str, Any]:
    """SandboxFusion's ``EvalResult`` of a run with a verdict; ``extra``: deepgym's score (the
    share of tests passed) and error type."""
    return {
        "id": req.id,
        "accepted": bool(result.passed),
        "extracted_code": code,
        "full_code": code,
        "test_code": None,
        "tests": tests,
        "extracted_type": kind,
        "extra": {"score": result.score, "error_type": result.error_type},
    }


def _problem_tests(result: RunResult, language: str) -> list[dict[str, Any]]:
    """Each case of a registered problem's run as an ``EvalResult`` test: a program's run
    (a script's case) as ``/run_code`` gives it; a call into the answer (a function's case) as
    its verdict and message, with no ``run_result`` (no program of its own ran)."""
    tests = []
    for case in result.cases:
        if case.output is not None:
            info = _exec_info(result, language, case.output)
        else:
            info = {
                "status": "Success" if case.passed else "Failed",
                "message": case.message,
                "compile_result": _compile_result(result, language),
                "run_result": None,
                "executor_pod_name": None,
                "files": {},
            }
        test_info = {"name": case.name, "message": case.message}
        tests.append({"passed": case.passed, "exec_info": info, "test_info": test_info})
    return tests


# -- the dataset routes -------------------------------------------------------------------------
def datasets() -> list[str]:
    """``/list_datasets``: the suites this service can load (``deepgym.list_suites``)."""
    return list_suites()


@functools.lru_cache(maxsize=32)
def _suite(name: str) -> tuple[Environment, ...]:
    """A suite's problems, loaded once per process (a suite is data installed with deepgym or
    a package: it does not change while the service runs)."""
    return tuple(load_suite(name))


def _problems(dataset: str, language: str | None) -> tuple[Environment, ...]:
    """The problems of ``dataset`` (a suite's name), those in ``language`` where given
    (SandboxFusion's name for it); ``ConfigError`` (400) naming an unknown dataset and the
    known ones."""
    if not isinstance(dataset, str) or dataset not in list_suites():
        known = ", ".join(list_suites())
        raise ConfigError(f"dataset {dataset!r} is not served here; the datasets: {known}")
    envs = _suite(dataset)
    if language is None:
        return envs
    lang = language_of(language)
    return tuple(e for e in envs if e.language == lang)


def _prompt(env: Environment) -> dict[str, Any]:
    """A problem as SandboxFusion's ``Prompt``: its id (the environment's name), its task, and
    labels saying what kind of answer it takes."""
    labels: dict[str, Any] = {"kind": env.kind, "language": env.language}
    if env.entry_point:
        labels["entry_point"] = env.entry_point
    if env.difficulty:
        labels["difficulty"] = env.difficulty
    if env.tags:
        labels["tags"] = list(env.tags)
    return {"id": env.name, "prompt": env.task, "labels": labels}


def prompts(req: PromptsRequest) -> list[dict[str, Any]]:
    """``/get_prompts``: the dataset's problems from ``offset``, at most ``limit``."""
    envs = _problems(req.dataset, req.config.language)
    return [_prompt(e) for e in envs[req.offset : req.offset + req.limit]]


def ids(req: PromptsRequest) -> list[str]:
    """``/list_ids``: the ids ``/get_prompts`` would list."""
    envs = _problems(req.dataset, req.config.language)
    return [e.name for e in envs[req.offset : req.offset + req.limit]]


def problem(dataset: str, ident: int | str, language: str | None = None) -> Environment:
    """The problem ``ident`` of ``dataset``: by its id (the environment's name, as
    ``/list_ids`` gives it), or by the part after the dataset's name (``0`` for
    ``humaneval/0``); ``ConfigError`` (400) naming what is unknown, or a ``language`` other
    than the problem's."""
    envs = {e.name: e for e in _problems(dataset, None)}
    env = envs.get(str(ident)) or envs.get(f"{dataset}/{ident}")
    if env is None:
        raise ConfigError(f"id {ident!r} is not a problem of dataset {dataset!r} (/list_ids)")
    if language is not None and language_of(language) != env.language:
        raise ConfigError(
            f"config.language {language!r}: problem {env.name!r} of {dataset!r} is in "
            f"{env.language!r}"
        )
    return env


# -- the routes ---------------------------------------------------------------------------------
async def _body(request: Request, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as exc:
        raise ConfigError(f"malformed request body: {one_line(str(exc), MESSAGE_CHARS)}") from exc


def add_fusion(app: FastAPI, service: Service) -> None:
    """Add SandboxFusion's routes to ``app`` (``create_app`` does, with the API)."""

    @app.get("/v1/ping")
    async def ping() -> str:
        return "pong"

    @app.post("/run_code")
    async def run_code(request: Request) -> JSONResponse:
        arrived = time.monotonic()
        req: RunCodeRequest = await _body(request, RunCodeRequest)
        env = run_code_env(req, service.limits, runtime_of(request.scope))
        given = run_code_input(req)
        begin = start_by(env, client_deadline(req, arrived))
        code = run_code_source(req.code, env.language)
        result = await service.score(env, code, env.timeout, begin, given)
        status, body = run_code_reply(result, env.language, req.fetch_files)
        return JSONResponse(body, status_code=status)

    @app.post("/submit")
    async def submit(request: Request) -> JSONResponse:
        req: SubmitRequest = await _body(request, SubmitRequest)
        env, code, kind, language = submit_env(req, service.limits)
        env = in_runtime(env, request.scope)
        # a registered problem's time limit is its own (its policy), as ``/v1/run`` sets it
        given = req.config.provided_data is not None
        limit = env.timeout if given else None
        # PHP gets its tag as on /run_code; a registered problem's answer is a completion
        result = await service.score(env, run_code_source(code, language) if given else code, limit)
        status, body = submit_reply(req, env, result, code, kind, language)
        return JSONResponse(body, status_code=status)

    @app.get("/list_datasets")
    async def list_datasets() -> list[str]:
        return datasets()

    @app.post("/list_ids")
    async def list_ids(request: Request) -> list[str]:
        return ids(await _body(request, PromptsRequest))

    @app.post("/get_prompts")
    async def get_prompts(request: Request) -> list[dict[str, Any]]:
        return prompts(await _body(request, PromptsRequest))

    @app.post("/get_prompt_by_id")
    async def get_prompt_by_id(request: Request) -> dict[str, Any]:
        req: PromptByIdRequest = await _body(request, PromptByIdRequest)
        return _prompt(problem(req.dataset, req.id, req.config.language))
