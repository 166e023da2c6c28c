"""The compile phase's own rules (``deepgym.sandbox.programs``): a toolchain that cannot build
a known-good program is ours (no verdict), never a ``compile_error``; a build is the answer's
only past its compiler's start, which the host learns from what the compiler cannot forge; the
compile's time limit is the CPU-time rule, applied by the host as it waits; programs in use are
never evicted; the cache is keyed by source, and remembers a failure for the same limits."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym import AsyncDeepGym, DeepGym, Environment, RewardFunction, languages
from deepgym.judge.blame import BACKSTOP, OVER, STARVED, WAITING
from deepgym.judge.build import BUILT, CRASHED, REJECTED, STOPPED
from deepgym.models import TEST_RUNNERS
from deepgym.sandbox.base import Job, RawRun
from deepgym.sandbox.programs import (
    ProgramCache,
    _Failed,
    _failure,
    _Ran,
    _run,
    compile_failure,
)
from deepgym.sandbox.workspace import Workspace
from deepgym.server.fusion import SubmitRequest, run_code_reply, submit_reply

RIGHT = '#include <stdio.h>\nint main(void) { puts("3"); return 0; }\n'
CASES = [{"stdin": "", "expected_stdout": "3\n"}]

pytestmark = pytest.mark.skipif(
    not languages.toolchain("c").present, reason="no gcc in /usr/bin here"
)


@pytest.fixture
def dg() -> Iterator[DeepGym]:
    with DeepGym(sandbox="strict") as client:
        yield client


def env(name: str = "three") -> Environment:
    return Environment(name=name, kind="script", language="c", test_cases=CASES)


def test_a_toolchain_that_refuses_a_known_good_program_is_ours(
    dg: DeepGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = languages.LANGUAGES["c"]
    # A compiler that refuses everything with exit 1, as one missing a header or a library in
    # the sandbox does: without the probe, every answer would be a judged compile_error.
    broken = dataclasses.replace(c, compile_argv=(*c.compile_argv, "-include", "/no/such.h"))
    monkeypatch.setitem(languages.LANGUAGES, "c", broken)
    r = dg.run_one(env(), RIGHT)
    assert not r.has_verdict and r.error_type == "sandbox_error"
    assert "did not build a known-good program" in r.error
    monkeypatch.setitem(languages.LANGUAGES, "c", c)
    again = dg.run_one(env(), RIGHT)  # the toolchain works again: judged, and right
    assert again.passed


def test_a_toolchain_that_breaks_later_is_caught_by_a_probe_at_that_moment(
    dg: DeepGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The language built a program here, then its compiler fails on every source in a way
    of its own (its internal-error code, here for any error): a crash is checked against the
    known-good program built at that moment, which fails too: ours, and not remembered."""
    assert dg.run_one(env(), RIGHT).passed  # the toolchain has built something here
    c = languages.LANGUAGES["c"]
    broken = dataclasses.replace(
        c, compile_argv=(*c.compile_argv, "-include", "/no/such.h"), crash_exit_codes=(1, 4)
    )
    monkeypatch.setitem(languages.LANGUAGES, "c", broken)
    r = dg.run_one(env(), "int main(void) { return 0; }\n")
    assert not r.has_verdict and r.error_type == "sandbox_error", r
    assert "did not build a known-good program" in r.error, r
    assert r.evidence.in_play_by == "compiler_started", r
    monkeypatch.setitem(languages.LANGUAGES, "c", c)
    assert dg.run_one(env(), "int main(void) { return 0; }\n").has_verdict  # works again: judged


def test_a_refused_source_is_the_answers_once_the_toolchain_has_built(dg: DeepGym) -> None:
    assert dg.run(env(), RIGHT).passed
    r = dg.run(env(), "int main( {")
    assert r.has_verdict and r.error_type == "compile_error" and "error" in r.error
    stats = dg.sandbox_stats()["compile_cache"]
    assert stats["misses"] == 2 and stats["programs"] == 1


def test_the_models_names_are_the_tables_languages() -> None:
    assert set(languages.NAMES) == {"python", *languages.LANGUAGES}
    assert {n for n, lang in languages.LANGUAGES.items() if lang.report} == TEST_RUNNERS
    for lang in languages.LANGUAGES.values():
        if lang.unavailable:  # refused by name: nothing to build or run
            continue
        assert lang.source and lang.run_argv, lang.name
        # a compile phase has its known-good program (none without one: R, Racket, SQL, pytest)
        assert bool(lang.probe) is bool(lang.compile_argv), lang.name


def test_programs_in_use_are_not_evicted(tmp_path: Path) -> None:
    ws = Workspace()
    try:
        cache = ProgramCache(
            ws, lambda *a: ([], {}), isolation="strict", through_bwrap=True, max_entries=1
        )
        first = cache._keep("a", b"x" * 10, 1.0)
        cache._pins["a"] += 1  # a run holds it
        cache._keep("b", b"y" * 10, 1.0)
        assert first.path.exists() and set(cache._programs) == {"a", "b"}
        cache._pins.clear()
        cache._evict()
        assert not first.path.exists() and set(cache._programs) == {"b"}
    finally:
        ws.close()


