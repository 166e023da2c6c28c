"""Hostile sources against the compile phase, on both sandboxes and in every language where
each applies (``compile_sources``): once the compiler has started on the source, a compile
that fails in any way is the answer's judged 0 (``compile_error``, or ``solution_timeout`` for
its time, the cause in the message), never a run without a verdict that would leave a wrong
answer out of the loss. Only the host may take the verdict away: a compile it held back.

Threat model (DESIGN.md): the source is adversarial, and the compiler runs over it in the
answer's own sandbox; it cannot run code of its own there, but it can make the compiler crash,
fill its memory, write huge files, compute without end or read any file it names. Each of those
must stay the answer's failure. After each test the host guard checks that no process or run
cgroup is left (not memory: a compiler may have filled GiBs the kernel gives back over seconds).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult
from deepgym.judge.blame import tree_pids
from deepgym.judge.build import COMPILING
from deepgym.sandbox.base import Backend
from tests.procs import comm
from tests.sandbox.conftest import HostGuard

from .compile_sources import ATTACKS
from .conftest import need, program_cache

pytestmark = pytest.mark.sandbox

LIMITS: dict[str, Any] = {
    "timeout": 20.0,  # room for the engine to retry a compile the host held back, once
    "case_timeout": 2.0,
    "memory_mb": 256,
    "max_processes": 16,
    "max_file_mb": 16,
}
COMPILE_TIMEOUT = {"java": 4.0, "go": 4.0}
"""The compile's limit in the tests: 2 s of CPU, 4 s for javac (its JVM alone takes about one)
and go (it takes about 1.3 s to refuse the nesting on a quiet host, and a host under memory
churn stretched that past 2 s): long enough for each language's own work, short for the
bombs."""
CASES = [{"stdin": "", "expected_stdout": "3\n"}]

BY_ITS_TIME = frozenset({("nesting", "cpp"), ("huge_array", "rust")}) | {
    (attack, lang) for attack in ("dev_zero", "bomb", "own_stderr") for lang in ATTACKS[attack]
}
"""The attacks whose compile may end on its time: the bombs, and those that make the compiler
compute (or wait) until a limit stops it. The others make the compiler fail by itself."""
CASES_TO_RUN = [
    pytest.param(attack, lang, id=f"{attack}-{lang}")
    for attack, by_lang in ATTACKS.items()
    for lang in sorted(by_lang)
]


def env_for(lang: str, name: str, **fields: Any) -> Environment:
    return Environment(
        name=f"compile-attack-{lang}-{name}",
        kind="script",
        language=lang,
        test_cases=CASES,
        compare="tokens",
        **{**LIMITS, "compile_timeout": COMPILE_TIMEOUT.get(lang, 2.0), **fields},
    )


def starved(r: RunResult) -> bool:
    """The host held the compiler back (a loaded host: any compile that computes may be):
    no verdict, and said so."""
    return (
        not r.has_verdict
        and r.error_type == "timeout"
        and r.error.startswith("the host held the compiler back")
    )


@pytest.fixture
def guard(host: HostGuard) -> HostGuard:
    """The host guard (the memory it checks is the pool's own cgroups': a compile's GiBs are
    charged to the build's group, removed with it)."""
    return host


@pytest.mark.parametrize(("attack", "lang"), CASES_TO_RUN)
def test_a_compile_that_fails_once_started_is_the_answers_zero(
    dg: DeepGym, guard: HostGuard, attack: str, lang: str
) -> None:
    need(lang)
    env = env_for(lang, attack)
    r = dg.run_one(env, ATTACKS[attack][lang])
    assert r.evidence.in_play_by == "compiler_started", r
    assert r.error_type != "sandbox_error", r
    if starved(r):  # twice (the engine retried it): a loaded host's, never the answer's
        assert r.attempts == 2, r
        assert (r.evidence.solution_cpu_ms or 0.0) < env.compile_timeout * 1000.0, r.evidence
        return
    by_time = (attack, lang) in BY_ITS_TIME
    assert r.has_verdict and r.score == 0.0 and not r.passed, r
    allowed = ("compile_error", "solution_timeout") if by_time else ("compile_error",)
    assert r.error_type in allowed, r
    assert r.error and not r.error.startswith("compile error"), r  # the cause, in its words
    if r.error_type == "solution_timeout":
        assert "compile_timeout" in r.error, r
        assert r.evidence.limit_fired in ("cpu_time", "wall_time"), r.evidence
    if attack == "own_stderr":  # a read that never ends: a wait of its own, past the limit
        assert r.error.startswith("the compiler waited, not running, past its compile_timeout")
        assert r.evidence.limit_fired == "wall_time", r.evidence
    if r.evidence.limit_fired == "memory":
        assert r.error.startswith("the compiler was stopped by its 2048 MB memory limit"), r
    again = dg.run_one(env, ATTACKS[attack][lang])  # the same source fails the same way, at once
    assert (again.error_type, again.error) == (r.error_type, r.error), again
    assert again.evidence.compile_ms == 0.0, again.evidence


# -- the host holds a compile back: never the answer's ---------------------------------------

RIGHT_CPP = '#include <iostream>\nint main() { std::cout << 3 << "\\n"; }\n'


def _stop_the_build(done: threading.Event, stopped: list[int]) -> None:
    """Find this test's build (the process named ``COMPILING``, below this process) and stop
    it and everything below it, until the run is done: the host holding a compiler back."""
    me = os.getpid()
    while not done.is_set():
        builds = [p for p in tree_pids(me) if comm(p) == COMPILING]
        for build in builds:
            for p in tree_pids(build):
                try:
                    os.kill(p, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                if p not in stopped:
                    stopped.append(p)
        done.wait(0.002)


@pytest.fixture
def holder() -> Iterator[tuple[threading.Event, list[int]]]:
    done = threading.Event()
    stopped: list[int] = []
    thread = threading.Thread(target=_stop_the_build, args=(done, stopped), daemon=True)
    thread.start()
    try:
        yield done, stopped
    finally:
        done.set()
        thread.join(5.0)
        for p in stopped:  # the host killed them; never leave one stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)


def test_a_compile_the_host_holds_back_is_not_the_answers_timeout(
    dg: DeepGym,
    backend: Backend,
    guard: HostGuard,
    holder: tuple[threading.Event, list[int]],
) -> None:
    """A right answer whose compiler the host stopped (as a loaded host keeps it off the CPU)
    for three times its limit on the clock: no verdict (``timeout``), never a
    ``solution_timeout``; and the starved compile is not remembered."""
    need("cpp")
    done, stopped = holder
    env = env_for("cpp", "held-back", compile_timeout=1.0, timeout=1.0)  # no room to retry
    t0 = time.monotonic()
    r = dg.run_one(env, RIGHT_CPP)
    done.set()
    assert stopped, "the test never found the build to stop"
    assert starved(r), r
    assert r.evidence.in_play_by == "compiler_started", r
    assert (r.evidence.solution_cpu_ms or 0.0) < 1000.0, r.evidence
    assert time.monotonic() - t0 >= 3.0  # held for the whole backstop before it gave up
    assert not any(f.starved for f in program_cache(backend)._rejected.values())
    after = dg.run_one(env_for("cpp", "held-back", compile_timeout=10.0), RIGHT_CPP)
    assert after.passed, after  # the host no longer holds it: right
