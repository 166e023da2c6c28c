"""One answer that never returns, in a batch of 128 (16 GRPO groups of 8): what it costs.

Arms, measured in one run on the same answers: no straggler (the baseline); a straggler with
the reference-derived time limit; a straggler with a fixed 30 s limit. For each, the time until
15 of 16 groups are scored (streaming hands a group over when it is complete; a barrier hands
nothing over until the whole batch is) and the time until the whole batch is scored.

Targets: with streaming, 15 of 16 groups within 2x the no-straggler batch time; the straggler's
stall bounded by k x reference runtime instead of the fixed cap (>= 10x less).

    python benchmarks/straggler.py [--env coin_change] [--fixed 30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from _common import print_table, write_json

from deepgym import load_environment
from deepgym.client import AsyncDeepGym

N, G = 128, 8


async def _arm(
    dg: AsyncDeepGym, env_name: str, answers: list[str], time_limit: float | None
) -> dict[str, float]:
    env = load_environment(env_name)
    t0 = time.monotonic()
    stamps: list[float] = []
    async for _, _results in dg.stream_groups(
        env, answers, group_size=G, max_parallel=8, time_limit=time_limit
    ):
        stamps.append(time.monotonic() - t0)
    return {
        "groups_15_streaming_s": stamps[14],
        "batch_s": stamps[-1],
        "groups_15_barrier_s": stamps[-1],
    }


async def main_async(env_name: str, fixed: float) -> dict[str, object]:
    env = load_environment(env_name)
    good = env.reference_solution or ""
    entry = env.entry_point or "solve"
    straggler = f"def {entry}(*args, **kwargs):\n    while True:\n        pass\n"
    clean = [good] * N
    with_straggler = list(clean)
    with_straggler[3] = straggler  # inside group 0: the worst place for a barrier
    async with AsyncDeepGym() as dg:
        derived = await dg.time_limit(env)
        await dg.run_batch(env, clean[:16])  # warm the workers
        arms = {
            "no straggler": await _arm(dg, env_name, clean, None),
            "straggler, reference limit": await _arm(dg, env_name, with_straggler, None),
            f"straggler, fixed {fixed:g} s limit": await _arm(dg, env_name, with_straggler, fixed),
        }
    return {"env": env_name, "derived_limit_s": derived, "fixed_limit_s": fixed, "arms": arms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("--fixed", type=float, default=30.0)
    args = parser.parse_args()
    data = asyncio.run(main_async(args.env, args.fixed))
    arms: dict[str, dict[str, float]] = data["arms"]  # type: ignore[assignment]
    base = arms["no straggler"]["batch_s"]
    rows = [
        [
            name,
            f"{a['groups_15_streaming_s']:.2f}",
            f"{a['groups_15_barrier_s']:.2f}",
            f"{a['batch_s']:.2f}",
            f"{a['batch_s'] - base:.2f}",
        ]
        for name, a in arms.items()
    ]
    print(f"env {data['env']}: derived time limit {data['derived_limit_s']:.2f} s\n")
    print_table(
        rows, ["arm", "15 groups, streaming s", "15 groups, barrier s", "batch s", "stall s"]
    )
    ref = arms["straggler, reference limit"]
    fixed = arms[next(k for k in arms if k.startswith("straggler, fixed"))]
    ratio_15 = ref["groups_15_streaming_s"] / base
    stall_ref = ref["batch_s"] - base
    stall_fixed = fixed["batch_s"] - base
    less = stall_fixed / stall_ref if stall_ref > 0 else float("inf")
    print(
        f"\n15 of 16 groups (streaming) / clean batch = {ratio_15:.2f}x (target <= 2x: "
        f"{'met' if ratio_15 <= 2 else 'missed'})"
    )
    print(
        f"stall, fixed / reference limit = {less:.1f}x (target >= 10x: "
        f"{'met' if less >= 10 else 'missed'})"
    )
    data.update({"ratio_15_groups_vs_clean": ratio_15, "stall_reduction": less})
    print(f"wrote {write_json('straggler', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
