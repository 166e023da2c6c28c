"""The public data model: environments, run results and their totals (pure, no I/O).

Totals follow the contract: the headline numbers (``passed``, ``failed``, ``avg_score``,
``pass_rate``) count a run without a verdict as a failed 0; the judged-only numbers
(``no_verdict_count``, ``judged_count``, ``judged_pass_rate``, ``judged_mean_score``) sit beside
them. A run without a verdict never counts as passed.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deepgym.judge.codes import MAX_CASE_ARGS_BYTES, MAX_OUTPUT_BYTES
from deepgym.text import clip, one_line
from deepgym.validation import (
    MAX_CASES,
    MAX_FILE_MB,
    MAX_KEPT_OUTPUT_KB,
    MAX_MEMORY_MB,
    MAX_PROCESSES,
    depth_at_most,
    int_field,
    name_field,
    name_str,
    optional_seconds_field,
    optional_text_field,
    seconds_field,
    text_field,
)
from deepgym.verdict import ALL_ERROR_TYPES, MODEL_FAULT_ERRORS, has_verdict

__all__ = [
    "HARNESS_MARKER",
    "MODEL_FAULT_ERRORS",
    "BatchResult",
    "CaseOutput",
    "CaseResult",
    "Environment",
    "EvalResult",
    "Evidence",
    "RunResult",
    "ServiceTime",
    "Totals",
]

EnvKind = Literal["function", "script", "patch", "session"]
Compare = Literal["exact", "float", "unordered", "tokens", "exit"]
"""How a case's result is compared with what it expects; ``exit``: not compared at all, a
script's program passes its case by exiting 0 (a program that asserts, as MultiPL-E's do)."""
HARNESS_MARKER = "// deepgym:answer"
"""The line of an environment's ``harness`` that the answer's code replaces."""
LanguageName = Literal[
    "python",
    "c",
    "cpp",
    "java",
    "js",
    "rust",
    "go",
    "bash",
    "ts",
    "php",
    "ruby",
    "lua",
    "perl",
    "r",
    "racket",
    "csharp",
    "scala",
    "kotlin",
    "d",
    "verilog",
    "sql",
    "pytest",
    "junit",
    "go_test",
    "swift",
    "julia",
    "lean",
    "cuda",
    "python_gpu",
    "jest",
]
"""The languages an answer may be written in (``deepgym.languages`` has how each is built)."""
TEST_RUNNERS = frozenset({"pytest", "junit", "go_test"})
"""The languages that are test-runner modes: each test the runner reports is a case, and no
output is compared (``deepgym.languages``' ``report``, held to this by a test)."""
RuntimeName = Literal["stdlib", "scientific"]
"""The runtimes a Python answer may run in (``deepgym.runtimes`` has what each holds)."""
Scoring = Literal["all", "partial"]
AnswerFormat = Literal["code", "multipl_e"]
TimeoutKind = Literal["limit", "backstop"]
Dialect = Literal["deepgym", "sandbox_fusion"]
"""Whose command lines build a compiled answer (``Environment.dialect``)."""


class Stage(BaseModel):
    """One stage of a session in stages (``Environment.stages``): its name, what the agent is
    asked, a bash script run in the work dir before it (not before the first: the session's
    ``setup_script`` is that), and the score under which the episode stops after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, name_field("name")]
    task: Annotated[str, text_field("task")]
    setup_script: Annotated[str | None, optional_text_field("setup_script")] = None
    min_reward: float | None = Field(default=None, ge=0.0, le=1.0)


class Environment(BaseModel):
    """One task: what the model is asked, and how its answer is verified.

    Exactly one way to verify is needed: ``test_cases`` (declarative, against ``entry_point``, or
    stdin/stdout cases for a script), or ``verifier_code`` or ``verifier_path`` (a ``verify``
    function). A patch task also needs ``repo_path`` (the repository the diff applies to); its
    declarative cases each name a ``call`` (``"package.module:function"``) in that repository.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, name_field("name")]
    task: Annotated[str, text_field("task")] = ""
    kind: EnvKind = "function"
    entry_point: Annotated[str | None, name_field("entry_point", optional=True)] = None
    test_cases: list[dict[str, Any]] | None = None
    verifier_code: Annotated[str | None, optional_text_field("verifier_code")] = None
    verifier_path: Path | None = None
    reference_solution: Annotated[str | None, optional_text_field("reference_solution")] = None
    repo_path: Path | None = None
    timeout: Annotated[float, seconds_field("timeout")] = 10.0
    """The cap on one run's time; the effective limit may be lower (see ``time_limit``), never
    higher: a call's own ``time_limit`` above it is held to it. Judged on the answer's CPU time
    over its calls, with a backstop on the clock (``deepgym.judge.blame``)."""
    timeout_kind: TimeoutKind = "limit"
    """Whose limit the run's time limit is. ``"limit"`` (the default): the task's own, so an
    answer that runs past it, using its own time, is judged 0 (``solution_timeout``).
    ``"backstop"``: the task's time limits are its cases' own (``case_timeout``, as
    SandboxFusion's ``run_timeout``), and the run's is only a bound of the runner's: a run it
    cuts short has no verdict (``timeout``), never the answer's 0."""
    time_limit: Annotated[float | None, optional_seconds_field("time_limit")] = None
    """A fixed time limit for this environment, instead of one derived from the reference."""
    case_timeout: Annotated[float, seconds_field("case_timeout")] = 2.0
    """The limit of each call into the answer (a script's or compiled program's run of each
    case), in the answer's CPU time, with a backstop on the clock (``deepgym.judge.blame``)."""
    memory_mb: Annotated[int, int_field("memory_mb", 32, MAX_MEMORY_MB)] = 1024
    max_processes: Annotated[int, int_field("max_processes", 1, MAX_PROCESSES)] = 64
    max_file_mb: Annotated[int, int_field("max_file_mb", 1, MAX_FILE_MB)] = 64
    compare: Compare = "exact"
    language: LanguageName = "python"
    """The language of the answer: ``python`` (the default), or another for a ``script`` task
    (a program on stdin and stdout), which is compiled (or syntax-checked) once in the sandbox
    before its cases run: ``c``, ``cpp``, ``java``, ``js``, ``rust``, ``go``, ``bash``,
    ``ts``, ``php``, ``ruby``, ``lua``, ``perl``, ``r``, ``racket``, ``csharp``, ``scala``,
    ``kotlin``, ``d``, ``verilog``, ``sql``; or a test-runner mode, whose tests are the result's
    cases: ``pytest``, ``junit``, ``go_test`` (``deepgym.languages``; ``swift``, ``julia``,
    ``lean``, ``cuda`` and ``jest`` are refused here, saying why)."""
    harness: Annotated[str | None, optional_text_field("harness")] = None
    """A function task in a compiled language: a program in the environment's language with
    the line ``// deepgym:answer`` (``HARNESS_MARKER``) where the answer's code goes; its
    ``main`` reads a case's stdin, calls the answer's function and prints what it returns,
    which is compared with the case's ``expected_stdout`` outside the program."""
    answer_format: AnswerFormat = "code"
    """What the answer is: ``code`` (the default), the program (or, with a ``harness``, the
    code at its marker) as it is; ``multipl_e``, a MultiPL-E completion (a continuation of the
    prompt, ``task``, or a reply that writes the program out), made into the code before the
    harness's tests by ``completions.multipl_e_code`` with the stop tokens of the first test
    case (``deepgym.envs.multipl_e``)."""
    compile_timeout: Annotated[float, seconds_field("compile_timeout")] = 30.0
    """A compiled language: the time limit of the compile phase, in seconds of the compiler's
    CPU time (a compile that uses it, or waits past it, is the answer's ``solution_timeout``;
    one the host held back past three times it on the clock has no verdict)."""
    dialect: Dialect = "deepgym"
    """A compiled language: whose command line builds the answer. ``deepgym``: the language's
    own (``deepgym.languages``: C++ as ``-std=gnu++17 -O2``); ``sandbox_fusion``: the one
    SandboxFusion builds it with, where it differs (C++ as ``-std=c++17``, no ``-O``, linked
    with ``-lcrypto -lssl -lpthread``), so that an answer behaves as it does there: what
    ``deepgym serve``'s SandboxFusion routes use."""
    checker_path: Path | None = None
    """A script task: a checker program (``checker.py``, testlib's convention: it reads the
    case's input, the expected output and the answer's output, and exits 0 accepted, 1 wrong
    answer, 2 presentation error, 3 its own failure: no verdict), for problems with several
    valid outputs; it replaces ``compare``."""
    case_limit: Annotated[int | None, int_field("case_limit", 1, MAX_CASES, optional=True)] = None
    """A script task: judge only the first N test cases."""
    keep_output: bool = False
    """A script task: keep each case's stdout, stderr, exit code and time in its result
    (``CaseResult.output``)."""
    kept_output_kb: Annotated[int, int_field("kept_output_kb", 1, MAX_KEPT_OUTPUT_KB)] = 1024
    """How much of each output stream of the answer's process comes back, in KiB:
    ``RunResult.stdout`` and ``stderr`` and each kept case's output. Past it, the stream's first
    part, a line naming how many bytes were left out, and its end (a traceback's last lines)
    come back, in as many bytes. What is judged (a script's whole stdout) is never cut."""
    stop_on_failure: bool = False
    """A script task: stop at the first failed case (the rest count as failed, not run), as a
    contest judge does; the score is then the share passed before it."""
    scoring: Scoring = "all"
    """How a judged run's score becomes reward: ``"all"`` (all-or-nothing, the default) scores an
    answer that does not pass 0.0, as HumanEval's harness scores a problem, so no answer earns
    reward for the cases an empty or constant answer happens to pass; ``"partial"`` keeps the
    verifier's score (for test cases: the share passed)."""
    difficulty: Annotated[str | None, name_field("difficulty", optional=True)] = None
    tags: tuple[str, ...] = Field(default=(), max_length=256)
    max_steps: Annotated[int, int_field("max_steps", 1, 1_000_000)] = 50
    """A session: the most actions an episode takes (``kind: "session"`` only)."""
    step_timeout: Annotated[float, seconds_field("step_timeout")] = 30.0
    """A session: the time limit of one command, in seconds."""
    lifetime: Annotated[float, seconds_field("lifetime")] = 600.0
    """A session: how long its sandbox lives, in seconds, from the moment it opens."""
    setup_script: Annotated[str | None, optional_text_field("setup_script")] = None
    """A session: a bash script run in the work dir when it opens, before the agent acts."""
    image: Annotated[str | None, name_field("image", optional=True)] = None
    """A session or function task: the container image its sandboxes run on (a reference the
    image store resolves to an unpacked root file system), in place of the host's system
    folders, with the same policy and limits (``deepgym.sandbox.image_root``). A session's
    root is writable in a layer of its own, and its final verifier runs on the image too; a
    function task's answer gets the image read-only and runs on the ``strict`` backend only.
    None: the host's programs."""
    user: Literal["agent", "root"] = "agent"
    """A session on an ``image``: who the agent, its setup and its final verifier run as.
    ``"agent"`` (the default) is uid 65534; ``"root"`` is uid 0 of the sandbox's own user
    namespace, for tasks written for a container's root (``/root``, ``/app`` owned by root):
    the same host uid as ``"agent"`` and no capabilities, inside the namespace or out of it
    (``deepgym.sandbox.policy``), so it is a number, never a privilege."""
    stages: tuple[Stage, ...] = ()
    """A session in stages (Harbor's multi-step tasks): each stage's instruction is given in
    turn, and when the agent is done with it the final verifier judges that stage (its name in
    ``DEEPGYM_STAGE``) as a gate: a stage without a verdict ends the episode without one, a
    score under its ``min_reward`` ends it early. The episode's score follows
    ``stage_reward``. Empty: one stage, ``task``."""
    stage_reward: Literal["mean", "final"] = "mean"
    """How a staged session's stages make its score: the mean of the stages run (Harbor's
    ``multi_step_reward_strategy = "mean"``), or the last one's (``"final"``)."""
    verifier_image: Annotated[str | None, name_field("verifier_image", optional=True)] = None
    """A session on an ``image``: another image its final verifier runs on (a task that asks
    for a verifier environment of its own); None: the session's ``image``."""
    runtime: RuntimeName = "stdlib"
    """What a Python answer's process runs in: ``"stdlib"`` (the default), the judge's
    interpreter with its standard library only; or ``"scientific"``, the same interpreter with
    numpy, pandas, scipy, scikit-learn and sympy (``deepgym.runtimes``: built once, at its first
    use or by ``deepgym runtime build scientific``, and mounted read-only in the answer's
    sandbox). The verifier's process never has them. Python answers of function, script and
    patch tasks on the host's system only (an image brings its own packages)."""
    tests_path: Path | None = None
    """A session: the hidden tests, handed to the final verifier only (never to the agent)."""
    step_verifier_code: Annotated[str | None, optional_text_field("step_verifier_code")] = None
    """A session: an optional per-step verifier, ``verify_step(work, tests)``, run after each
    action over a snapshot of the work dir (a shaping reward; never the episode's verdict)."""
    seed: Annotated[int | None, int_field("seed", -(2**63), 2**63 - 1, optional=True)] = None
    """The random seed a built-in's ``generate.py`` makes its ``test_cases.json`` from (the
    same seed, the same cases); deepgym itself does not read it."""
    description: Annotated[str, text_field("description")] = ""
    source_dir: Path | None = None

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """Name, kind and the task's first 40 characters: an ``Environment`` prints in a line
        (``model_dump`` keeps every field)."""
        task = one_line(self.task)
        yield "name", self.name
        yield "kind", self.kind
        if task:
            yield "task", clip(task, 40)

    def catalog_entry(self) -> dict[str, Any]:
        """Name, kind, difficulty, tags and description: one environment as ``deepgym list
        --json`` and ``GET /v1/environments`` list it."""
        return {
            "name": self.name,
            "kind": self.kind,
            "difficulty": self.difficulty,
            "tags": list(self.tags),
            "description": self.description,
        }

    @field_validator("tags")
    @classmethod
    def _tags_are_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(name_str(t, f"tags[{i}]") for i, t in enumerate(v))

    @field_validator("test_cases", mode="before")
    @classmethod
    def _cases_are_bounded(cls, v: Any) -> Any:
        if isinstance(v, list):
            if len(v) > MAX_CASES:
                raise ValueError(f"test_cases: {len(v)} cases, the limit is {MAX_CASES}")
            depth_at_most(v, "test_cases")
        return v

    @field_validator("test_cases")
    @classmethod
    def _cases_are_objects(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if v is None:
            return v
        for i, case in enumerate(v):
            if not isinstance(case, dict):
                raise ValueError(f"test_cases[{i}] must be an object, got {type(case).__name__}")
            if "args" in case and not isinstance(case["args"], list):
                raise ValueError(f"test_cases[{i}].args must be a list")
            if "kwargs" in case and not isinstance(case["kwargs"], dict):
                raise ValueError(f"test_cases[{i}].kwargs must be an object")
        return v

    @model_validator(mode="after")
    def _has_a_verifier(self) -> Environment:
        if self.verifier_code is not None and self.verifier_path is not None:
            raise ValueError("give verifier_code or verifier_path, not both")
        has_custom = self.verifier_code is not None or self.verifier_path is not None
        script_only = {
            "checker_path": self.checker_path is not None,
            "case_limit": self.case_limit is not None,
            "stop_on_failure": self.stop_on_failure,
            "keep_output": self.keep_output,
        }
        for field_name, given in script_only.items():
            if given and self.kind != "script":
                raise ValueError(f"{field_name} applies to kind 'script' only, not {self.kind!r}")
        if self.answer_format == "multipl_e" and (self.harness is None or not self.task):
            raise ValueError("answer_format 'multipl_e' needs the prompt (task) and a harness")
        if self.harness is not None:
            if self.language == "python":
                raise ValueError("harness is for a compiled language (a Python answer is called)")
            if self.harness.count(HARNESS_MARKER) != 1:
                raise ValueError(f"harness must hold the line {HARNESS_MARKER!r} exactly once")
        if self.language != "python" and self.kind != "script":
            raise ValueError(
                f"language {self.language!r} needs kind 'script' (a program on stdin and "
                f"stdout), not {self.kind!r}"
            )
        if self.runtime != "stdlib":
            clashes = {
                f"language {self.language!r}": self.language != "python",
                "kind 'session'": self.kind == "session",
                f"image {self.image!r}": self.image is not None,
            }
            for what, given in clashes.items():
                if given:
                    raise ValueError(
                        f"runtime {self.runtime!r} applies to Python answers of function, "
                        f"script and patch tasks on the host's system, not to {what}"
                    )
        if self.image is not None and self.kind not in ("session", "function"):
            raise ValueError(
                f"image applies to kinds 'session' and 'function' only, not {self.kind!r}"
            )
        if self.user != "agent" and (self.kind != "session" or self.image is None):
            raise ValueError("user 'root' applies to a session on an image only")
        if self.stages and self.kind != "session":
            raise ValueError("stages apply to kind 'session' only")
        if len({st.name for st in self.stages}) != len(self.stages):
            raise ValueError("stages must have different names")
        if self.verifier_image is not None and (self.kind != "session" or self.image is None):
            raise ValueError("verifier_image applies to a session on an image only")
        if self.kind == "session":
            if not has_custom or self.test_cases is not None:
                raise ValueError(
                    "a session environment needs a final verifier (verifier_code or "
                    "verifier_path, defining verify(work, tests)) and no test_cases"
                )
            return self
        if self.kind == "patch":
            if self.repo_path is None:
                raise ValueError("a patch environment needs repo_path")
            if self.test_cases is None and not has_custom:
                raise ValueError("a patch environment needs test_cases or a verifier")
            if not has_custom:
                for i, case in enumerate(self.test_cases or []):
                    call = case.get("call")
                    if not isinstance(call, str) or not all(call.partition(":")[::2]):
                        raise ValueError(
                            f"test_cases[{i}].call must name 'package.module:function'"
                        )
                    if "expected" not in case:
                        raise ValueError(f"test_cases[{i}] has no 'expected'")
            return self
        if self.test_cases is None and not has_custom:
            raise ValueError("an environment needs test_cases, verifier_code or verifier_path")
        if self.kind == "function" and not has_custom:
            if not self.entry_point:
                raise ValueError("declarative test_cases need an entry_point")
            for i, case in enumerate(self.test_cases or []):
                if "expected" not in case:
                    raise ValueError(f"test_cases[{i}] has no 'expected'")
        if self.kind == "script":
            for i, case in enumerate(self.test_cases or []):
                _args_fit(case.get("args", []), i)
        if self.compare == "exit" and self.kind != "script":
            raise ValueError(f"compare 'exit' applies to kind 'script' only, not {self.kind!r}")
        if self.kind == "script" and not has_custom and not self._output_free():
            for i, case in enumerate(self.test_cases or []):
                if "expected_stdout" not in case:
                    raise ValueError(f"test_cases[{i}] has no 'expected_stdout'")
                _fits_the_output_limit(case["expected_stdout"], i)
        return self

    def _output_free(self) -> bool:
        """Whether no case's output is compared: ``compare: "exit"`` (a case passes by its
        program's exit 0), or a test-runner mode (each test its runner reports is a case)."""
        return self.compare == "exit" or self.language in TEST_RUNNERS


def _args_fit(args: list[Any], i: int) -> None:
    """A script case's arguments travel to its program in one control message: ones too long
    for it could never start the program (no verdict, run after run), so they are refused."""
    size = len(json.dumps([str(a) for a in args]))
    if size > MAX_CASE_ARGS_BYTES:
        raise ValueError(
            f"test_cases[{i}].args are {size} bytes as JSON, over the {MAX_CASE_ARGS_BYTES} a "
            "script case's arguments may take (deepgym.judge.codes.MAX_CASE_ARGS_BYTES): give "
            "long data on stdin"
        )


def _fits_the_output_limit(expected: Any, i: int) -> None:
    """A script case whose expected output is over every task's output limit could never pass:
    refused before anything runs, naming the limit."""
    if not isinstance(expected, str) or len(expected) * 4 <= MAX_OUTPUT_BYTES:
        return  # (at most 4 bytes a character: no need to encode a short one)
    size = len(expected.encode("utf-8", "surrogatepass"))
    if size > MAX_OUTPUT_BYTES:
        raise ValueError(
            f"test_cases[{i}].expected_stdout is {size} bytes, over the {MAX_OUTPUT_BYTES} bytes "
            "a program may print (deepgym.judge.codes.MAX_OUTPUT_BYTES): no answer could pass it"
        )


class CaseOutput(BaseModel):
    """What a script task's program did on one test case, where the environment keeps it
    (``keep_output``): its output, how it ended, and how long it took."""

    model_config = ConfigDict(extra="forbid")

    stdout: str = ""
    """Its stdout, up to the environment's ``kept_output_kb`` (1 MiB by default): past that, its
    start, a line naming how many bytes were left out, and its end."""
    stderr: str = ""
    """Its stderr (a traceback included), kept as ``stdout`` is."""
    exit_code: int | None = None
    """Its exit code; None when a signal ended it, or it was killed at its time limit."""
    signal: int | None = None
    """The signal that ended it (9, SIGKILL, at the time limit or a memory limit)."""
    time_ms: float = 0.0
    """Wall time from its start to its end."""
    timed_out: bool = False
    """It ran past ``case_timeout`` and was killed."""
    files: dict[str, str] = Field(default_factory=dict)
    """The files read back from its work dir once it ended (name: base64), where the run asked
    for them (a SandboxFusion request's ``fetch_files``); one that was not there is not here."""
    files_left_out: list[str] = Field(default_factory=list)
    """The files asked for that were there but not read back: past the run's room for them
    (``deepgym.judge.files.FETCH_MAX_BYTES``)."""


class CaseResult(BaseModel):
    """One test's outcome inside a run."""

    model_config = ConfigDict(extra="forbid")

    name: str
    passed: bool
    score: float | None = None
    message: str = ""
    output: CaseOutput | None = None
    """A script task with ``keep_output``: what its program printed and how it ended."""


class Evidence(BaseModel):
    """What the sandbox saw: the facts that decide blame for a failure."""

    model_config = ConfigDict(extra="forbid")

    limit_fired: str | None = None
    """``wall_time``, ``case_time``, ``cpu_time``, ``memory``, ``processes``, ``file_size``,
    ``output_size`` or None."""
    limit_mechanism: dict[str, str] = Field(default_factory=dict)
    """Which mechanism enforced each limit (``rlimit``, ``cgroup-v1``, ``cgroup-v2``, ``tmpfs``)."""
    solution_cpu_ms: float | None = None
    peak_memory_mb: float | None = None
    in_play_ms: float | None = None
    """Milliseconds from the verifier's start to the instant the answer came into play."""
    in_play_by: str | None = None
    """``solution_started`` or ``solution_file_opened`` (a function task), ``work_dir_read`` or
    ``process_started`` (a session's verifier), ``compiler_started`` (a run that ended in its
    compile phase, once the compiler had started on the answer's source)."""
    signal: int | None = None
    compile_ms: float | None = None
    """A compiled language: the compile phase's wall time (0.0 when the program came from the
    compile cache); None for Python."""


class ServiceTime(BaseModel):
    """Where a run's wall time went, in milliseconds.

    deepgym's one definition of a run's service time is ``run_ms``: the run itself, without the
    time it waited for a sandbox (``queue_ms``), which depends on what else the host was running.
    ``total_ms`` is the wall time including that wait.
    """

    model_config = ConfigDict(extra="forbid")

    queue_ms: float = 0.0
    """Waiting for a sandbox (a free pool worker, or a slot under the service's cap)."""
    start_ms: float = 0.0
    verifier_ms: float = 0.0
    solution_ms: float = 0.0
    total_ms: float = 0.0
    """Everything, the wait for a sandbox included."""

    @property
    def run_ms(self) -> float:
        """The service time: the run itself (start, verifier, solution), without the wait for a
        sandbox. What ``deepgym price``, the run store and the console report."""
        return max(self.total_ms - self.queue_ms, 0.0)


class ExecResult(BaseModel):
    """What one command of an agent session did: its output (each stream capped, its byte count
    kept), exit code, whether its time ran out (its process group was killed), and how long it
    took. The same object on the wire (``POST /v1/sessions/{id}/exec``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    truncated: bool
    duration_s: float
    stdout_bytes: int
    stderr_bytes: int


class RunResult(BaseModel):
    """The outcome of one answer: a verdict (a score the policy earned) or no verdict."""

    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0.0, le=1.0)
    passed: bool
    has_verdict: bool = True
    error_type: str | None = None
    error: str = ""
    """The cause, in a line, for a failed or unjudged run."""
    exit_code: int | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    cases: list[CaseResult] = Field(default_factory=list)
    stdout: str = ""
    """What the answer's process printed: a function task's serving process, or a script's
    program (the first that failed its case, else the last), kept as the environment's
    ``kept_output_kb`` says (1 MiB by default)."""
    stderr: str = ""
    """Its stderr, kept alike: a traceback the answer did not catch is in it."""
    execution_time_ms: float = 0.0
    isolation: str = ""
    env_name: str | None = None
    time_limit_s: float | None = None
    attempts: int = 1
    evidence: Evidence = Field(default_factory=Evidence)
    service: ServiceTime = Field(default_factory=ServiceTime)
    sandbox_id: str | None = None
    """The session's sandbox, for an agent episode's result."""

    @field_validator("error_type")
    @classmethod
    def _closed_error_type(cls, v: str | None) -> str | None:
        if v is not None and v not in ALL_ERROR_TYPES:
            raise ValueError(f"error_type {v!r} is not one of {sorted(ALL_ERROR_TYPES)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> RunResult:
        if self.has_verdict and not has_verdict(self.error_type):
            raise ValueError(f"a run with error_type {self.error_type!r} has no verdict")
        if not self.has_verdict and self.passed:
            raise ValueError("a run without a verdict cannot pass")
        return self

    @classmethod
    def no_verdict(cls, error_type: str, error: str, **fields: Any) -> RunResult:
        """A result without a verdict (score 0, not passed)."""
        return cls(
            score=0.0, passed=False, has_verdict=False, error_type=error_type, error=error, **fields
        )

    def per_test_rewards(self) -> dict[str, float]:
        """``{'test_0': 1.0, ..., 'overall': score}``: one entry per test case."""
        out = {c.name: (c.score if c.score is not None else float(c.passed)) for c in self.cases}
        out["overall"] = self.score
        return out


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[idx])


class Totals(BaseModel):
    """Headline (conservative) and judged-only totals over a list of results."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    avg_score: float = 0.0
    pass_rate: float = 0.0
    no_verdict_count: int = 0
    judged_count: int = 0
    judged_pass_rate: float = 0.0
    judged_mean_score: float = 0.0

    @classmethod
    def of(cls, results: Sequence[RunResult]) -> Totals:
        """The totals of ``results``."""
        return cls.from_rows([(r.has_verdict, r.passed, r.score) for r in results])

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[bool, bool, float]]) -> Totals:
        """The totals of ``(has_verdict, passed, score)`` rows (a run store need not load whole
        results): a run without a verdict counts as a failed 0 in the headline numbers."""
        n = len(rows)
        judged = [(bool(p), float(s)) for v, p, s in rows if v]
        passed = sum(1 for p, _ in judged if p)
        score_sum = sum(s for _, s in judged)
        return cls(
            total=n,
            passed=passed,
            failed=n - passed,
            avg_score=score_sum / n if n else 0.0,
            pass_rate=passed / n if n else 0.0,
            no_verdict_count=n - len(judged),
            judged_count=len(judged),
            judged_pass_rate=passed / len(judged) if judged else 0.0,
            judged_mean_score=score_sum / len(judged) if judged else 0.0,
        )

    def summary_line(self) -> str:
        """``Pass Rate: 63.00% (judged 70.00%, 10.00% no verdict)``."""
        nv = self.no_verdict_count / self.total if self.total else 0.0
        return (
            f"Pass Rate: {self.pass_rate:.2%} (judged {self.judged_pass_rate:.2%}, "
            f"{nv:.2%} no verdict)"
        )


