"""Where a pooled run's CPU goes, by process: HumanEval's 164 canonical solutions through the pool,
``--passes`` times, and for each kind of process the CPU time and minor page faults per run.

Read from ``/proc`` before and after the passes (after a 32-run warm-up): each live process's own
CPU and faults (utime + stime, minflt), and what it reaped of its children (cutime + cstime,
cminflt), summed by the process's name: this process (the host), the pool's workers, their
zygotes, and what the zygotes reaped (every solution process and every init). The same total is
read from a ``cpuacct`` cgroup holding this process and all it starts, where one is writable
(``_common.CpuMeter``): the two should agree. Copy-on-write faults are most of what a fork costs
a run here (about 3 us each on the 2-core test machine), and unlike CPU time their count does not
move with the machine's load: compare trees by them first.

    python benchmarks/pool_breakdown.py [--passes 4]

Run it in a pid namespace of its own (``unshare --pid --fork --mount-proc``) so that ``/proc``
holds nothing else; compare two trees by running it with each tree's ``src`` on ``PYTHONPATH``,
in turns (``benchmarks/trees.py`` does that for the total).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections import defaultdict
from typing import Any

from _common import CpuMeter, print_table, proc_stat, write_json

from deepgym import load_suite
from deepgym.client import AsyncDeepGym
from deepgym.scheduling import TimeLimitPolicy

TICK = os.sysconf("SC_CLK_TCK")
ROLES = {"dg-worker": "worker", "dg-zygote": "zygote", "dg-init": "init", "dg-standby": "standby"}
"""Process names (``comm``) and the role each is reported under; anything else below the host
(its sandbox's ``bwrap``) is "other"."""


def snapshot() -> dict[int, tuple[str, int, int, int, int]]:
    """Every process in this pid namespace: name, own CPU ticks, its reaped children's CPU ticks,
    own minor faults, its reaped children's minor faults."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or (stat := proc_stat(int(entry))) is None:  # (None: ended)
            continue
        name, f = stat
        own, kids = int(f[11]) + int(f[12]), int(f[13]) + int(f[14])
        out[int(entry)] = (name, own, kids, int(f[7]), int(f[8]))
    return out


def breakdown(
    before: dict[int, tuple[str, int, int, int, int]],
    after: dict[int, tuple[str, int, int, int, int]],
    runs: int,
) -> dict[str, dict[str, float]]:
    """Per run, by role: ``cpu_ms`` and ``faults`` of the processes themselves, and of what they
    reaped (``reaped_cpu_ms``, ``reaped_faults``)."""
    me = os.getpid()
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for pid, (name, own, kids, flt, kflt) in after.items():
        role = "host" if pid == me else ROLES.get(name, "other")
        o0, k0, f0, kf0 = before[pid][1:] if pid in before else (0, 0, 0, 0)
        row = out[role]
        row["cpu_ms"] += (own - o0) * 1000 / TICK / runs
        row["reaped_cpu_ms"] += (kids - k0) * 1000 / TICK / runs
        row["faults"] += (flt - f0) / runs
        row["reaped_faults"] += (kflt - kf0) / runs
    return {role: dict(v) for role, v in out.items()}


async def measure(passes: int) -> dict[str, Any]:
    envs = load_suite("humaneval")
    answers = [e.reference_solution or "" for e in envs]
    meter = CpuMeter()
    dg = AsyncDeepGym(sandbox="pool", time_limits=TimeLimitPolicy(factor=None))
    try:
        await dg.run_batch(envs[:32], answers[:32], max_parallel=8)  # workers up, caches warm
        before, cpu0 = snapshot(), meter.read_ms()
        runs = passed = 0
        for _ in range(passes):
            batch = await dg.run_batch(envs, answers, max_parallel=8)
            runs += len(batch.results)
            passed += batch.passed
        cgroup_ms = (meter.read_ms() - cpu0) / runs
        after = snapshot()
    finally:
        await dg.close()
    roles = breakdown(before, after, runs)
    proc_ms = sum(r["cpu_ms"] + r["reaped_cpu_ms"] for r in roles.values())
    return {
        "runs": runs,
        "passed": passed,
        "meter": meter.mode,
        "cpu_ms_per_run": {"cgroup": cgroup_ms, "proc": proc_ms},
        "roles": roles,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=4, help="passes over the 164 problems")
    args = parser.parse_args()
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    data = asyncio.run(measure(args.passes))
    rows = [
        [
            role,
            f"{r['cpu_ms']:.3f}",
            f"{r['reaped_cpu_ms']:.3f}",
            f"{r['faults']:.1f}",
            f"{r['reaped_faults']:.1f}",
        ]
        for role, r in sorted(data["roles"].items())
        if any(r.values())
    ]
    print(f"{data['runs']} runs, {data['passed']} passed; per run:")
    print_table(rows, ["process", "CPU ms", "reaped CPU ms", "faults", "reaped faults"])
    total = data["cpu_ms_per_run"]
    cpu = f"{total['proc']:.3f} from /proc, {total['cgroup']:.3f} ({data['meter']})"
    print(f"total CPU ms per run: {cpu}")
    print(f"wrote {write_json('pool_breakdown', data)}")
    return 0 if data["passed"] == data["runs"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