def test_a_harness_takes_the_answer_in_place_of_its_marker_line() -> None:
    from deepgym.models import HARNESS_MARKER
    from deepgym.sandbox.base import Job
    from deepgym.sandbox.programs import source

    harness = f"#include <stdio.h>\n{HARNESS_MARKER}\nint main(void) {{ return f(); }}\n"
    e = Environment(name="h", kind="script", language="c", test_cases=CASES, harness=harness)
    job = Job(env=e, answer="int f(void) { return 0; }\n", timeout=5.0, case_timeout=1.0)
    assert source(job) == (
        "#include <stdio.h>\nint f(void) { return 0; }\n\nint main(void) { return f(); }\n"
    )
    plain = Job(env=env(), answer="int main(void) {}\n", timeout=5.0, case_timeout=1.0)
    assert source(plain) == plain.answer  # no harness: the answer is the program
    assert ProgramCache.key(job) != ProgramCache.key(plain)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"language": "python", "harness": "// deepgym:answer\n"}, "compiled language"),
        ({"harness": "int main(void) {}\n"}, "exactly once"),
        ({"harness": "// deepgym:answer\n// deepgym:answer\n"}, "exactly once"),
    ],
)
def test_a_harness_is_refused_where_it_cannot_hold_the_answer(
    fields: dict[str, str], message: str
) -> None:
    base = {"name": "h", "kind": "script", "language": "c", "test_cases": CASES}
    with pytest.raises(ValueError, match=message):
        Environment(**{**base, **fields})  # type: ignore[arg-type]


# -- who a failed compile is ------------------------------------------------------------------

BUILD_CODES = (BUILT, REJECTED, CRASHED, STOPPED)
"""The exit codes only the build gives, once its compiler has run (``judge.build``)."""
JOB = Job(env=env(), answer="int main(void) {}\n", timeout=5.0, case_timeout=1.0)
C = languages.LANGUAGES["c"]


def failure(ran: _Ran, signal: int | None = None, limit: str | None = None) -> _Failed:
    return _failure(ran, signal, limit, JOB, C, 10.0)


@given(
    code=st.sampled_from([*BUILD_CODES, 1, 2, 120, 121, 127, 137]) | st.integers(-64, 300),
    signal=st.none() | st.integers(1, 64),
    limit=st.sampled_from([None, "memory", "processes"]),
    said=st.binary(max_size=40),
)
def test_a_build_that_ended_by_itself_is_the_answers_only_past_the_compilers_start(
    code: int, signal: int | None, limit: str | None, said: bytes
) -> None:
    """Only the build's own codes (or a limit no set-up comes near) say the compiler ran; its
    diagnostics, which a source can fill with anything, never decide."""
    ran = _Ran(code, b"", said)  # (BUILT here: a program past the cap, which _compile saw)
    got = failure(ran, signal, limit)
    ran_by_code = signal is None and code in BUILD_CODES
    assert got.started is (ran_by_code or (signal is not None and limit is not None))
    if signal is None and code == STOPPED:  # a stop signal: the memory cgroup's, or not ours
        assert got.answers is (limit is not None)
    elif got.started:
        assert got.answers and not got.timed_out
    # a plain refusal, or a program built (past the cap): the toolchain's earlier builds stand
    refused = code == BUILT or (code == REJECTED and limit is None)
    assert got.refused is (signal is None and refused)
    if limit is not None and got.answers and code != BUILT:
        assert got.message.startswith("the compiler "), got.message  # the cause leads
    assert not got.message.startswith("compile error")


@given(
    check=st.sampled_from([OVER, WAITING, STARVED]),
    started=st.booleans(),
    cpu_ms=st.floats(0.0, 1e6),
)
def test_a_build_the_host_ended_on_its_clock(check: str, started: bool, cpu_ms: float) -> None:
    got = failure(_Ran(None, b"", b"", check, cpu_ms, started))
    assert got.started is started
    assert got.answers is (started and check != STARVED)
    assert got.timed_out is (started and check != STARVED)
    assert got.starved is (started and check == STARVED)
    assert got.limit == ("cpu_time" if check == OVER and started else "wall_time")


def test_a_remembered_failure_stands_only_under_the_same_or_tighter_limits(dg: DeepGym) -> None:
    """A source that timed out under 1 s may build under 30 s: it compiles again."""
    spin = "#define A0 +1\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 40))
    source = spin + "int v = 0 A39;\n" + RIGHT
    tight = dg.run_one(env().model_copy(update={"compile_timeout": 0.2}), source)
    assert tight.evidence.in_play_by == "compiler_started", tight
    cache = dg.sandbox_stats()["compile_cache"]
    again = dg.run_one(env().model_copy(update={"compile_timeout": 0.1}), source)
    assert again.error == tight.error or not tight.has_verdict, (tight, again)
    if tight.has_verdict:  # judged and remembered: tighter limits hit the memory
        assert dg.sandbox_stats()["compile_cache"]["misses"] == cache["misses"]
    before = dg.sandbox_stats()["compile_cache"]["misses"]
    dg.run_one(env().model_copy(update={"compile_timeout": 0.4}), source)
    # a looser limit never reads the memory: it builds again (twice where a loaded host starved
    # the build and the engine retried it)
    assert dg.sandbox_stats()["compile_cache"]["misses"] > before


