"""The pool's own life: lazy start, memory per worker, a worker that dies, a clean close."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from deepgym import Environment
from deepgym.client import AsyncDeepGym
from deepgym.sandbox import cgroups
from deepgym.sandbox.pool import PoolBackend
from deepgym.scheduling import TimeLimitPolicy
from tests.procs import comm, descendants

pytestmark = pytest.mark.sandbox

ENV = Environment(
    name="add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=20.0,
    case_timeout=10.0,
)
GOOD = "def add(a, b):\n    return a + b\n"
SLOW = "import time\ndef add(a, b):\n    time.sleep(3)\n    return a + b\n"


def test_workers_start_lazily_report_memory_and_leave_nothing() -> None:
    async def go() -> None:
        backend = PoolBackend(workers=2)
        dg = AsyncDeepGym(time_limits=TimeLimitPolicy(factor=None), backend=backend)
        assert backend.stats()["workers"] == 0  # nothing runs before the first answer
        r = await dg.run(ENV, GOOD)
        assert r.passed and r.isolation == "pool"
        stats = backend.stats()
        assert await dg.sandbox_stats() == stats
        assert stats["workers"] == 2
        assert all(0 < kb < 200_000 for kb in stats["rss_kb"])
        assert descendants(os.getpid())
        await dg.close()
        assert not descendants(os.getpid())  # workers, zygotes and sandboxes are all gone

    asyncio.run(go())


def test_a_worker_that_dies_mid_run_costs_that_run_its_verdict_only() -> None:
    async def go() -> None:
        backend = PoolBackend(workers=1)
        dg = AsyncDeepGym(time_limits=TimeLimitPolicy(factor=None), backend=backend)
        try:
            await dg.run(ENV, GOOD)  # start the worker
            pending = asyncio.ensure_future(dg.run_batch(ENV, [SLOW]))
            await asyncio.sleep(1.0)  # the answer is in play, sleeping
            os.killpg(backend._workers[0].proc.pid, signal.SIGKILL)
            batch = await pending
            (dead,) = batch.results
            assert not dead.has_verdict
            assert dead.error_type == "sandbox_error"
            assert dead.attempts == 1  # in play when it died: not retried
            after = await dg.run(ENV, GOOD)  # a replacement worker serves the next run
            assert after.passed
        finally:
            await dg.close()

    asyncio.run(go())


def test_a_cancelled_run_never_hands_its_busy_worker_to_the_next_run() -> None:
    async def go() -> None:
        dg = AsyncDeepGym(workers=1, time_limits=TimeLimitPolicy(factor=None))
        try:
            await dg.run(ENV, GOOD)
            slow = asyncio.ensure_future(dg.run(ENV, SLOW))
            await asyncio.sleep(1.0)
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow
            after = await asyncio.wait_for(dg.run(ENV, GOOD), 10)  # a fresh worker, no mix-up
            assert after.passed and after.env_name == "add"
        finally:
            await dg.close()

    asyncio.run(go())


COUNTING = Environment(
    name="counting",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    verifier_code=(
        "def verify(solution, test_cases):\n"
        "    cache = globals().get('process_cache')\n"
        "    if cache is None:\n"
        "        return {'score': 0.0, 'reward_components': {'runs': -1.0}}\n"
        "    cache['runs'] = cache.get('runs', 0) + 1\n"
        "    ok = solution.add(1, 2) == 3\n"
        "    return {'score': float(ok), 'reward_components': {'runs': float(cache['runs'])}}\n"
    ),
    timeout=20.0,
    case_timeout=10.0,
)


@pytest.mark.parametrize(
    ("sandbox", "expected"), [("pool", [1.0, 2.0, 3.0]), ("strict", [1.0] * 3)]
)
def test_a_verifier_process_cache_outlives_the_run_only_in_a_worker(
    sandbox: str, expected: list[float]
) -> None:
    async def go() -> None:
        async with AsyncDeepGym(
            sandbox=sandbox, workers=1, time_limits=TimeLimitPolicy(factor=None)
        ) as dg:
            runs = [await dg.run(COUNTING, GOOD) for _ in range(3)]
        assert all(r.passed for r in runs)
        assert [r.reward_components["runs"] for r in runs] == expected

    asyncio.run(go())


def test_each_worker_keeps_one_cgroup_per_controller_and_removes_it_at_close() -> None:
    async def go() -> None:
        backend = PoolBackend(workers=2)
        dg = AsyncDeepGym(time_limits=TimeLimitPolicy(factor=None), backend=backend)
        for _ in range(3):
            assert (await dg.run(ENV, GOOD)).passed
        groups = [d for w in backend._workers for d in w.slot.dirs.values()]
        assert len(groups) == 2 * len(cgroups.v1_controllers())
        assert all(os.path.isdir(d) for d in groups)
        await dg.close()
        cgroups.retry_pending(final=True)
        assert not any(os.path.exists(d) for d in groups)

    asyncio.run(go())


ENVIRON = Environment(
    name="environ",
    entry_point="environ",
    test_cases=[
        {
            "args": [],
            "expected": {
                "HOME": "/work",
                "LANG": "C.UTF-8",
                "PATH": "/usr/bin:/bin",
                "PYTHONHASHSEED": "0",
            },
        }
    ],
    timeout=20.0,
    case_timeout=10.0,
)


@pytest.mark.parametrize("sandbox", ["pool", "strict"])
def test_the_answer_sees_only_the_solution_environment(sandbox: str) -> None:
    """Nothing of the worker's own start-up settings (its dynamic-linker setting) reaches it."""

    async def go() -> None:
        async with AsyncDeepGym(
            sandbox=sandbox, workers=1, time_limits=TimeLimitPolicy(factor=None)
        ) as dg:
            src = (  # (``strict`` adds PWD, which bwrap sets where it starts a process)
                "import os\ndef environ():\n"
                "    return {k: v for k, v in os.environ.items() if k != 'PWD'}\n"
            )
            runs = [await dg.run(ENVIRON, src) for _ in range(2)]
        assert all(r.passed for r in runs), [c.message for r in runs for c in r.cases]

    asyncio.run(go())


