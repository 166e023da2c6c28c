"""Compile an answer in a compiled language once, in a sandbox, and keep the program.

The first phase of a run in C, C++, Java, JavaScript, Rust or Go: before the verifier starts,
the answer's source is built in a ``solution`` sandbox of its own (the answer's policy, uid and
cgroups; ``judge.build``), with the environment's ``compile_timeout``. The program it leaves is
what each test case then runs (``solution_host``'s ``exec`` mode).

Blame follows the contract (``deepgym.verdict.compile_outcome``). The compiler starting on the
answer's source is the instant the answer comes into play (``judge.build`` says how the host
knows it, from what the compiler cannot forge), so:

- before it (the build's sandbox or set-up failed, bwrap's errors, ``SETUP_FAILED``), ours: a run
  without a verdict (``sandbox_error``);
- after it, whatever stops the compile is the answer's judged 0: a refusal, an internal
  compiler error, a signal of the compiler's own, a memory, process or file-size limit
  (``compile_error``, the cause and the compiler's diagnostics as the message), or its time
  (``solution_timeout``);
- except where the host explains it: a compiler ended by a stop signal (SIGKILL, ...) that no
  limit of the build's sent, or one the host held back (``blame.STARVED``: no verdict,
  ``timeout``); or where the toolchain does: the language's known-good program
  (``Language.probe``) fails to build at that moment too (``_probe``: ours).

The compile's time limit, ``compile_timeout``, is judged on the compiler's CPU time with a
wall-clock backstop (``judge.blame.cpu_time_check``): the host waits on the build's exit, and
each time a wait ends it reads the build's process tree from ``/proc`` and applies the rule. A
compiler that is stopped (``T``) counts as held back, like a runnable one: no source makes a
compiler stop itself, so only the host or an operator can have.

``ProgramCache`` keys each build by (language, toolchain fingerprint, compiler command line,
source hash): the answers of a GRPO group that are the same source, and every retry, compile
once (concurrent asks for one key and the same limits wait for one build). Programs live in the
backend's workspace, at most ``MAX_ENTRIES`` and ``MAX_BYTES``, least recently used out first.
A compile that was the answer's fault is remembered too (the same source fails the same way),
for asks under the same limits or tighter ones; a failure of ours, a starved compile or a
broken toolchain never is.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from deepgym import languages
from deepgym.completions import multipl_e_code
from deepgym.judge import blame
from deepgym.judge.build import BUILT, COMPILING, CRASHED, REJECTED, STOPPED
from deepgym.models import HARNESS_MARKER, Environment
from deepgym.sandbox import cgroups
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.evidence import take_evidence
from deepgym.sandbox.headers import IN_SANDBOX, Headers
from deepgym.sandbox.policy import IN_JUDGE
from deepgym.sandbox.spawn import end_process, exit_signal, kill_tree, start_process
from deepgym.sandbox.workspace import Workspace
from deepgym.verdict import COMPILER_STARTED, compile_outcome

__all__ = ["MAX_BYTES", "MAX_ENTRIES", "PROGRAMS", "Program", "ProgramCache", "compile_failure"]

PROGRAMS = "_programs"
"""The cache's folder in a backend's workspace, beside the staged environments: a pool worker
mounts that folder whole (``/judge/envs``), read-only."""
MAX_ENTRIES = 256
MAX_BYTES = 2**30
MAX_PROGRAM_BYTES = 256 * 2**20
"""The largest program a build may leave (its stdout); past it, the build is the answer's
fault (a source that makes a huge program)."""
MAX_DIAGNOSTICS = 16 * 1024
"""How much of the compiler's diagnostics a ``compile_error`` keeps."""
BUILD_PROCESSES = 256
BUILD_FILE_MB = 256
KILL_WAIT_S = 5.0
"""How long a build the host ended may take to close its pipes."""
HEADER_TIMEOUT_S = 300.0
"""The compiler's CPU time a precompiled header's build may take (a few seconds, measured)."""
PROBE_TIMEOUT_S = 30.0
"""The least ``compile_timeout`` a known-good program is built under: the probe asks whether
the toolchain works, not whether it is fast (an environment's limit may be tight)."""


