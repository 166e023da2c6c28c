"""Per-run overhead of the strict sandbox, against the floor it is built on.

Arms, interleaved in one run: ``python -I -S -c pass``; bare ``bwrap ... python -I -S -c pass``
(the floor: one sandbox, one interpreter); and ``DeepGym(sandbox='strict').run`` of a trivial
correct answer (two sandboxes, two interpreters, the judge). Target: strict <= 3x the floor.

    python benchmarks/overhead.py [--rounds 60]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from _common import interleaved, print_table, summarise, write_json

from deepgym import DeepGym, Environment
from deepgym.sandbox.host import SANDBOX_PYTHON, bare_sandbox

TARGET_RATIO = 3.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()

    env = Environment(
        name="add",
        entry_point="add",
        test_cases=[{"args": [1, 2], "expected": 3}, {"args": [2, 2], "expected": 4}],
    )
    answer = "def add(a, b):\n    return a + b\n"
    bwrap = bare_sandbox()
    python = [SANDBOX_PYTHON, "-I", "-S", "-c", "pass"]
    with DeepGym(sandbox="strict") as dg:

        def strict() -> None:
            r = dg.run(env, answer)
            if not r.passed:
                raise SystemExit(f"the trivial answer failed: {r.error}")

        times = interleaved(
            {
                "python -I -S -c pass": lambda: subprocess.run(python, check=True),
                "bwrap + python (floor)": lambda: subprocess.run([*bwrap, *python], check=True),
                "deepgym strict run": strict,
            },
            rounds=args.rounds,
        )
    stats = {name: summarise(xs) for name, xs in times.items()}
    floor = stats["bwrap + python (floor)"]["median_ms"]
    rows = [
        [name, f"{s['median_ms']:.1f}", f"{s['p90_ms']:.1f}", f"{s['median_ms'] / floor:.2f}x"]
        for name, s in stats.items()
    ]
    print_table(rows, ["arm", "median ms", "p90 ms", "vs floor"])
    ratio = stats["deepgym strict run"]["median_ms"] / floor
    verdict = "met" if ratio <= TARGET_RATIO else "missed"
    print(f"\nstrict / floor = {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x: {verdict})")
    path = write_json(
        "overhead",
        {"rounds": args.rounds, "arms": stats, "ratio": ratio, "target_ratio": TARGET_RATIO},
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
