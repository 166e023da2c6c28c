"""Compile an answer in a compiled language once, in a sandbox, and keep the program.

The first phase of a run in C, C++, Java, JavaScript, Rust or Go: before the verifier starts,
the answer's source is built in a ``solution`` sandbox of its own (the answer's policy, uid and
cgroups; ``judge.build``), with the environment's ``compile_timeout``. The program it leaves is
what each test case then runs (``solution_host``'s ``exec`` mode).

Blame follows the contract:

- the compiler refuses the source: the answer's fault, a judged 0 with ``compile_error`` (and
  the compiler's diagnostics as the message);
- the compiler is killed by our limits (time, memory, processes), dies by a signal, reports an
  internal error, or the sandbox fails to start: ours, a run without a verdict;
- the compiler refuses the source but also a known-good program (``Language.probe``, built at
  the first refusal until the language's toolchain has built something here): the toolchain is
  broken in the sandbox, ours, a run without a verdict.

``ProgramCache`` keys each build by (language, toolchain fingerprint, compiler command line,
source hash): the answers of a GRPO group that are the same source, and every retry, compile
once (concurrent asks for one key wait for one build). Programs live in the backend's workspace,
at most ``MAX_ENTRIES`` and ``MAX_BYTES``, least recently used out first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import shutil
import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from deepgym import languages
from deepgym.judge.build import BUILT, REJECTED
from deepgym.models import HARNESS_MARKER
from deepgym.sandbox import cgroups
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.evidence import take_evidence
from deepgym.sandbox.spawn import end_process, exit_signal, kill_tree, start_process
from deepgym.sandbox.spec import START_GRACE_S
from deepgym.sandbox.workspace import Workspace
from deepgym.verdict import Outcome

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

SolutionArgv = Callable[
    [Job, Path, cgroups.RunCgroup, str, list[str]], tuple[list[str], dict[str, str]]
]
"""A backend's way to start a ``solution`` process (``fresh.Launch.solution_argv``)."""


@dataclasses.dataclass(frozen=True)
class Program:
    """A built program: where it is on the host, and what building it took."""

    key: str
    path: Path
    compile_ms: float
    cached: bool


@dataclasses.dataclass(frozen=True)
class _Failed:
    """A build that gave no program: the answer's (``rejected``) or ours."""

    rejected: bool
    message: str
    compile_ms: float
    limit: str | None = None


def compile_failure(
    message: str, *, rejected: bool, isolation: str, limit: str | None, compile_ms: float
) -> RawRun:
    """The run of an answer whose build gave no program: ``compile_error`` (a judged 0) when
    the compiler refused the source, else a run without a verdict."""
    if rejected:
        report = {"status": "compile_error", "message": message, "cases": []}
        outcome = Outcome(report=report, in_play=True, verifier_exit_code=0)
    else:
        report = None
        outcome = Outcome(report=None, in_play=False, start_failed=True, detail=message)
    return RawRun(
        outcome=outcome,
        report=report,
        isolation=isolation,
        limit_fired=limit,
        compile_ms=compile_ms,
        in_compile=True,
    )


def source(job: Job) -> str:
    """What the compiler builds: the answer, or, for a function task, the environment's
    ``harness`` with the answer in place of its ``HARNESS_MARKER`` line."""
    harness = job.env.harness
    if harness is None:
        return job.answer
    before, _, after = harness.partition(HARNESS_MARKER)
    return before + job.answer.rstrip("\n") + "\n" + after


def _build_env(job: Job, lang: languages.Language) -> Job:
    """The job the compiler runs as: the answer's sandbox, with a compiler's limits."""
    env = job.env
    limits = {
        "memory_mb": max(env.memory_mb, lang.compile_memory_mb),
        "max_processes": max(env.max_processes, BUILD_PROCESSES),
        "max_file_mb": max(env.max_file_mb, BUILD_FILE_MB),
    }
    t = env.compile_timeout
    return Job(env=env.model_copy(update=limits), answer=job.answer, timeout=t, case_timeout=t)