class SolutionArgv(Protocol):
    """A backend's way to start a ``solution`` process (``fresh.Launch.solution_argv``)."""

    def __call__(
        self,
        job: Job,
        run_dir: Path,
        group: cgroups.RunCgroup,
        mode: str,
        args: list[str],
        headers: Path | None = None,
    ) -> tuple[list[str], dict[str, str]]: ...


@dataclasses.dataclass(frozen=True)
class Program:
    """A built program: where it is on the host, and what building it took."""

    key: str
    path: Path
    compile_ms: float
    cached: bool


Limits = tuple[float, int, int, int]
"""A build's limits: ``compile_timeout``, memory (MiB), processes, file size (MiB)."""


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A build that gave no program, with the facts ``verdict.compile_outcome`` judges."""

    message: str
    compile_ms: float
    started: bool
    """The compiler had started on the answer's source."""
    limits: Limits
    """The limits the build ran under (a failure stands for the same or tighter ones)."""
    timed_out: bool = False
    """The compile's time limit was the answer's (``blame.OVER`` or ``blame.WAITING``)."""
    starved: bool = False
    """The host held a compiler that could run back past the backstop (``blame.STARVED``)."""
    outside: bool = False
    """A stop signal that no limit of the build's sent ended the compiler (the host's)."""
    toolchain_ok: bool = True
    """False: the language's known-good program failed to build at that moment too."""
    refused: bool = False
    """A plain refusal (the compiler exited non-zero, no limit fired): an earlier build here
    stands for the toolchain (``ProgramCache._probe``)."""
    limit: str | None = None
    cpu_ms: float | None = None

    @property
    def answers(self) -> bool:
        """Whether the failure is the answer's (a judged 0, remembered for its source)."""
        return self.started and self.toolchain_ok and not (self.starved or self.outside)


def compile_failure(failed: _Failed, isolation: str) -> RawRun:
    """The run of an answer whose build gave no program (``verdict.compile_outcome``)."""
    outcome = compile_outcome(
        failed.message,
        started=failed.started,
        toolchain_ok=failed.toolchain_ok,
        timed_out=failed.timed_out,
        starved=failed.starved,
        outside=failed.outside,
    )
    return RawRun(
        outcome=outcome,
        report=outcome.report,
        isolation=isolation,
        in_play_by=COMPILER_STARTED if failed.started else None,
        limit_fired=failed.limit,
        solution_cpu_ms=failed.cpu_ms,
        compile_ms=failed.compile_ms,
        in_compile=True,
    )


def source(job: Job) -> str:
    """What the compiler builds: the answer, or, for a function task, the environment's
    ``harness`` with the answer (a MultiPL-E completion made code first: ``answer_format``) in
    place of its ``HARNESS_MARKER`` line."""
    env = job.env
    if env.harness is None:
        return job.answer
    answer = job.answer
    if env.answer_format == "multipl_e":  # a completion: the code before the tests
        stops = (env.test_cases or [{}])[0].get("stop_tokens") or []
        answer = multipl_e_code(answer, env.task, [str(t) for t in stops], env.language)
    before, _, after = env.harness.partition(HARNESS_MARKER)
    return before + answer.rstrip("\n") + "\n" + after


def _limits(job: Job, lang: languages.Language) -> Limits:
    """The limits ``job``'s build runs under: the environment's, raised to a compiler's."""
    env = job.env
    return (
        env.compile_timeout,
        max(env.memory_mb, lang.compile_memory_mb),
        max(env.max_processes, BUILD_PROCESSES),
        max(env.max_file_mb, BUILD_FILE_MB),
    )


