"""Runs admitted above the core count: answers that hold their sandbox for their whole limit and
right answers together, their verdicts and times.

``--held`` answers that hold their sandbox for their whole time limit and ``--right`` answers
that compute a little and return the right value, all sent at once, ``--rounds`` times, each
round's order shuffled, in two scenarios: the held answers loop forever (``endless``: they keep
the cores busy), or sleep past their limit (``sleeping``: the cores stay idle). Two pools take
turns round by round: (a) the pool as it is (two workers per core, growing while runs wait
behind held workers and the cores have room, up to three per core), (b) the same pool held to
its base size (``max_workers`` = ``workers``: runs above it wait in its queue). Time limits are
judged on the answer's CPU time: an endless loop is its 0 once it has used its limit, unless the
host holds it back past the backstop (``BACKSTOP`` times the limit on the clock: no verdict); a
sleeper is its 0 once the limit has passed on the clock; a right answer is judged 1.0 whenever
it runs.

Reported per scenario, arm and kind: the verdicts (scored 1, scored 0, no verdict: why), the
wall time from the round's start to each result (median, max), the time waited for a worker
(median), and the most runs in their sandboxes at once.

    unshare --pid --fork --mount-proc python benchmarks/admission.py [--held 6 --right 4]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import statistics
import time
from typing import Any

from _common import print_table, write_json

from deepgym import Environment, RunResult
from deepgym.client import AsyncDeepGym
from deepgym.judge.blame import BACKSTOP, host_cpus
from deepgym.sandbox.pool import PoolBackend
from deepgym.scheduling import TimeLimitPolicy

HELD = {
    "endless": "def add(a, b):\n    while True:\n        pass\n",
    "sleeping": "import time\ndef add(a, b):\n    time.sleep(3600)\n",
}
RIGHT = (
    "import time\n"
    "def add(a, b):\n"
    "    t = time.process_time()\n"
    "    while time.process_time() - t < 0.05:\n"  # 50 ms of work: a right answer computes too
    "        pass\n"
    "    return a + b\n"
)


def _env(limit: float) -> Environment:
    return Environment(
        name="admission-add",
        entry_point="add",
        test_cases=[{"args": [1, 2], "expected": 3}],
        timeout=limit * 2,
        case_timeout=limit,
    )


def _verdict(r: RunResult) -> str:
    if r.has_verdict:
        return f"scored {r.score:g}"
    cause = "held back" if "held back" in (r.error or "") else (r.error or "")[:40]
    return f"no verdict ({r.error_type}: {cause})"


class _Arm:
    def __init__(self, name: str, backend: PoolBackend) -> None:
        self.name = name
        self.backend = backend
        self.dg = AsyncDeepGym(backend=backend, time_limits=TimeLimitPolicy(factor=None))
        self.rows: list[dict[str, Any]] = []
        self.peak: dict[str, int] = {}

    async def round(self, env: Environment, scenario: str, answers: list[tuple[str, str]]) -> None:
        t0 = time.monotonic()

        async def one(kind: str, answer: str) -> None:
            r = await self.dg.run_one(env, answer)
            self.rows.append(
                {
                    "scenario": scenario,
                    "kind": kind,
                    "verdict": _verdict(r),
                    "done_s": time.monotonic() - t0,
                    "queue_s": r.service.queue_ms / 1000.0,
                    "cpu_s": (r.evidence.solution_cpu_ms or 0.0) / 1000.0,
                }
            )

        runs = asyncio.gather(*(one(k, a) for k, a in answers))
        while not runs.done():
            busy = sum(1 for w in self.backend._workers if w.busy_since is not None)
            self.peak[scenario] = max(self.peak.get(scenario, 0), busy)
            await asyncio.sleep(0.05)
        await runs

    def table(self, scenario: str) -> list[list[str]]:
        out = []
        for kind in ("held", "right"):
            rows = [r for r in self.rows if r["kind"] == kind and r["scenario"] == scenario]
            verdicts = collections.Counter(r["verdict"] for r in rows)
            done = [r["done_s"] for r in rows]
            out.append(
                [
                    scenario,
                    self.name,
                    kind,
                    str(len(rows)),
                    "; ".join(f"{n} {v}" for v, n in sorted(verdicts.items())),
                    f"{statistics.median(done):.1f} / {max(done):.1f}",
                    f"{statistics.median(r['queue_s'] for r in rows):.1f}",
                    str(self.peak[scenario]),
                ]
            )
        return out


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    env = _env(args.limit)
    grown = PoolBackend()
    held = PoolBackend(max_workers=grown.size)
    arms = [_Arm(f"a pool, {grown.size} to {grown.max_workers} workers", grown)]
    arms.append(_Arm(f"b pool held to {held.size} workers", held))
    for arm in arms:  # start each pool, and stage the environment
        assert (await arm.dg.run_one(env, RIGHT)).passed
    rng = random.Random(args.seed)
    for scenario, held_answer in HELD.items():
        for i in range(args.rounds):
            answers = [("held", held_answer)] * args.held + [("right", RIGHT)] * args.right
            rng.shuffle(answers)
            for arm in arms if i % 2 == 0 else arms[::-1]:
                await arm.round(env, scenario, answers)
    rows = [row for scenario in HELD for arm in arms for row in arm.table(scenario)]
    for arm in arms:
        await arm.dg.close()
    return {
        "cores": host_cpus(),
        "limit_s": args.limit,
        "backstop_s": BACKSTOP * args.limit,
        "held": args.held,
        "right": args.right,
        "rounds": args.rounds,
        "table": rows,
        "runs": {arm.name: arm.rows for arm in arms},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=6)
    parser.add_argument("--right", type=int, default=4)
    parser.add_argument("--limit", type=float, default=2.0, help="each call's limit, CPU seconds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    got = asyncio.run(_main(args))
    got["load_average"] = os.getloadavg()
    print(
        f"{got['cores']} cores, {args.held} held + {args.right} right answers at once, "
        f"{args.rounds} rounds, limit {args.limit:g} s of CPU time (backstop "
        f"{got['backstop_s']:g} s on the clock)"
    )
    header = ["held", "arm", "kind", "runs", "verdicts", "done s (median / max)", "waited s"]
    header.append("peak")
    print_table(got["table"], header)
    print(f"wrote {write_json('admission', got)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