def _spec(lang: languages.Language, tc: languages.Toolchain) -> dict[str, object]:
    argv = [tc.tools.get(lang.compile_argv[0], lang.compile_argv[0]), *lang.compile_argv[1:]]
    return {
        "source": lang.source,
        "argv": argv,
        "artifact": lang.artifact,
        "pack": lang.pack,
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
        for part in (lang.name, tc.fingerprint, json.dumps(_spec(lang, tc)), source(job)):
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
            if isinstance(built, RawRun):  # no program: a compile error, or ours
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
        if key in self._rejected:
            self.hits += 1
            failed = self._rejected[key]
            return compile_failure(
                failed.message, rejected=True, isolation=self.isolation, limit=None, compile_ms=0.0
            )
        building = self._building.get(key)
        if building is None:
            self.misses += 1
            building = asyncio.ensure_future(self._build(job, key))
            self._building[key] = building
            building.add_done_callback(lambda _: self._building.pop(key, None))
        else:
            self.hits += 1
        got = await asyncio.shield(building)
        if isinstance(got, Program):
            return got
        return compile_failure(
            got.message,
            rejected=got.rejected,
            isolation=self.isolation,
            limit=got.limit,
            compile_ms=got.compile_ms,
        )

    async def _build(self, job: Job, key: str) -> Program | _Failed:
        lang = languages.language(job.env.language)
        got = await self._compile(job, lang)
        if isinstance(got, _Failed):
            if got.rejected:
                broken = await self._probe(job, lang)
                if broken is not None:  # the toolchain, not the source: ours
                    return _Failed(False, broken, got.compile_ms)
                self._keep_rejected(key, got)
            return got
        self._working.add(lang.name)
        program, ms = got
        return self._keep(key, program, ms)

    async def _probe(self, job: Job, lang: languages.Language) -> str | None:
        """None once the language's toolchain has built a program here (an answer, or the
        language's known-good ``probe``, built at the first refusal before any success); else
        why no build in that language can be judged. A compiler that fails for a reason of its
        own (a library or a configuration file missing in the sandbox) refuses every answer,
        and each would read as the answer's ``compile_error``. A failed probe is tried again at
        the next refusal."""
        if lang.name in self._working:
            return None
        probing = self._probes.get(lang.name)
        if probing is None:
            probing = asyncio.ensure_future(self._compile(replace(job, answer=lang.probe), lang))
            self._probes[lang.name] = probing
        got = await asyncio.shield(probing)
        if not isinstance(got, _Failed):
            self._working.add(lang.name)
            return None
        if self._probes.get(lang.name) is probing:
            del self._probes[lang.name]
        return (
            f"the {lang.title} toolchain did not build a known-good program in the sandbox, "
            f"so no answer in {lang.name} is judged here: {got.message[-600:]}"
        )

    async def _compile(self, job: Job, lang: languages.Language) -> tuple[bytes, float] | _Failed:
        """Build ``job``'s source in a sandbox: the program and the time it took, or why not."""
        tc = languages.require(lang.name)
        bjob = _build_env(job, lang)
        t0 = time.monotonic()
        build_dir = self.workspace.run_dir()
        group = cgroups.create(
            bjob.env.memory_mb, bjob.env.max_processes, owner=self.workspace.owner
        )
        try:
            (build_dir / "answer").mkdir()
            (build_dir / "answer" / "solution.py").write_text(source(job))
            spec = json.dumps(_spec(lang, tc))
            argv, env = self.solution_argv(bjob, build_dir, group, "build", [spec])
            code, out, err, timed_out = await _run(
                argv, env, group.join_fds(), build_dir, bjob.timeout + START_GRACE_S
            )
        finally:
            limit, _, _ = take_evidence(group, "tmpfs")
            shutil.rmtree(build_dir, ignore_errors=True)
        ms = (time.monotonic() - t0) * 1000.0
        text = err.decode("utf-8", "replace")
        if timed_out:
            why = f"the compiler ran past compile_timeout ({job.env.compile_timeout:g} s)"
            return _Failed(False, why, ms, "time")
        if limit is not None:
            what = f"{bjob.env.memory_mb} MB memory" if limit == "memory" else limit
            return _Failed(False, f"the compiler was stopped by its {what} limit", ms, limit)
        signal = exit_signal(code, self.through_bwrap)
        if code == REJECTED and signal is None:
            if len(out) > MAX_PROGRAM_BYTES:
                text = f"the program is past {MAX_PROGRAM_BYTES >> 20} MiB"
            return _Failed(True, _diagnostics(text, lang), ms)
        if code != BUILT or signal is not None:
            tail = text.strip()[-600:] or "no word"
            return _Failed(False, f"the build failed (exit {code}): {tail}", ms)
        return out, ms

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


def _diagnostics(text: str, lang: languages.Language) -> str:
    """The compiler's word, cut to ``MAX_DIAGNOSTICS`` (its first errors matter most)."""
    text = text.strip() or f"the {lang.title} compiler refused the source"
    if len(text) > MAX_DIAGNOSTICS:
        text = text[:MAX_DIAGNOSTICS] + "\n..."
    return "compile error:\n" + text


async def _run(
    argv: list[str], env: dict[str, str], fds: tuple[int, ...], cwd: Path, wall: float
) -> tuple[int | None, bytes, bytes, bool]:
    """Run a build's sandbox: exit code, stdout (up to past ``MAX_PROGRAM_BYTES``), the head of
    stderr, and whether the wall limit killed it."""
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
    try:
        out, err, code = await asyncio.wait_for(asyncio.shield(work), wall)
    except TimeoutError:
        kill_tree(proc.pid)
        await end_process(proc)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(work, 5.0)
        return None, b"", b"", True
    except BaseException:
        await end_process(proc)
        raise
    if len(out) > MAX_PROGRAM_BYTES:
        return REJECTED, out, err, False
    return code, out, err, False
