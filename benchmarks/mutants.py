"""Mutation testing of verifiers: what it costs, and what it tells weak tests from strong.

Sections, each with its baseline measured in the same run:

1. One built-in (``--env``, default ``coin_change``): ``mutation_test`` (every mutant as one
   pooled batch, the no-verdict retry, the survivors compared with the reference) against the
   same number of runs of the reference as one batch on the same client. Target: <= 60 s.
2. ``--qa``: ``qa --mutants`` over every shipped environment (the built-ins and the session
   environments): the checks and the mutation tests, timed apart, with each score.
3. ``--weak``: the deliberately weak environments of ``tests/envs/mutation_envs`` and their
   strong twins: each score, its survivors with a killing input and its undecided mutants.
   Target: every weak one below the threshold, every strong one at or above it.
4. ``--humaneval``: HumanEval's mutation scores before and after ``--augment`` (the survivors'
   killing inputs added as asserts, in a side file under a temporary ``$DEEPGYM_HOME``): the
   problems that gain tests, the cases added, the survivors the amplified tests kill.
5. ``--pairs N --before-src PATH``: ``deepgym qa --mutants --json --no-store`` timed as N
   interleaved pairs, the code at PATH (a checkout's ``src`` before this change) then this
   one's, each in a process of its own; wall time and CPU (a ``cpuacct`` cgroup holding every
   process each run starts, where one is writable). Target: after <= 2x before.

    python benchmarks/mutants.py [--env coin_change] [--qa] [--weak] [--humaneval]
                                 [--pairs N --before-src PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import CpuMeter, print_table, write_json

from deepgym import DeepGym, load_environment
from deepgym.cli.environments import shipped
from deepgym.envs.qa.augment import augment
from deepgym.envs.qa.check import check_environments
from deepgym.envs.qa.mutants import MUTATION_THRESHOLD, MutationReport, mutation_test
from deepgym.envs.registry import load_folders, load_suite

TARGET_S = 60.0
MUTATION_ENVS = Path(__file__).resolve().parents[1] / "tests" / "envs" / "mutation_envs"


def _score(m: MutationReport) -> str:
    return "-" if m.score is None else f"{m.score:.3f}"


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
    print(
        f"score {_score(report)}, {len(report.equivalents)} equivalent, {report.survived} "
        f"survived, {report.undecided} undecided; {mutants_s / baseline_s:.1f}x the baseline; "
        f"target <= {TARGET_S:.0f} s: " + ("met" if mutants_s <= TARGET_S else "MISSED")
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


def _each(envs: list[Any], dg: DeepGym) -> list[MutationReport]:
    return [mutation_test(e, dg) for e in envs]


def _table(reports: list[MutationReport]) -> None:
    rows = [
        [
            m.env,
            m.kind,
            str(m.mutants),
            str(len(m.equivalents)),
            str(m.survived),
            str(m.undecided),
            _score(m),
            f"{m.seconds:.1f}",
        ]
        for m in reports
    ]
    header = ["environment", "kind", "mutants", "equivalent", "survived", "undecided", "score", "s"]
    print_table(rows, header)


def qa() -> dict[str, Any]:
    envs = shipped()
    with DeepGym() as dg:
        t0 = time.perf_counter()
        checks = check_environments(envs, dg)
        checks_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reports = _each(envs, dg)
        mutants_s = time.perf_counter() - t0
    _table(reports)
    below = [m.env for m in reports if m.gated and not m.ok]
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


def weak() -> dict[str, Any]:
    envs = load_folders(MUTATION_ENVS)
    with DeepGym() as dg:
        reports = _each(envs, dg)
    _table(reports)
    rows = []
    met = True
    for m in reports:
        strong = m.env.startswith("strong_")
        held = m.ok if strong else not m.ok
        met = met and held
        named = sum(1 for s in m.survivors if s.killing_input is not None)
        rows.append([m.env, _score(m), f"{named}/{m.survived}", "held" if held else "MISSED"])
        for s in m.survivors[:2]:
            print(f"  {m.env}: {s.description}: {s.killing_input}")
    print_table(rows, ["environment", "score", "survivors with a killing input", "target"])
    print("weak below the threshold, strong at or above it: " + ("met" if met else "MISSED"))
    return {"met": met, "reports": [m.to_json() for m in reports]}


def humaneval() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as home:
        os.environ["DEEPGYM_HOME"] = home
        envs = load_suite("humaneval")
        with DeepGym() as dg:
            t0 = time.perf_counter()
            before = _each(envs, dg)
            before_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            done = [augment(e, m, dg) for e, m in zip(envs, before, strict=True)]
            augment_s = time.perf_counter() - t0
            gained = [a for a in done if a.added]
            after = _each(load_suite("humaneval", augmented=True), dg) if gained else before
    scored = [(b, a) for b, a in zip(before, after, strict=True) if b.score is not None]
    mean_b = statistics.fmean(b.score or 0.0 for b, _ in scored)
    mean_a = statistics.fmean(a.score or 0.0 for _, a in scored)
    figures = {
        "problems": len(envs),
        "mutants": sum(m.mutants for m in before),
        "seconds_before": before_s,
        "seconds_augment": augment_s,
        "mean_before": mean_b,
        "mean_after": mean_a,
        "min_before": min(b.score or 0.0 for b, _ in scored),
        "min_after": min(a.score or 0.0 for _, a in scored),
        "below_before": sum(1 for b, _ in scored if not b.ok),
        "below_after": sum(1 for _, a in scored if not a.ok),
        "survived_before": sum(m.survived for m in before),
        "undecided_before": sum(m.undecided for m in before),
        "equivalent_before": sum(len(m.equivalents) for m in before),
        "survived_after": sum(m.survived for m in after),
        "undecided_after": sum(m.undecided for m in after),
        "problems_gaining_tests": len(gained),
        "cases_added": sum(a.added for a in done),
        "cases_dropped": sum(a.dropped for a in done),
        "survivors_with_a_killing_input": sum(a.survivors for a in done),
        "survivors_killed_by_amplified_tests": sum(a.killed for a in done),
        "not_augmented": {a.env: a.why for a in done if not a.added and a.survivors},
    }
    for k, v in figures.items():
        if k != "not_augmented":
            print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
    return {
        **figures,
        "before": [m.to_json() for m in before],
        "after": [m.to_json() for m in after],
        "augmented": [a.to_json() for a in done],
    }


def _timed_qa(src: Path) -> tuple[float, float, int, list[dict[str, Any]]]:
    """One ``deepgym qa --mutants`` with ``src`` first on the path: wall s, CPU s, exit code,
    and each environment's mutation figures."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    meter = CpuMeter()
    cpu0 = meter.read_ms()
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "deepgym", "qa", "--mutants", "--json", "--no-store"],
        env=env,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    try:
        entries = json.loads(done.stdout)
    except ValueError:
        entries = []
    keys = ("mutants", "killed", "equivalent", "survived", "undecided", "no_verdict", "score")
    scores = [
        {"env": e["env"], "checks_ok": e["ok"], **{k: e["mutation"].get(k) for k in keys}}
        for e in entries
        if e.get("mutation")
    ]
    return wall, (meter.read_ms() - cpu0) / 1000.0, done.returncode, scores