# -- the CPU-time rule, applied by the host ------------------------------------------------------


def run(*argv: str, limit_s: float) -> _Ran:
    return asyncio.run(_run(list(argv), {"PATH": "/usr/bin:/bin"}, (), Path("/"), limit_s))


def test_a_build_that_waits_past_its_limit_chose_to() -> None:
    got = run("sleep", "60", limit_s=0.2)
    assert (got.check, got.started) == (WAITING, False)  # no build named itself: not started


def test_a_stopped_build_is_held_back_by_the_host() -> None:
    """A compiler never stops itself: stopped (``T``) past the backstop is the host's doing."""
    t0 = time.monotonic()
    got = run("sh", "-c", "kill -STOP $$", limit_s=0.2)
    assert got.check == STARVED, got
    assert time.monotonic() - t0 >= BACKSTOP * 0.2
    assert (got.cpu_ms or 0.0) < 200.0


def test_a_build_that_computes_past_its_limit_used_its_time() -> None:
    """A loop of the shell's own: over its CPU time, or, on a host too loaded to give it a
    third of a core, held back (never blamed for the host's load)."""
    got = run("sh", "-c", "while :; do :; done", limit_s=0.3)
    assert got.check in (OVER, STARVED), got
    if got.check == OVER:
        assert (got.cpu_ms or 0.0) >= 300.0


def test_a_build_that_ends_in_time_is_waited_for_not_polled() -> None:
    got = run("sh", "-c", "echo out; echo err >&2; exit 7", limit_s=5.0)
    assert (got.code, got.out, got.err, got.check) == (7, b"out\n", b"err\n", None)


# -- through every door ----------------------------------------------------------------------

LIMITS4 = (2.0, 2048, 256, 256)
DOORS: dict[str, tuple[_Failed, bool, str | None]] = {
    # answer -> (the build's failure, judged?, error type)
    "ice": (_Failed("gcc: internal compiler error", 5.0, True, LIMITS4), True, "compile_error"),
    "slow": (
        _Failed("the compiler used its compile_timeout", 5.0, True, LIMITS4, timed_out=True),
        True,
        "solution_timeout",
    ),
    "held": (
        _Failed("the host held the compiler back", 5.0, True, LIMITS4, starved=True),
        False,
        "timeout",
    ),
    "unstarted": (_Failed("the build failed", 5.0, False, LIMITS4), False, "sandbox_error"),
    "broken": (
        _Failed("toolchain", 5.0, True, LIMITS4, toolchain_ok=False),
        False,
        "sandbox_error",
    ),
}


class CompileDoors:
    """A backend whose every run ends in its compile phase, as ``DOORS`` says."""

    name = "fake"

    async def run(self, job: Job) -> RawRun:
        return compile_failure(DOORS[job.answer.strip()][0], "fake")

    async def close(self) -> None:
        pass


def test_a_failed_compile_reads_the_same_through_every_door() -> None:
    """``RunResult``, ``RewardFunction``, ``/run_code`` and ``/submit``: the answer's compile
    failures are a judged 0 (a 200 with a ``compile_result``, never a 504); ours are none."""
    e = env("doors")
    answers = list(DOORS)
    with DeepGym(backend=CompileDoors()) as client:
        results = client.run_batch(e, answers).results
    reward = RewardFunction(e, client=AsyncDeepGym(backend=CompileDoors()))
    try:
        rewards = reward(completions=[f"```c\n{a}\n```" for a in answers])
    finally:
        reward.close()
    for answer, r, got in zip(answers, results, rewards, strict=True):
        _, judged, error_type = DOORS[answer]
        assert (r.has_verdict, r.error_type) == (judged, error_type), r
        assert got == (0.0 if judged else None), (answer, got)
        status, body = run_code_reply(r, "c")
        assert status == (200 if judged else 504), (answer, body)
        if not judged:
            continue
        assert body["status"] == "Failed" and body["run_result"] is None, body
        compiled = body["compile_result"]
        assert compiled["stderr"] == r.error and not compiled["stderr"].startswith("compile")
        want = "TimeLimitExceeded" if error_type == "solution_timeout" else "Finished"
        assert compiled["status"] == want, compiled
        req = SubmitRequest(  # (with its tests in provided_data: a registered dataset's
            dataset="d",  # problem reports the cases that ran)
            id=1,
            completion=f"```c\n{answer}\n```",
            config={"language": "c", "provided_data": {"inputs": [""], "outputs": [""]}},
        )
        status, sub = submit_reply(req, e, r, answer, "c", "c")
        assert status == 200 and not sub["accepted"], sub
        assert [t["exec_info"]["compile_result"]["status"] for t in sub["tests"]] == [want]