class _Aggregate(Totals):
    """A list of results with its ``Totals`` (computed from the results, never given)."""

    model_config = ConfigDict(extra="forbid")

    results: list[RunResult]
    execution_time_ms: float = 0.0

    @model_validator(mode="after")
    def _totals(self) -> _Aggregate:
        t = Totals.of(self.results)
        for name in Totals.model_fields:
            object.__setattr__(self, name, getattr(t, name))
        return self

    @property
    def totals(self) -> Totals:
        """The totals alone (without the results)."""
        return Totals.model_validate({k: getattr(self, k) for k in Totals.model_fields})

    def service_time_quantiles(self) -> dict[str, float]:
        """p50, p90, p99, max and mean of the runs' service time (``ServiceTime.run_ms``: no
        wait for a sandbox), in ms."""
        xs = sorted(r.service.run_ms for r in self.results)
        return {
            "p50": _quantile(xs, 0.5),
            "p90": _quantile(xs, 0.9),
            "p99": _quantile(xs, 0.99),
            "max": xs[-1] if xs else 0.0,
            "mean": statistics.fmean(xs) if xs else 0.0,
        }

    @property
    def timeout_rate(self) -> float:
        """Share of runs that ended on a time limit (either side of the verdict line)."""
        n = len(self.results)
        hits = sum(1 for r in self.results if r.error_type in ("timeout", "solution_timeout"))
        return hits / n if n else 0.0


class BatchResult(_Aggregate):
    """The results of ``run_batch``, in the order of the answers, with totals."""


class EvalResult(_Aggregate):
    """The results of ``eval``, in suite order; ``env_names`` names each result's environment."""

    env_names: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _names_match(self) -> EvalResult:
        if len(self.env_names) != len(self.results):
            raise ValueError("env_names must name every result")
        return self