def pairs(count: int, before_src: Path) -> dict[str, Any]:
    after_src = Path(__file__).resolve().parents[1] / "src"
    runs: dict[str, list[tuple[float, float, int]]] = {"before": [], "after": []}
    scores: dict[str, list[dict[str, Any]]] = {}
    for i in range(count):
        for arm, src in (("before", before_src), ("after", after_src)):
            wall, cpu, rc, scores[arm] = _timed_qa(src)
            runs[arm].append((wall, cpu, rc))
            print(f"pair {i + 1} {arm}: {wall:.1f} s wall, {cpu:.1f} s CPU, exit {rc}", flush=True)
    ratios = [a[0] / b[0] for a, b in zip(runs["after"], runs["before"], strict=True)]
    cpu_ratios = [a[1] / b[1] for a, b in zip(runs["after"], runs["before"], strict=True)]
    out = {
        "pairs": count,
        "before_wall_median": statistics.median(r[0] for r in runs["before"]),
        "after_wall_median": statistics.median(r[0] for r in runs["after"]),
        "wall_ratio_median": statistics.median(ratios),
        "wall_ratios": ratios,
        "before_cpu_median": statistics.median(r[1] for r in runs["before"]),
        "after_cpu_median": statistics.median(r[1] for r in runs["after"]),
        "cpu_ratio_median": statistics.median(cpu_ratios),
        "cpu_ratios": cpu_ratios,
        "cpu_mode": CpuMeter().mode,
        "runs": runs,
        "last_scores": scores,
    }
    print(
        f"qa --mutants, {count} interleaved pairs: before {out['before_wall_median']:.1f} s, "
        f"after {out['after_wall_median']:.1f} s (median ratio {out['wall_ratio_median']:.2f}x; "
        f"CPU {out['cpu_ratio_median']:.2f}x); target <= 2x: "
        + ("met" if out["wall_ratio_median"] <= 2.0 else "MISSED")
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("--qa", action="store_true", help="time qa --mutants over every one")
    parser.add_argument("--weak", action="store_true", help="the weak environments and twins")
    parser.add_argument("--humaneval", action="store_true", help="HumanEval before/after augment")
    parser.add_argument("--pairs", type=int, default=0, help="interleaved before/after pairs")
    parser.add_argument("--before-src", type=Path, default=None, help="the src before, for pairs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    data: dict[str, Any] = {"one": one(args.env)}
    if args.qa:
        data["qa"] = qa()
    if args.weak:
        data["weak"] = weak()
    if args.humaneval:
        data["humaneval"] = humaneval()
    if args.pairs:
        if args.before_src is None:
            parser.error("--pairs needs --before-src")
        data["pairs"] = pairs(args.pairs, args.before_src)
    print(f"wrote {write_json(args.out or 'mutants', json.loads(json.dumps(data, default=str)))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
