"""Scale-out on Ray against the local pool, on the same machine, in one run.

A local Ray cluster of ``--nodes`` nodes on this host (``ray.cluster_utils.Cluster``), each
declaring ``--cpus`` CPUs, so that the cluster's pools have as many workers as the local pool
(two per CPU): the ratio of their throughputs is Ray's cost per core. HumanEval's canonical
answers, ``--group`` per problem (the GRPO shape, one group a chunk). Reported, medians over
``--repeat`` passes taken in turns:

1. answers per second through Ray against the local pool (target >= 0.9x);
2. the latency Ray adds per group: one group of ``--group`` at a time through each, p50 and p99
   of the difference;
3. a chunk-size sweep without groups (1, 8, 32, 128 answers per call): runs/s and the driver's
   CPU per 1,000 answers;
4. the driver's CPU per 1,000 answers in the GRPO shape;
5. recovery after a node is removed mid-batch: how long after the removal the batch ended,
   against the same batch with no removal, and how many chunks were sent again.

    python benchmarks/ray_scale.py [--nodes 2] [--cpus 1] [--group 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from typing import Any

from _common import print_table, quantile, write_json

TARGET_RATIO = 0.9


def _answers(group: int) -> tuple[list[Any], list[str]]:
    from deepgym.envs.registry import load_suite

    envs, answers = [], []
    for e in load_suite("humaneval"):
        envs += [e] * group
        answers += [e.reference_solution or ""] * group
    return envs, answers


async def _pass(
    dg: Any, envs: list[Any], answers: list[str], group: int | None
) -> dict[str, float]:
    t0, c0 = time.monotonic(), time.process_time()
    batch = await dg.run_batch(envs, answers, group_size=group, max_parallel=64)
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    assert all(r.passed for r in batch.results), "a canonical answer did not pass"
    return {"runs_s": len(answers) / wall, "driver_cpu_ms_per_1000": cpu * 1e6 / len(answers)}


async def _group_latency(dg: Any, envs: list[Any], answers: list[str], group: int) -> list[float]:
    out = []
    for start in range(0, min(len(answers), 40 * group), group):
        t0 = time.monotonic()
        await dg.run_batch(envs[start : start + group], answers[start : start + group])
        out.append((time.monotonic() - t0) * 1000.0)
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from deepgym.client import AsyncDeepGym
    from deepgym.engines.ray import RayEngine

    logging.getLogger("deepgym.ray").setLevel(logging.ERROR)
    envs, answers = _answers(args.group)
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": args.cpus, "include_dashboard": False}
    )
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=args.cpus)
    cluster.wait_for_nodes()
    out: dict[str, Any] = {"nodes": args.nodes, "cpus_per_node": args.cpus, "group": args.group}
    try:
        local = AsyncDeepGym(workers=2 * args.cpus * args.nodes)
        remote = AsyncDeepGym(engine=RayEngine(cluster.address))
        async with local, remote:
            await local.run_batch(envs[:64], answers[:64])  # warm: pools started, caches built
            await remote.run_batch(envs[:64], answers[:64], group_size=args.group)
            rounds: dict[str, list[dict[str, float]]] = {"local": [], "ray": []}
            for i in range(args.repeat):
                for name in ("local", "ray") if i % 2 == 0 else ("ray", "local"):
                    dg = local if name == "local" else remote
                    rounds[name].append(await _pass(dg, envs, answers, args.group))
                    print(f"  pass {i + 1}: {name} {rounds[name][-1]['runs_s']:.0f} runs/s")
            ratios = [
                r["runs_s"] / lo["runs_s"]
                for r, lo in zip(rounds["ray"], rounds["local"], strict=True)
            ]
            out["grpo"] = {
                "local_runs_s": statistics.median(r["runs_s"] for r in rounds["local"]),
                "ray_runs_s": statistics.median(r["runs_s"] for r in rounds["ray"]),
                "ratio": statistics.median(ratios),
                "ratios": ratios,
                "ray_driver_cpu_ms_per_1000": statistics.median(
                    r["driver_cpu_ms_per_1000"] for r in rounds["ray"]
                ),
                "local_driver_cpu_ms_per_1000": statistics.median(
                    r["driver_cpu_ms_per_1000"] for r in rounds["local"]
                ),
            }
            lat_local = await _group_latency(local, envs, answers, args.group)
            lat_ray = await _group_latency(remote, envs, answers, args.group)
            added = sorted(r - lo for r, lo in zip(lat_ray, lat_local, strict=True))
            out["added_latency_ms"] = {
                "p50": quantile(added, 0.5),
                "p99": quantile(added, 0.99),
                "local_p50": quantile(sorted(lat_local), 0.5),
                "ray_p50": quantile(sorted(lat_ray), 0.5),
            }
        sweep = []
        for size in (1, 8, 32, 128):
            async with AsyncDeepGym(engine=RayEngine(cluster.address, chunk_size=size)) as dg:
                await dg.run_batch(envs[:64], answers[:64])
                got = await _pass(dg, envs, answers, None)
            sweep.append({"chunk_size": size, **got})
            print(f"  chunk {size}: {got['runs_s']:.0f} runs/s")
        out["chunk_sweep"] = sweep
        out["recovery"] = await _recovery(cluster, envs, answers, args)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    return out


async def _recovery(
    cluster: Any, envs: list[Any], answers: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The same batch twice on a cluster with one extra node: once whole, once with that node
    removed a second in."""
    from deepgym.client import AsyncDeepGym
    from deepgym.engines.ray import RayEngine

    out: dict[str, Any] = {}
    for removed in (False, True):
        extra = cluster.add_node(num_cpus=args.cpus)
        cluster.wait_for_nodes()
        engine = RayEngine(cluster.address, health_s=1.0)
        async with AsyncDeepGym(engine=engine) as dg:
            await dg.run_batch(envs[:64], answers[:64], group_size=args.group)
            t0 = time.monotonic()
            batch = asyncio.ensure_future(dg.run_batch(envs, answers, group_size=args.group))
            t_removed = None
            if removed:
                await asyncio.sleep(1.0)
                t_removed = time.monotonic()
                await asyncio.to_thread(cluster.remove_node, extra)
            results = (await batch).results
            t1 = time.monotonic()
        if not removed:
            cluster.remove_node(extra)
        key = "removed" if removed else "whole"
        out[key] = {
            "batch_s": t1 - t0,
            "after_removal_s": (t1 - t_removed) if t_removed is not None else None,
            "resent_chunks": engine.resent,
            "without_verdict": sum(not r.has_verdict for r in results),
            "judged_0": sum(r.has_verdict and not r.passed for r in results),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=1, help="CPUs each node declares")
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    out = asyncio.run(main_async(args))
    g = out["grpo"]
    print()
    print_table(
        [
            ["answers/s, local pool", f"{g['local_runs_s']:.0f}", "-"],
            ["answers/s, Ray", f"{g['ray_runs_s']:.0f}", "-"],
            [
                "Ray / local, per core",
                f"{g['ratio']:.2f}x ({min(g['ratios']):.2f}-{max(g['ratios']):.2f})",
                f">= {TARGET_RATIO}x {'met' if g['ratio'] >= TARGET_RATIO else 'missed'}",
            ],
            ["driver CPU ms / 1000 answers, Ray", f"{g['ray_driver_cpu_ms_per_1000']:.0f}", "-"],
            [
                "driver CPU ms / 1000 answers, local",
                f"{g['local_driver_cpu_ms_per_1000']:.0f}",
                "-",
            ],
            [
                "added latency per group p50 / p99 ms",
                f"{out['added_latency_ms']['p50']:.1f} / {out['added_latency_ms']['p99']:.1f}",
                "-",
            ],
        ],
        ["measure", "value", "target"],
    )
    print()
    print_table(
        [
            [str(s["chunk_size"]), f"{s['runs_s']:.0f}", f"{s['driver_cpu_ms_per_1000']:.0f}"]
            for s in out["chunk_sweep"]
        ],
        ["chunk size", "runs/s", "driver CPU ms / 1000"],
    )
    rec = out["recovery"]
    print()
    print(
        f"recovery: whole batch {rec['whole']['batch_s']:.1f} s; with a node removed 1 s in, "
        f"{rec['removed']['batch_s']:.1f} s ({rec['removed']['after_removal_s']:.1f} s after the "
        f"removal), {rec['removed']['resent_chunks']} chunk(s) sent again, "
        f"{rec['removed']['without_verdict']} without a verdict, "
        f"{rec['removed']['judged_0']} judged 0"
    )
    path = write_json("ray_scale", out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
