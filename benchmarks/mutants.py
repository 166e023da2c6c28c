"""Mutation testing of verifiers: what one built-in's mutation test costs, and the whole qa.

Sections, with the baseline measured in the same run:

1. One built-in (``--env``, default ``coin_change``: a typical function task, 43 mutants):
   ``mutation_test`` (every mutant as one pooled batch, the no-verdict retry, the survivors'
   comparison with the reference on generated inputs) against the same number of runs of the
   reference as one batch on the same client. Target: <= 60 s on 2 cores.
2. With ``--qa``: ``deepgym qa --mutants`` over every shipped environment (the 39 built-ins and
   the session environments): the checks and the mutation tests, timed apart, with each
   environment's mutation score.

    python benchmarks/mutants.py [--env coin_change] [--qa] [--out PATH]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _common import print_table, write_json

from deepgym import DeepGym, load_environment
from deepgym.cli.environments import shipped
from deepgym.envs.qa.check import check_environments
from deepgym.envs.qa.mutants import MUTATION_THRESHOLD, mutation_test, mutation_tests

TARGET_S = 60.0


def one(env_name: str) -> dict[str, Any]:
    env = load_environment(env_name)
    with DeepGym() as dg:
        dg.run(env, env.reference_solution or "")  # the pool started and the limit measured
        t0 = time.perf_counter()
        report = mutation_test(env, dg)
        mutants_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        dg.run_batch(env, [env.reference_solution or ""] * report.mutants)
        baseline_s = time.perf_counter() - t0
    print_table(
        [
            [f"mutation_test({env_name})", str(report.mutants), f"{mutants_s:.2f}"],
            ["baseline: as many reference runs", str(report.mutants), f"{baseline_s:.2f}"],
        ],
        ["what", "runs", "seconds"],
    )
    score = "-" if report.score is None else f"{report.score:.3f}"
    print(
        f"score {score}, {len(report.equivalents)} equivalent, {report.survived} survived; "
        f"{mutants_s / baseline_s:.1f}x the baseline; target <= {TARGET_S:.0f} s: "
        + ("met" if mutants_s <= TARGET_S else "MISSED")
    )
    return {
        "env": env_name,
        "mutants": report.mutants,
        "seconds": mutants_s,
        "baseline_seconds": baseline_s,
        "target_seconds": TARGET_S,
        "met": mutants_s <= TARGET_S,
        "report": report.to_json(),
    }


def qa() -> dict[str, Any]:
    envs = shipped()
    with DeepGym() as dg:
        t0 = time.perf_counter()
        checks = check_environments(envs, dg)
        checks_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reports = mutation_tests(envs, dg)
        mutants_s = time.perf_counter() - t0
    rows = [
        [
            m.env,
            m.kind,
            str(m.mutants),
            str(len(m.equivalents)),
            "-" if m.score is None else f"{m.score:.3f}",
            f"{m.seconds:.1f}",
        ]
        for m in reports
    ]
    print_table(rows, ["environment", "kind", "mutants", "equivalent", "score", "seconds"])
    below = [m.env for m in reports if not m.ok]
    print(
        f"qa --mutants over {len(envs)} environments: checks {checks_s:.1f} s, mutants "
        f"{mutants_s:.1f} s, total {checks_s + mutants_s:.1f} s; below {MUTATION_THRESHOLD}: "
        + (", ".join(below) or "none")
    )
    return {
        "environments": len(envs),
        "checks_seconds": checks_s,
        "mutants_seconds": mutants_s,
        "checks_ok": sum(c.ok for c in checks),
        "below_threshold": below,
        "reports": [m.to_json() for m in reports],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("--qa", action="store_true", help="also time qa --mutants over all")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    data: dict[str, Any] = {"one": one(args.env)}
    if args.qa:
        data["qa"] = qa()
    print(f"wrote {write_json(args.out or 'mutants', data)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
