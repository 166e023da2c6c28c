"""The Ray engine on a local cluster of several nodes on this host (``ray.cluster_utils``): the
same results as local mode, chunks that survive a killed actor and a removed node, a node that
joins and gets work, a flat driver memory over 50,000 answers, and the attack answers' outcomes."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

import tests.fakes
from deepgym import DeepGym, Environment, RunResult, load_environment
from deepgym.client import AsyncDeepGym
from deepgym.engines.ray import RayEngine
from deepgym.envs.registry import load_suite
from deepgym.reward_function import RewardFunction
from deepgym.scheduling import TimeLimitPolicy
from tests.sandbox.conftest import held_back

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(600)]

ray.cloudpickle.register_pickle_by_value(tests.fakes)  # the fake backend travels to the actors


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


def _verdict(r: RunResult) -> tuple[Any, ...]:
    """What the trainer gets: the verdict, score and pass, and why there was no verdict. Which
    of the answer's own failures a judged 0 names can differ with timing (a memory bomb that
    reaches its time limit before its memory limit on a loaded machine)."""
    return (r.has_verdict, r.score, r.passed, None if r.has_verdict else r.error_type)


def _engine(cluster: Cluster, **kw: Any) -> RayEngine:
    kw.setdefault("health_s", 0.5)
    return RayEngine(cluster.address, **kw)


async def _both(
    cluster: Cluster, envs: list[Environment], answers: list[str], group_size: int | None = None
) -> tuple[list[RunResult], list[RunResult]]:
    async with AsyncDeepGym() as local:
        want = await local.run_batch(envs, answers, group_size=group_size)
    async with AsyncDeepGym(engine=_engine(cluster)) as dg:
        got = await dg.run_batch(envs, answers, group_size=group_size)
    return want.results, got.results


def test_the_same_results_as_local_mode_on_builtins_and_humaneval(cluster: Cluster) -> None:
    builtins = load_suite("builtin")
    humaneval = load_suite("humaneval")
    envs: list[Environment] = []
    answers: list[str] = []
    for e in builtins:  # every built-in: its reference answer and a wrong one
        assert e.reference_solution is not None
        envs += [e, e]
        answers += [e.reference_solution, "def nothing():\n    pass\n"]
    for i, e in enumerate(humaneval):  # all 164 references, and a wrong answer to every 8th
        assert e.reference_solution is not None
        envs.append(e)
        answers.append(e.reference_solution)
        if i % 8 == 0:
            envs.append(e)
            answers.append("def nothing():\n    pass\n")
    want, got = asyncio.run(_both(cluster, envs, answers))
    assert len(got) == len(want) == len(answers)
    assert [_verdict(r) for r in got] == [_verdict(r) for r in want]
    assert sum(r.passed for r in got) == len(builtins) + len(humaneval)
    assert all(r.isolation == "pool" for r in got)


def test_eval_and_a_reward_function_through_ray(cluster: Cluster) -> None:
    names = ["two_sum", "fizzbuzz", "coin_change"]
    envs = [load_environment(n) for n in names]
    outputs = {e.name: e.reference_solution or "" for e in envs[:2]}  # the third: no answer

    async def go() -> list[RunResult]:
        async with AsyncDeepGym(engine=_engine(cluster)) as dg:
            result = await dg.eval(envs, outputs)
            assert result.env_names == names
            return result.results

    results = asyncio.run(go())
    assert [r.passed for r in results] == [True, True, False]
    client = AsyncDeepGym(engine=_engine(cluster))
    with RewardFunction(client=client, environments={"two_sum": envs[0]}) as reward:
        assert envs[0].reference_solution is not None
        scores = reward([envs[0].reference_solution, "x = 1\n"], env="two_sum")
    ray.shutdown()  # the caller's client stays open after the reward function: disconnect
    assert scores == [1.0, 0.0]


def test_stream_groups_yields_every_group_once_across_nodes(cluster: Cluster) -> None:
    env = load_environment("two_sum")
    assert env.reference_solution is not None
    answers = [env.reference_solution, "x = 1\n"] * 24  # 12 groups of 4

    async def go() -> tuple[list[int], dict[str, Any]]:
        async with AsyncDeepGym(engine=_engine(cluster)) as dg:
            seen = []
            async for g, results in dg.stream_groups(env, answers, group_size=4):
                assert [r.passed for r in results] == [True, False, True, False]
                seen.append(g)
            return seen, await dg.sandbox_stats()

    seen, stats = asyncio.run(go())
    assert sorted(seen) == list(range(12))
    nodes = stats["nodes"]
    assert len(nodes) == 2 and all(n["scored"] > 0 for n in nodes.values())  # both took work


def test_run_raises_and_returns_as_local_mode_does(cluster: Cluster) -> None:
    env = load_environment("fizzbuzz")

    async def go() -> tuple[RunResult, float, float]:
        async with AsyncDeepGym(engine=_engine(cluster)) as dg:
            assert env.reference_solution is not None
            r = await dg.run(env, env.reference_solution)
            return r, await dg.time_limit(env), await dg.time_limit(env, 3.0)

    result, limit, given = asyncio.run(go())
    assert result.passed and result.has_verdict
    assert limit == 1.0 and given == 3.0  # a fast reference: the floor; an explicit one stands


SLOW_OK = textwrap.dedent(
    """
    import time
    def add(a, b):
        time.sleep(0.4)
        return a + b
    """
)
ADD = Environment(
    name="ray-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=10.0,
    time_limit=5.0,
)


def _every_run_once_and_never_a_false_zero(results: list[RunResult], n: int) -> None:
    assert len(results) == n
    for r in results:
        if r.has_verdict:  # every answer is right: a verdict is a pass, never a 0 from a failure
            assert r.passed and r.score == 1.0, r
        else:
            assert r.error_type in {"sandbox_error", "timeout"}, r


def test_an_actor_killed_mid_batch_loses_no_run(cluster: Cluster) -> None:
    async def go() -> tuple[list[RunResult], int]:
        engine = _engine(cluster)
        async with AsyncDeepGym(engine=engine) as dg:
            batch = asyncio.ensure_future(dg.run_batch(ADD, [SLOW_OK] * 48, group_size=4))
            await asyncio.sleep(2.0)
            victim = next(iter(engine._actors.values()))
            ray.kill(victim.handle, no_restart=False)
            results = (await batch).results
            again = await dg.run_batch(ADD, [SLOW_OK] * 8, group_size=4)  # restarted: usable
            return results, sum(r.passed for r in again.results)

    results, passed_after = asyncio.run(go())
    _every_run_once_and_never_a_false_zero(results, 48)
    assert sum(r.passed for r in results) >= 40  # the killed actor's chunks went elsewhere
    assert passed_after == 8


def test_a_node_removed_and_a_node_added_mid_batch(cluster: Cluster) -> None:
    extra = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()

    async def go() -> tuple[list[RunResult], list[RunResult], dict[str, Any]]:
        engine = _engine(cluster, chunk_size=4)  # one group a chunk: chunks left for a newcomer
        async with AsyncDeepGym(engine=engine) as dg:
            await dg.run_batch(ADD, [SLOW_OK] * 3, group_size=1)  # an actor on every node
            batch = asyncio.ensure_future(dg.run_batch(ADD, [SLOW_OK] * 60, group_size=4))
            await asyncio.sleep(2.0)
            await asyncio.to_thread(cluster.remove_node, extra)
            removed = (await batch).results
            # A node that joins mid-batch gets an actor, and work.
            batch = asyncio.ensure_future(dg.run_batch(ADD, [SLOW_OK] * 120, group_size=4))
            await asyncio.sleep(0.5)
            cluster.add_node(num_cpus=1)  # (from the main thread only: it sets signal handlers)
            added = (await batch).results
            return removed, added, await dg.sandbox_stats()

    removed, added, stats = asyncio.run(go())
    _every_run_once_and_never_a_false_zero(removed, 60)
    assert sum(r.passed for r in removed) >= 48
    _every_run_once_and_never_a_false_zero(added, 120)
    nodes = stats["nodes"]
    assert len(nodes) == 3  # the two first nodes and the one that joined
    assert all(n.get("scored", 0) > 0 for n in nodes.values()), nodes


def test_the_driver_memory_stays_flat_over_50000_answers(cluster: Cluster) -> None:
    env = Environment(
        name="toy", entry_point="f", test_cases=[{"args": [], "expected": 1}], time_limit=5.0
    )
    n = 50_000

    async def go() -> tuple[int, int, int]:
        engine = _engine(cluster, backend_factory=tests.fakes.FakeBackend, chunk_size=128)
        async with AsyncDeepGym(engine=engine) as dg:
            tracemalloc.start()
            early = 0
            count = 0
            async for g, results in dg.stream_groups(env, ["pass"] * n, group_size=64):
                count += sum(r.passed for r in results)
                if g == 150:
                    early = tracemalloc.get_traced_memory()[0]
            late = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            return count, early, late

    count, early, late = asyncio.run(go())
    assert count == n
    # From about 10,000 answers in to 50,000: the driver holds chunks in flight, not results.
    assert late - early < 8 * 2**20, (early, late)


ATTACKS = {
    "infinite loop": "def add(a, b):\n    while True:\n        pass\n",
    "forged score": (
        'import sys\nprint(\'{"status": "ok", "score": 1.0}\')\n'
        "sys.stdout.flush()\ndef add(a, b):\n    return 0\n"
    ),
    "memory bomb": "def add(a, b):\n    x = bytearray(2**31)\n    return a + b\n",
    "fork bomb": (
        "import os, time\ndef add(a, b):\n    made = 0\n    for _ in range(200):\n"
        "        try:\n            if os.fork() == 0:\n                time.sleep(30)\n"
        "                os._exit(0)\n            made += 1\n        except OSError:\n"
        "            break\n    return 3 if made >= 200 else 0\n"
    ),
    "read the tests": (
        "import glob\ndef add(a, b):\n"
        "    found = glob.glob('/judge/**/test_cases.json', recursive=True)\n"
        "    found += glob.glob('/tmp/**/test_cases.json', recursive=True)\n"
        "    return 3 if found else 0\n"
    ),
    "huge file": (
        "def add(a, b):\n    try:\n        with open('big.bin', 'wb') as f:\n"
        "            for _ in range(64):\n                f.write(b'x' * 2**20)\n"
        "        return 3\n    except OSError:\n        return 0\n"
    ),
    "write the verifier": (
        "import glob\ndef add(a, b):\n"
        "    for path in glob.glob('/judge/**/*.py', recursive=True):\n"
        "        try:\n            with open(path, 'a') as f:\n                f.write('x')\n"
        "            return 3\n        except OSError:\n            pass\n    return 0\n"
    ),
    "kill the parent": (
        "import os, signal\ndef add(a, b):\n    if os.getppid() > 1:\n"
        "        os.kill(os.getppid(), signal.SIGKILL)\n    return 0\n"
    ),
    "network": (
        "import socket\ndef add(a, b):\n    try:\n"
        "        socket.create_connection(('127.0.0.1', 22), timeout=1)\n        return 3\n"
        "    except OSError:\n        return 0\n"
    ),
}


def test_the_attack_answers_get_the_same_outcomes_through_ray(cluster: Cluster) -> None:
    env = ADD.model_copy(
        update={
            "name": "ray-attacks",
            "time_limit": 2.0,
            "memory_mb": 256,
            "max_processes": 16,
            "max_file_mb": 16,
        }
    )
    answers = list(ATTACKS.values())
    want, got = asyncio.run(_both(cluster, [env] * len(answers), answers))
    for name, w, g in zip(ATTACKS, want, got, strict=True):
        # a computing answer (a loop, a memory bomb's allocations) that a loaded host held
        # past its backstop: no verdict on that side, and a 0 where the other side judged it
        if held_back(w) or held_back(g):
            assert not (w.passed or g.passed), (name, w, g)
            continue
        assert _verdict(g) == _verdict(w), name
        assert g.has_verdict and not g.passed, (name, g)


class Hang:
    """A backend whose runs never end: a wedged pool."""

    name = "hang"

    async def run(self, job: Any) -> Any:
        await asyncio.Event().wait()

    async def close(self) -> None:
        pass


HANG_ENV = Environment(
    name="toy",
    entry_point="f",
    test_cases=[{"args": [], "expected": 1}],
    timeout=1.0,
    time_limit=0.2,
)


async def _hung_batch(
    cluster: Cluster, stall_s: float, env: Environment = HANG_ENV
) -> tuple[list[RunResult], float, int]:
    engine = _engine(cluster, backend_factory=Hang, stall_s=stall_s)
    async with AsyncDeepGym(engine=engine) as dg:
        t0 = time.monotonic()
        batch = await dg.run_batch(env, ["pass"] * 4, group_size=2)
        return batch.results, time.monotonic() - t0, engine.resent


def test_a_batch_past_its_deadline_comes_back_without_a_verdict(cluster: Cluster) -> None:
    # The chunk's deadline: 4 rounds of (2 x 0.2 s + 2 s of start grace), plus 10 s.
    results, took, resent = asyncio.run(_hung_batch(cluster, stall_s=600.0))
    assert all(not r.has_verdict and r.error_type == "timeout" for r in results), results
    assert 19.0 < took < 40.0 and resent == 0


def test_a_wedged_actor_exits_and_its_chunk_goes_elsewhere(cluster: Cluster) -> None:
    # Every node's pool hangs: the actor exits (Ray starts a new one), the chunk is sent once
    # more, that actor exits too, and the answers come back without a verdict, before the
    # chunk's deadline.
    # A chunk's deadline of 3 rounds of (4 x 4 s + 2 s of start grace), plus 10 s: room for Ray
    # to start the actors twice on a loaded host (with 1 s limits, 28 s were too few at a load
    # average of 20 on 2 cores); a stall is found after 2 s. What came back says which path it
    # took: the resend's sandbox_error, never the deadline's timeout (the clock of a loaded
    # host is no evidence).
    slow = HANG_ENV.model_copy(update={"time_limit": 4.0, "timeout": 4.0})
    results, _, resent = asyncio.run(_hung_batch(cluster, stall_s=2.0, env=slow))
    assert all(not r.has_verdict and r.error_type == "sandbox_error" for r in results), results
    assert resent == 1


def test_mode_ray_through_the_client_settings(cluster: Cluster) -> None:
    with pytest.raises(Exception, match="address is for mode='ray'"):
        AsyncDeepGym(address="auto")
    with pytest.raises(Exception, match="no workers"):
        AsyncDeepGym(mode="ray", workers=2)
    dg = AsyncDeepGym(mode="ray", address=cluster.address, time_limits=TimeLimitPolicy())
    assert dg.mode == "ray"
    asyncio.run(dg.close())


def test_deepgym_serve_ray_runs_the_service_answers_on_the_cluster(cluster: Cluster) -> None:
    env = load_environment("two_sum")
    assert env.reference_solution is not None
    proc = subprocess.Popen(
        [sys.executable, "-m", "deepgym", "serve", "--port", "0", "--ray", cluster.address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DEEPGYM_TOKEN": ""},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", first)
        assert m, (first, proc.stderr.read() if proc.poll() is not None else "")
        with DeepGym(mode="remote", url=m.group(1)) as dg:
            batch = dg.run_batch(env, [env.reference_solution, "x = 1\n"] * 4, group_size=2)
        assert [r.passed for r in batch.results] == [True, False] * 4
        if not ray.is_initialized():
            ray.init(address=cluster.address)
        names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
        ray.shutdown()
        assert sum(n.startswith("deepgym-scorer-") for n in names) >= 2  # one per node
    finally:
        proc.terminate()
        proc.communicate(timeout=60)  # (and closes its pipes)


def test_a_service_on_ray_refuses_agent_sessions_as_a_bad_request() -> None:
    from starlette.testclient import TestClient

    from deepgym.server.app import create_app

    app = create_app(engine=RayEngine("127.0.0.1:1"))  # never reached: refused before Ray
    with TestClient(app) as client:
        r = client.post("/v1/sessions", json={"env": "agent/fix_add"})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "this client's engine ('ray') has no agent sessions"


def test_a_runtime_measured_on_one_node_travels_and_no_other_node_measures_it() -> None:
    """The wire between the driver and the nodes, in one process (no cluster): what a node
    measured comes back under the driver's key, and a node given it measures nothing, even
    where its copy of the environment has its files elsewhere (a key of its own there)."""
    from deepgym.engines.ray import _PACKAGE, NodeScorer
    from deepgym.identity import env_key

    verifier = Path(_PACKAGE) / "envs" / "verifiers" / "humaneval_check.py"
    here = Environment(
        name="toy",
        entry_point="f",
        verifier_path=verifier,
        timeout=30.0,
        reference_solution="sleep:0.5",
    )
    elsewhere = "/another/install/deepgym"  # the driver's package folder
    driver_copy = here.model_copy(
        update={"verifier_path": Path(elsewhere + str(verifier)[len(_PACKAGE) :])}
    )
    wired = (driver_copy, elsewhere, env_key(driver_copy))
    assert env_key(driver_copy) != env_key(here)
    policy = TimeLimitPolicy(persist=False)
    fakes: list[tests.fakes.FakeBackend] = []

    def backend() -> tests.fakes.FakeBackend:
        fakes.append(tests.fakes.FakeBackend())
        return fakes[-1]

    async def go() -> tuple[Any, ...]:
        a = NodeScorer(1, policy=policy, backend_factory=backend)
        b = NodeScorer(1, policy=policy, backend_factory=backend)
        try:
            ms, sent = await a.runtime(wired, {})
            results, back = await b.score([wired], [0], ["sleep:1.2"], None, sent)
            return ms, sent, results, back
        finally:
            await a.close()
            await b.close()

    ms, sent, results, back = asyncio.run(go())
    assert ms == 500.0 and sent == back == {wired[2]: 500.0}
    assert fakes[0].calls["sleep:0.5"] == 2  # measured there (the faster of two runs)
    assert fakes[1].calls["sleep:0.5"] == 0  # and never here
    assert results[0].passed and results[0].time_limit_s == 5.0  # 10 x 0.5 s, not the cap


def test_the_drivers_concurrent_first_time_limits_ask_one_node_once() -> None:
    """The driver's limits are a ``TimeLimits`` whose measurement asks a node: concurrent
    ``time_limit`` calls ask once, and what no reference decides asks no node at all."""
    engine = RayEngine("ray://nowhere:1")  # never connected: the node is a stand-in
    asked: list[tuple[str, str]] = []

    async def call_one(method: str, env: Environment, *args: Any) -> float | None:
        asked.append((method, env.name))
        await asyncio.sleep(0.05)
        return 500.0

    engine._call_one = call_one  # type: ignore[method-assign]
    env = Environment(
        name="toy", entry_point="f", test_cases=[], timeout=30.0, reference_solution="ref"
    )

    async def go() -> list[float]:
        limits = await asyncio.gather(*(engine.time_limit(env) for _ in range(10)))
        limits.append(await engine.time_limit(env, 3.0))
        limits.append(await engine.time_limit(env.model_copy(update={"time_limit": 2.0})))
        return limits

    assert asyncio.run(go()) == [5.0] * 10 + [3.0, 2.0]
    assert asked == [("runtime", "toy")]
