"""The pool's worker affinity: runs of an environment a worker ran lately go to that worker.

A pool worker keeps what a verifier builds for an environment (its ``process_cache``:
HumanEval's compiled tests, most of that verifier's work), and the pool hands a run to a worker
that ran its environment lately (``_Idle`` in ``deepgym/sandbox/pool.py``). This benchmark
scores HumanEval's canonical solutions through two pools side by side, (a) with affinity, the
default, and (b) strictly first come, first served, in two shapes of work:

- ``epochs``: the 164 problems in order, ``--epochs`` times over (training on a dataset for
  several epochs; every problem comes back after all the others);
- ``grpo``: GRPO steps, ``--group`` answers to each of ``--prompts`` problems per batch, every
  problem new to both pools when its batch comes (its answers are in flight together).

Each pool has its own workers, so neither warms the other's caches, and the two take turns batch
by batch. Reported: runs/s, CPU per run (the benchmark and everything it starts, from a cpuacct
cgroup where one is writable; against first come, first served in the last column) and the pool
workers' own CPU per run (the verifiers, where a warm cache saves work: in 10 ms ticks).

    python benchmarks/affinity.py [--epochs 4] [--group 8] [--prompts 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

from _common import CpuMeter, print_table, write_json

from deepgym import load_suite
from deepgym.client import AsyncDeepGym
from deepgym.sandbox.pool import PoolBackend
from deepgym.scheduling import TimeLimitPolicy

METER = CpuMeter()
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def _verifier_cpu_ms() -> float:
    """CPU of every pool worker process (``dg-worker``: the verifiers, where a warm cache
    saves work); only the arm whose batch runs has busy workers."""
    total = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    raw = f.read()
            except OSError:
                continue
            if raw[raw.index("(") + 1 : raw.rindex(")")] == "dg-worker":
                fields = raw[raw.rindex(")") + 2 :].split()
                total += int(fields[11]) + int(fields[12])
    return total * TICK_MS


ARMS = {"a affinity (default)": True, "b first come, first served": False}


async def _shape(batches: list[list[Any]], warm: list[Any]) -> dict[str, dict[str, float]]:
    """Both arms over ``batches`` (lists of environments), taking turns batch by batch."""
    clients: dict[str, AsyncDeepGym] = {}
    totals = {
        name: {"wall_s": 0.0, "cpu_ms": 0.0, "verifier_cpu_ms": 0.0, "runs": 0, "passed": 0}
        for name in ARMS
    }
    try:
        for name, affinity in ARMS.items():
            backend = PoolBackend(affinity=affinity)
            dg = AsyncDeepGym(time_limits=TimeLimitPolicy(factor=None), backend=backend)
            clients[name] = dg
            await dg.run_batch(warm, [e.reference_solution for e in warm])  # workers started
        for i, batch in enumerate(batches):
            answers = [e.reference_solution for e in batch]
            for name in list(ARMS) if i % 2 == 0 else list(reversed(ARMS)):
                v0 = _verifier_cpu_ms()
                c0, t0 = METER.read_ms(), time.perf_counter()
                result = await clients[name].run_batch(batch, answers)
                t = totals[name]
                t["wall_s"] += time.perf_counter() - t0
                t["cpu_ms"] += METER.read_ms() - c0
                t["verifier_cpu_ms"] += _verifier_cpu_ms() - v0
                t["runs"] += len(batch)
                t["passed"] += result.passed
            print(f"  batch {i + 1}/{len(batches)}", file=sys.stderr)
    finally:
        for dg in clients.values():
            await dg.close()
    return totals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4, help="passes over the 164 problems")
    ap.add_argument("--group", type=int, default=8, help="answers per prompt (GRPO's G)")
    ap.add_argument("--prompts", type=int, default=16, help="prompts per GRPO batch")
    args = ap.parse_args()
    if min(args.epochs, args.group, args.prompts) < 1:
        ap.error("--epochs, --group and --prompts must be positive")
    envs = load_suite("humaneval")
    warm, fresh = envs[-8:], envs[:-8]  # the GRPO shape never meets the warm-up's problems
    shapes = {
        "epochs": [envs] * args.epochs,
        "grpo": [
            [e for e in fresh[i : i + args.prompts] for _ in range(args.group)]
            for i in range(0, len(fresh), args.prompts)
        ],
    }
    results: dict[str, Any] = {}
    rows = []
    for shape, batches in shapes.items():
        totals = asyncio.run(_shape(batches, warm))
        base = totals["b first come, first served"]
        for name, t in totals.items():
            row = {
                "runs": t["runs"],
                "passed": t["passed"],
                "runs_per_s": t["runs"] / t["wall_s"],
                "cpu_ms_per_run": t["cpu_ms"] / t["runs"],
                "cpu_vs_first_come": (t["cpu_ms"] / t["runs"]) / (base["cpu_ms"] / base["runs"]),
                "verifier_cpu_ms_per_run": t["verifier_cpu_ms"] / t["runs"],
            }
            results.setdefault(shape, {})[name] = row
            rows.append(
                [
                    shape,
                    name,
                    f"{row['runs_per_s']:.0f}",
                    f"{row['cpu_ms_per_run']:.2f}",
                    f"{row['verifier_cpu_ms_per_run']:.2f}",
                    f"{row['passed']}/{row['runs']}",
                    f"{row['cpu_vs_first_come']:.2f}x",
                ]
            )
    print(
        f"HumanEval canonical solutions; epochs: {args.epochs} passes over the 164; grpo: "
        f"{args.group} answers per prompt, {args.prompts} prompts per batch; CPU from {METER.mode}"
    )
    print_table(
        rows, ["shape", "arm", "runs/s", "CPU ms/run", "verifier CPU ms/run", "passed", "CPU vs b"]
    )
    path = write_json(
        "affinity",
        {
            "epochs": args.epochs,
            "group": args.group,
            "prompts": args.prompts,
            "shapes": results,
            "cpu_measured_by": METER.mode,
        },
    )
    print(f"wrote {path}")
    ok = all(r["passed"] == r["runs"] for arms in results.values() for r in arms.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