WHERE = Environment(
    name="where",
    entry_point="where",
    test_cases=[{"args": [], "expected": ["/work", True, None, None]}],
    timeout=20.0,
    case_timeout=10.0,
)


@pytest.mark.parametrize("sandbox", ["pool", "strict"])
def test_the_answer_runs_in_its_work_dir_with_no_host_setup_left(sandbox: str) -> None:
    """Its working dir is the one that holds its file, and the host's set-up variables (which a
    pool's solution never reads: its zygote put everything in place) are not in its environment."""

    async def go() -> None:
        async with AsyncDeepGym(
            sandbox=sandbox, workers=1, time_limits=TimeLimitPolicy(factor=None)
        ) as dg:
            src = (
                "import os\ndef where():\n"
                "    env = os.environ\n"
                "    return [os.getcwd(), os.path.isfile('solution.py'),\n"
                "            env.get('DEEPGYM_CGROUP_PROCS'), env.get('DEEPGYM_RPC_FDS')]\n"
            )
            runs = [await dg.run(WHERE, src) for _ in range(2)]
        assert all(r.passed for r in runs), [c.message for r in runs for c in r.cases]

    asyncio.run(go())


SPOILER = Environment(
    name="spoiler",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}],
    verifier_code=(
        "def verify(solution, test_cases):\n"
        "    ok = len(test_cases) == 2\n"
        "    ok = ok and all(solution.add(*c['args']) == c['expected'] for c in test_cases)\n"
        "    test_cases[0]['expected'] = -1  # a verifier may change what it was given\n"
        "    test_cases.clear()\n"
        "    return float(ok)\n"
    ),
    timeout=20.0,
    case_timeout=10.0,
)
ADDER = Environment(
    name="adder",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}],
    timeout=20.0,
    case_timeout=10.0,
)


def test_a_worker_parses_a_staged_cases_file_once_and_no_verifier_changes_it() -> None:
    """A worker keeps an environment's parsed cases for its own judging (run after run), and a
    verifier gets a copy of its own: what one run's verifier changes, the next never sees."""

    async def go() -> None:
        async with AsyncDeepGym(
            sandbox="pool", workers=1, time_limits=TimeLimitPolicy(factor=None)
        ) as dg:
            for env in (SPOILER, ADDER, SPOILER, ADDER):
                for _ in range(3):
                    r = await dg.run(env, "def add(a, b):\n    return a + b\n")
                    assert r.has_verdict and r.score == 1.0, (env.name, r)

    asyncio.run(go())


# The answer's view of its pid namespace: its pid, and how many processes besides it and the
# init it can see there (a signal 0 to each pid: a pool's solution has no /proc).
PROBE_ENV = Environment(
    name="probe",
    entry_point="probe",
    test_cases=[{"args": [], "expected": 0}],
    verifier_code=(
        "def verify(solution, test_cases):\n"
        "    pid, others = solution.probe()\n"
        "    return {'score': 1.0, 'reward_components': {'pid': pid, 'others': others}}\n"
    ),
    timeout=20.0,
    case_timeout=10.0,
)
PROBE = """
import os

def probe():
    others = 0
    for pid in range(2, 256):
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            others += 1
        except ProcessLookupError:
            pass
        except PermissionError:
            others += 1
    return os.getpid(), others
"""
# ... and one that leaves a process behind when it loads
LEAVES = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\n" + PROBE


def test_a_namespace_left_empty_hosts_the_next_run_and_one_left_busy_ends() -> None:
    """Once a run's processes are all gone, its namespace hosts the next solution process under
    the same init (its pids go on: 3, 4); where the answer left a process, the namespace ends
    with the run (its init's end takes the process) and the next run is born in a new one
    (pid 2). Every answer is alone there with the init, whatever ran before it."""

    async def go() -> None:
        dg = AsyncDeepGym(workers=1, time_limits=TimeLimitPolicy(factor=None))
        seen = []
        try:
            for answer in (PROBE, PROBE, LEAVES, PROBE, PROBE):
                r = await dg.run(PROBE_ENV, answer)
                assert r.passed, r
                seen.append((int(r.reward_components["pid"]), int(r.reward_components["others"])))
            solutions = [p for p in descendants(os.getpid()) if comm(p) == "dg-solution"]
        finally:
            await dg.close()
        assert seen == [(2, 0), (3, 0), (4, 1), (2, 0), (3, 0)], seen
        assert not solutions, "the process the answer left outlived its run"

    asyncio.run(go())
