"""SandboxFusion's HTTP API on ``deepgym serve``: ``POST /run_code``, ``POST /submit`` and
``GET /v1/ping``, so that a trainer that calls SandboxFusion (verl's code reward, SkyRL, tinker
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

import json
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deepgym.completions import extract_code_kind
from deepgym.exceptions import ConfigError
from deepgym.judge.report import MAX_CASES
from deepgym.languages import NAMES
from deepgym.models import CaseOutput, Environment, RunResult
from deepgym.server.inputs import MESSAGE_CHARS, Limits, check_time_limit
from deepgym.server.service import Service
from deepgym.text import one_line
from deepgym.verdict import COMPILER_STARTED

__all__ = [
    "LANGUAGES",
    "ROUTES",
    "RunCodeRequest",
    "SubmitRequest",
    "add_fusion",
    "backstop",
    "check_tests_fit",
    "client_deadline",
    "language_of",
    "run_code_env",
    "run_code_reply",
    "start_by",
    "submit_env",
    "submit_reply",
]

ROUTES = ("/run_code", "/submit", "/v1/ping")
"""SandboxFusion's routes this service answers (the first two behind the token, as ``/v1``)."""
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
    """``POST /submit``'s body: a completion to extract code from, and the tests to run it on."""

    model_config = ConfigDict(extra="ignore")

    dataset: str
    id: int | str
    completion: str
    config: SubmitConfig


def language_of(name: str) -> str:
    """deepgym's language for SandboxFusion's ``name``; ``ConfigError`` (400) naming it and
    the languages this service runs."""
    lang = LANGUAGES.get(name)
    if lang is None:
        known = ", ".join(sorted(LANGUAGES))
        raise ConfigError(f"language {name!r} is not run here; this service runs: {known}")
    assert lang in NAMES
    return lang


def _seconds(value: float | None, what: str, limits: Limits) -> float:
    got = check_time_limit(value if value is not None else DEFAULT_TIMEOUT_S, limits, what)
    return got if got is not None else DEFAULT_TIMEOUT_S


def _memory(mb: int) -> dict[str, int]:
    """SandboxFusion's ``memory_limit_MB`` (-1 or 0: its default, none) as deepgym's field."""
    return {"memory_mb": mb} if mb > 0 else {}


def _refuse_files(files: dict[str, str | None], fetch: list[str]) -> None:
    if files or fetch:
        named = "files" if files else "fetch_files"
        raise ConfigError(f"{named}: files in and out of a run are not supported by this service")


def backstop(run: float, tests: int) -> float:
    """The whole wall limit of a run of ``tests`` programs, each limited to ``run`` seconds: a
    bound of ours past their own limits (``timeout_kind="backstop"``), never the answer's: a
    run it cuts short has no verdict (a 504)."""
    return tests * (run + CASE_SLACK_S) + SLACK_S


def run_code_env(req: RunCodeRequest, limits: Limits) -> Environment:
    """The one-case script environment a ``/run_code`` request runs as: the program on the
    request's stdin, its output kept, nothing compared."""
    _refuse_files(req.files, req.fetch_files)
    run = _seconds(req.run_timeout, "run_timeout", limits)
    try:
        return Environment(
            name="run_code",
            kind="script",
            language=language_of(req.language),
            test_cases=[{"stdin": req.stdin or "", "expected_stdout": ""}],
            keep_output=True,
            case_timeout=run,
            timeout=backstop(run, 1),
            timeout_kind="backstop",
            compile_timeout=_seconds(req.compile_timeout, "compile_timeout", limits),
            scoring="partial",
            **_memory(req.memory_limit_MB),
        )
    except ValueError as exc:
        raise ConfigError(one_line(str(exc), MESSAGE_CHARS)) from exc


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


def _compile_result(result: RunResult, language: str) -> dict[str, Any] | None:
    """SandboxFusion's ``compile_result``: none for Python; the compile's end otherwise, with
    the compiler's diagnostics where it failed."""
    if language == "python":
        return None
    seconds = (result.evidence.compile_ms or 0.0) / 1000.0
    if not _failed_compile(result):
        return _command("Finished", seconds, 0)
    if result.error_type == "solution_timeout":
        return _command("TimeLimitExceeded", seconds, None, "", result.error)
    return _command("Finished", seconds, 1, "", result.error)


def _run_result(result: RunResult, output: CaseOutput | None) -> dict[str, Any] | None:
    """SandboxFusion's ``run_result`` of one program run (a signal's return code is minus it)."""
    if _failed_compile(result):
        return None
    if output is None:  # past the run's whole limit: no case reported
        return _command("TimeLimitExceeded", result.time_limit_s, None)
    seconds = output.time_ms / 1000.0
    if output.timed_out:
        return _command("TimeLimitExceeded", seconds, None, output.stdout, output.stderr)
    code = output.exit_code if output.signal is None else -output.signal
    return _command("Finished", seconds, code, output.stdout, output.stderr)


def _exec_info(result: RunResult, language: str, output: CaseOutput | None) -> dict[str, Any]:
    """One run in SandboxFusion's ``RunCodeResponse`` shape (a run that has a verdict)."""
    compiled = _compile_result(result, language)
    ran = _run_result(result, output)
    ok = (compiled is None or compiled["return_code"] == 0) and (
        ran is not None and ran["status"] == "Finished" and ran["return_code"] == 0
    )
    return {
        "status": "Success" if ok else "Failed",
        "message": "",
        "compile_result": compiled,
        "run_result": ran,
        "executor_pod_name": None,
        "files": {},
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


def run_code_reply(result: RunResult, language: str) -> tuple[int, dict[str, Any]]:
    """``/run_code``'s HTTP status and body for ``result``: 504 without a verdict, else 200."""
    if not result.has_verdict:
        return 504, no_verdict_body(result)
    output = result.cases[0].output if result.cases else None
    return 200, _exec_info(result, language, output)


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
    """The environment a ``/submit`` runs (its tests as cases, output kept, words compared),
    the code extracted from the completion, how it was found, and its language."""
    code, kind = extract_code_kind(req.completion)
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
    body = {
        "id": req.id,
        "accepted": bool(result.passed),
        "extracted_code": code,
        "full_code": code,
        "test_code": None,
        "tests": tests,
        "extracted_type": kind,
        "extra": None,
    }
    return 200, body


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
        env = run_code_env(req, service.limits)
        begin = start_by(env, client_deadline(req, arrived))
        result = await service.score(env, req.code, env.timeout, start_by=begin)
        status, body = run_code_reply(result, env.language)
        return JSONResponse(body, status_code=status)

    @app.post("/submit")
    async def submit(request: Request) -> JSONResponse:
        req: SubmitRequest = await _body(request, SubmitRequest)
        env, code, kind, language = submit_env(req, service.limits)
        result = await service.score(env, code, env.timeout)
        status, body = submit_reply(req, env, result, code, kind, language)
        return JSONResponse(body, status_code=status)