def _build_env(job: Job, lang: languages.Language) -> Job:
    """The job the compiler runs as: the answer's sandbox, with a compiler's limits. Its CPU
    rlimit (per process) follows the clock's backstop, ``blame.BACKSTOP`` times
    ``compile_timeout``: a last resort behind the host's CPU-time rule, which ends a build
    whose tree used ``compile_timeout`` (an rlimit's SIGKILL would read as one from outside)."""
    _, memory_mb, processes, file_mb = _limits(job, lang)
    update = {"memory_mb": memory_mb, "max_processes": processes, "max_file_mb": file_mb}
    backstop = blame.BACKSTOP * job.env.compile_timeout
    env = job.env.model_copy(update=update)
    return Job(env=env, answer=job.answer, timeout=backstop, case_timeout=backstop)


_PUBLIC_CLASS = re.compile(r"^\s*public\s+(?:(?:final|abstract)\s+)*class\s+(\w+)", re.M)


def source_name(lang: languages.Language, text: str) -> str:
    """The file ``text`` is built from: the language's, or, where that is ``{class}.java``,
    named after the source's public class (as javac wants it; ``Main`` where it has none)."""
    if "{class}" not in lang.source:
        return lang.source
    found = _PUBLIC_CLASS.search(text)
    return lang.source.replace("{class}", found[1] if found else "Main")


def _spec(
    lang: languages.Language, tc: languages.Toolchain, text: str, dialect: str
) -> dict[str, object]:
    """What ``judge.build`` builds the source ``text`` in ``lang`` with: the compiler's command
    line in ``dialect`` (``Environment.dialect``), its program found on the host."""
    name = source_name(lang, text)
    words = [
        name if w == "{source}" else w.replace("{judge}", IN_JUDGE)
        for w in lang.compile_argv_for(dialect)
    ]
    argv = [tc.tools.get(words[0], words[0]), *words[1:]]
    return {
        "source": name,
        "argv": argv,
        "artifact": lang.artifact,
        "pack": lang.pack,
        "class_path": [*lang.files, *lang.class_path],
        "env": dict(lang.build_env),
        "crash_codes": list(lang.crash_exit_codes),
    }


class ProgramCache:
    """Builds answers' programs in a backend's sandbox and keeps them (see the module)."""

    def __init__(
        self,
        workspace: Workspace,
        solution_argv: SolutionArgv,
        *,
        isolation: str,
        through_bwrap: bool,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.workspace = workspace
        self.root = workspace.envs / PROGRAMS
        """Inside the folder a pool worker mounts (``/judge/envs/_programs``)."""
        self.solution_argv = solution_argv
        self.isolation = isolation
        self.through_bwrap = through_bwrap
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._programs: OrderedDict[str, int] = OrderedDict()
        self._rejected: OrderedDict[str, _Failed] = OrderedDict()
        self._building: dict[str, asyncio.Future[Program | _Failed]] = {}
        self._pins: Counter[str] = Counter()
        self._probes: dict[str, asyncio.Future[tuple[bytes, float] | _Failed]] = {}
        self._working: set[str] = set()
        """The languages whose toolchain built a program here (``_probe``)."""
        self.headers = Headers() if through_bwrap else None
        """The precompiled headers builds use (``sandbox.headers``); None: none (a build
        outside bwrap, ``unsafe``, sees no ``/pch``)."""
        self.hits = 0
        self.misses = 0

    def stats(self) -> dict[str, int]:
        """Hits, misses (builds), programs kept and their bytes."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "programs": len(self._programs),
            "bytes": sum(self._programs.values()),
        }

    @staticmethod
    def key(job: Job) -> str:
        """The cache key of ``job``'s build: language, toolchain, command line, source."""
        lang = languages.language(job.env.language)
        tc = languages.require(lang.name)
        h = hashlib.sha256()
        text = source(job)
        spec = json.dumps(_spec(lang, tc, text, job.env.dialect)) if lang.compile_argv else "{}"
        for part in (lang.name, tc.fingerprint, spec, text):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return f"{lang.name}-{h.hexdigest()[:40]}"

    async def run(self, job: Job, run: Callable[[Program | None], Awaitable[RawRun]]) -> RawRun:
        """``run(None)`` for a Python answer; for a compiled one, ``run(program)`` with its
        program built or from the cache (kept until the run ends), or, where the build gave
        none, the run to report (``compile_failure``). The result carries ``compile_ms``."""
        if job.env.language == "python":
            return await run(None)
        t0 = time.monotonic()
        async with self.program(job) as built:
            if isinstance(built, RawRun):  # no program: a failed compile, the answer's or ours
                built.total_ms = (time.monotonic() - t0) * 1000.0
                return built
            raw = await run(built)
        raw.compile_ms = built.compile_ms
        return raw

    @contextlib.asynccontextmanager
    async def program(self, job: Job) -> AsyncIterator[Program | RawRun]:
        """``job``'s program, built or from the cache, kept on disk until the block ends; or,
        where the build gave none, the run to report (``compile_failure``). ``ConfigError``
        where this host lacks the language's toolchain."""
        while True:
            got = await self._prepare(job)
            if isinstance(got, RawRun):
                yield got
                return
            if got.key in self._programs:  # still kept (other builds may have evicted it
                break  # while this one waited): pinned below, with no await in between
        self._pins[got.key] += 1
        try:
            yield got
        finally:
            self._pins[got.key] -= 1
            if not self._pins[got.key]:
                del self._pins[got.key]
            self._evict()

    async def _prepare(self, job: Job) -> Program | RawRun:
        key = self.key(job)
        if key in self._programs:
            self._programs.move_to_end(key)
            self.hits += 1
            return Program(key, self.root / key, 0.0, cached=True)
        limits = _limits(job, languages.language(job.env.language))
        failed = self._rejected.get(key)
        if failed is not None and all(a <= b for a, b in zip(limits, failed.limits, strict=True)):
            self.hits += 1  # the same source, under the same limits or tighter: the same end
            return compile_failure(replace(failed, compile_ms=0.0, cpu_ms=None), self.isolation)
        ask = f"{key}/{limits}"
        building = self._building.get(ask)
        if building is None:
            self.misses += 1
            building = asyncio.ensure_future(self._build(job, key))
            self._building[ask] = building
            building.add_done_callback(lambda _: self._building.pop(ask, None))
        else:
            self.hits += 1
        got = await asyncio.shield(building)
        if isinstance(got, Program):
            return got
        return compile_failure(got, self.isolation)

    async def _build(self, job: Job, key: str) -> Program | _Failed:
        lang = languages.language(job.env.language)
        got = await self._compile(job, lang)
        if isinstance(got, _Failed):
            if got.answers:
                broken = await self._probe(job, lang, fresh=not got.refused)
                if broken is not None:  # the toolchain, not the source: ours
                    return replace(got, toolchain_ok=False, message=broken)
                self._keep_rejected(key, got)
            return got
        self._working.add(lang.name)
        program, ms = got
        return self._keep(key, program, ms)

    async def _probe(self, job: Job, lang: languages.Language, *, fresh: bool) -> str | None:
        """None where the language's toolchain builds its known-good ``probe`` here; else why
        no answer in that language can be judged now. A compiler that fails for a reason of
        its own (a library or a configuration file missing in the sandbox, a crash, a hang)
        fails every answer, and each failure would read as the answer's. After a plain
        refusal (not ``fresh``), a build that succeeded here before stands for the toolchain;
        any other failure (a crash, a signal, a limit, the time) is checked against a probe
        built at that moment (concurrent failures share one). A failed probe is never kept."""
        if not fresh and lang.name in self._working:
            return None
        probing = self._probes.get(lang.name)
        if probing is None:
            env = job.env.model_copy(
                update={
                    "harness": None,
                    "compile_timeout": max(job.env.compile_timeout, PROBE_TIMEOUT_S),
                }
            )
            probing = asyncio.ensure_future(
                self._compile(replace(job, env=env, answer=lang.probe), lang)
            )
            self._probes[lang.name] = probing
            probing.add_done_callback(lambda done: self._probe_done(lang.name, done))
        got = await asyncio.shield(probing)
        if not isinstance(got, _Failed):
            self._working.add(lang.name)
            return None
        return (
            f"the {lang.title} toolchain did not build a known-good program in the sandbox, "
            f"so no answer in {lang.name} is judged here: {got.message[-600:]}"
        )

    def _probe_done(self, name: str, done: asyncio.Future[tuple[bytes, float] | _Failed]) -> None:
        """A finished probe is shared no longer: the next failure that asks builds a new one."""
        if self._probes.get(name) is done:
            del self._probes[name]

    async def _compile(
        self, job: Job, lang: languages.Language, header: dict[str, object] | None = None
    ) -> tuple[bytes, float] | _Failed:
        """Build ``job``'s source in a sandbox: the program and the time it took, or why not.
        ``header``: build that spec instead, a precompiled header's (``build_header``), with
        the lowest CPU priority. A language without a compile phase (``compile_argv`` empty):
        the source itself, at once (nothing runs, so nothing can fail)."""
        tc = languages.require(lang.name)
        if not lang.compile_argv:
            return source(job).encode("utf-8", "surrogatepass"), 0.0
        bjob = _build_env(job, lang)
        t0 = time.monotonic()
        build_dir = self.workspace.run_dir()
        group = cgroups.create(
            bjob.env.memory_mb, bjob.env.max_processes, owner=self.workspace.owner
        )
        try:
            (build_dir / "answer").mkdir()
            (build_dir / "answer" / "solution.py").write_text(source(job))
            spec = header or _spec(lang, tc, source(job), job.env.dialect)
            folder = None if header is not None else self._header(lang, tc, spec)
            if folder is not None:  # g++ finds it in /pch before the header itself
                line = list(spec["argv"])  # type: ignore[call-overload]
                spec = {**spec, "argv": [line[0], "-I", IN_SANDBOX, *line[1:]]}
            argv, env = self.solution_argv(
                bjob, build_dir, group, "build", [json.dumps(spec)], headers=folder
            )
            if header is not None and (nice := shutil.which("nice")):
                argv = [nice, "-n", "19", *argv]
            ran = await _run(argv, env, group.join_fds(), build_dir, job.env.compile_timeout)
        finally:
            limit, _, _ = take_evidence(group, "tmpfs")
            shutil.rmtree(build_dir, ignore_errors=True)
        ms = (time.monotonic() - t0) * 1000.0
        signal = exit_signal(ran.code, self.through_bwrap)
        if ran.code == BUILT and signal is None and len(ran.out) <= MAX_PROGRAM_BYTES:
            return ran.out, ms
        return _failure(ran, signal, limit, job, lang, ms)

    def _header(
        self, lang: languages.Language, tc: languages.Toolchain, spec: dict[str, object]
    ) -> Path | None:
        """The folder of the precompiled header a build of ``spec`` can use, if it is built
        (else its build is started in the background: ``sandbox.headers``)."""
        if self.headers is None or lang.precompiled is None:
            return None
        line = [str(w) for w in spec["argv"]]  # type: ignore[attr-defined]
        return self.headers.ready(lang, tc, line, self.build_header)

    async def build_header(
        self, lang: languages.Language, spec: dict[str, object], header_source: str
    ) -> bytes | None:
        """Build a precompiled header (``Headers.spec``) in a build sandbox, as an answer is
        built (never from an answer's source): its bytes, or None where the build failed."""
        env = Environment(
            name=f"{lang.name}-header",
            kind="script",
            language=lang.name,
            test_cases=[{"stdin": "", "expected_stdout": ""}],
            compile_timeout=HEADER_TIMEOUT_S,
        )
        job = Job(env=env, answer=header_source, timeout=1.0, case_timeout=1.0)
        got = await self._compile(job, lang, header=spec)
        return None if isinstance(got, _Failed) else got[0]

    async def close(self) -> None:
        """Cancel the header builds this cache started (their sandboxes end with them)."""
        if self.headers is not None:
            await self.headers.close()

    def _keep(self, key: str, program: bytes, ms: float) -> Program:
        self.root.mkdir(exist_ok=True)
        path = self.root / key
        tmp = path.with_suffix(".part")
        tmp.write_bytes(program)
        tmp.chmod(0o755)
        tmp.replace(path)
        self._programs[key] = len(program)
        self._evict(spare=key)
        return Program(key, path, ms, cached=False)

    def _evict(self, spare: str | None = None) -> None:
        """Remove the least recently used programs past the limits, but none in use and not
        ``spare`` (the one just built, which its runs have yet to pin)."""
        size = sum(self._programs.values())
        for key in list(self._programs):
            if len(self._programs) <= self.max_entries and size <= self.max_bytes:
                return
            if key in self._pins or key == spare:
                continue
            size -= self._programs.pop(key)
            with contextlib.suppress(OSError):
                (self.root / key).unlink()

    def _keep_rejected(self, key: str, failed: _Failed) -> None:
        self._rejected[key] = failed
        while len(self._rejected) > self.max_entries:
            self._rejected.popitem(last=False)


@dataclasses.dataclass(frozen=True)
class _Ran:
    """How a build's sandbox ended: by itself (``code``), or on the host's clock (``check``)."""

    code: int | None
    out: bytes
    err: bytes
    check: str | None = None
    """``blame.OVER``, ``blame.WAITING`` or ``blame.STARVED`` where the host ended the build."""
    cpu_ms: float | None = None
    """The build's CPU time when the host ended it."""
    started: bool = False
    """Whether the compiler had started when the host ended the build (``COMPILING``)."""


def _failure(
    ran: _Ran,
    signal: int | None,
    limit: str | None,
    job: Job,
    lang: languages.Language,
    ms: float,
) -> _Failed:
    """Why a build gave no program, and whose fault that is (see the module): ``signal`` is
    what ended the build's sandbox, ``limit`` what the build's cgroups saw fire."""
    limits = _limits(job, lang)
    said = _diagnostics(ran.err.decode("utf-8", "replace"))
    t = f"compile_timeout ({job.env.compile_timeout:g} s)"
    if ran.check is not None:  # the host ended it on its clock
        if not ran.started:
            why = f"the build had not started its compiler when the host ended it ({t} out)"
            return _Failed(_said(why, said), ms, False, limits, limit="wall_time")
        if ran.check == blame.STARVED:
            why = (
                f"the host held the compiler back: {ran.cpu_ms or 0.0:.0f} ms of CPU time of "
                f"its {t} in {ms / 1000.0:.1f} s"
            )
            return _Failed(
                why, ms, True, limits, starved=True, limit="wall_time", cpu_ms=ran.cpu_ms
            )
        over = ran.check == blame.OVER
        why = (
            f"the compiler used its {t} of CPU time"
            if over
            else f"the compiler waited, not running, past its {t}"
        )
        return _Failed(
            _said(why, said),
            ms,
            True,
            limits,
            timed_out=True,
            limit="cpu_time" if over else "wall_time",
            cpu_ms=ran.cpu_ms,
        )
    code = ran.code
    if signal is None and code == BUILT:  # a program past the cap (the toolchain works)
        big = f"the program is past {MAX_PROGRAM_BYTES >> 20} MiB"
        return _Failed(big, ms, True, limits, refused=True)
    cause = _LIMIT_CAUSE.get(limit or "", "").format(*limits)
    if signal is None and (code in (REJECTED, CRASHED) or (code == STOPPED and cause)):
        text = said or f"the {lang.title} compiler refused the source"
        refused = code == REJECTED and not cause
        return _Failed(_said(cause, text), ms, True, limits, refused=refused, limit=limit)
    if signal is None and code == STOPPED:  # a kill no limit of the build's sent: from outside
        outside = "the compiler was ended from outside"
        return _Failed(_said(outside, said), ms, True, limits, outside=True)
    if signal is not None and cause:  # the build's own process, killed by the limit its
        return _Failed(_said(cause, said), ms, True, limits, limit=limit)  # compiler reached
    why = f"the build failed before its compiler started (exit {code})"
    return _Failed(_said(why, said[-600:]), ms, False, limits, limit=limit)


_LIMIT_CAUSE = {
    "memory": "the compiler was stopped by its {1} MB memory limit",
    "processes": "the compiler reached its limit of {2} processes",
}
"""The cause of a build whose cgroups saw a limit fire (``limits``' fields by place). No
build's set-up comes near them (2 GiB, 256 processes at least): only a compiler can have."""


def _said(cause: str, diagnostics: str) -> str:
    """A failure's message: its cause, then the compiler's diagnostics (either may be "")."""
    return "\n".join(part for part in (cause, diagnostics) if part)


def _diagnostics(text: str) -> str:
    """The compiler's own words, cut to ``MAX_DIAGNOSTICS`` (its first errors matter most)."""
    text = text.strip()
    if len(text) > MAX_DIAGNOSTICS:
        text = text[:MAX_DIAGNOSTICS] + "\n..."
    return text


def _held(states: list[str]) -> bool:
    """Whether the host holds a build back: a process of it is runnable (``blame.runnable``)
    or stopped (``T``, ``t``), which no compiler does to itself."""
    return blame.runnable(states) or any(s in ("T", "t") for s in states)


def _compiling(pid: int) -> bool:
    """Whether the build under ``pid`` has started its compiler (``judge.build.COMPILING``)."""
    for p in blame.tree_pids(pid):
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == COMPILING:
                    return True
        except OSError:
            continue
    return False


async def _run(
    argv: list[str], env: dict[str, str], fds: tuple[int, ...], cwd: Path, limit_s: float
) -> _Ran:
    """Run a build's sandbox under the CPU-time rule of ``limit_s`` (see the module): wait on
    its exit, and each time a wait ends, read its process tree and apply the rule. Returns how
    it ended, its stdout (up to past ``MAX_PROGRAM_BYTES``) and the head of its stderr."""
    proc = await start_process(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=fds,
        start_new_session=True,
        cwd=str(cwd),
        env=env,
    )
    t0 = time.monotonic()

    async def read(stream: asyncio.StreamReader | None, cap: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while stream is not None and (chunk := await stream.read(1 << 20)):
            if size <= cap:
                parts.append(chunk)
            size += len(chunk)
        return b"".join(parts)

    work = asyncio.gather(
        read(proc.stdout, MAX_PROGRAM_BYTES), read(proc.stderr, MAX_DIAGNOSTICS * 2), proc.wait()
    )
    limit_ms = limit_s * 1000.0
    cpus = len(os.sched_getaffinity(0))
    check, wait_ms = blame.cpu_time_check(0.0, limit_ms, 0.0, True, cpus)
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                out, err, code = await asyncio.wait_for(asyncio.shield(work), wait_ms / 1000.0)
                return _Ran(code, out, err)
            cpu_ms, states = blame.read_tree(proc.pid)
            elapsed_ms = (time.monotonic() - t0) * 1000.0
            check, wait_ms = blame.cpu_time_check(cpu_ms, limit_ms, elapsed_ms, _held(states), cpus)
            if check != blame.WAIT:
                break
        started = _compiling(proc.pid)
        kill_tree(proc.pid)
        await end_process(proc)
    except BaseException:  # cancelled (a header's build, at its backend's close): end it all
        await end_process(proc)
        work.cancel()
        await asyncio.wait([work])  # its outcome is of no interest now: mark it seen
        if not work.cancelled():
            work.exception()
        raise
    err = b""
    with contextlib.suppress(Exception):  # what it said before the kill, if it comes in time
        err = (await asyncio.wait_for(work, KILL_WAIT_S))[1]
    return _Ran(None, b"", err, check, cpu_ms, started)
