"""First touch in the shape a GRPO trainer produces: problems never seen before, cold against warm.

HumanEval's canonical answers, in steps the way a GRPO trainer submits them: a step takes
``--problems`` problems not seen before in this pass, ``--group`` answers each (the canonical
answer repeated), as one call of ``stream_groups`` with ``group_size=--group`` and
``max_parallel=8`` over one environment per answer; ``--steps`` steps make a pass. Every arm runs
the same pass on the default pool (``DeepGym()``) in a Python process of its own (this script in
its worker mode), so no in-memory cache leaks from one arm into another:

1. fresh cache: ``DEEPGYM_HOME`` a new empty folder; the pass.
2. persisted cache: one process runs the pass with ``DEEPGYM_HOME=D`` (filling whatever deepgym
   keeps there), then a new process with the same ``D`` runs it; the second one's pass.
3. warm: one process runs the pass twice; the second pass.

In each process the pool is started, and warmed with 16 runs of ``two_sum`` (not a HumanEval
problem), before anything is timed: a trainer starts its client once, and what this measures is
the cost of each problem's first touch (its staging, its derived time limit, its worker). Per
arm: runs/s over the pass, CPU ms per run (the worker process and every process it starts: a
cpuacct cgroup where one is writable, else the tree's times from ``/proc``) and the mean time
from a step's start to its first complete group. Ratios against the warm arm come from the same
round; ``--repeat`` runs the three arms again (in a rotated order) and reports medians.

Targets: fresh-cache cold >= 0.85x warm runs/s; persisted-cache cold >= 0.95x warm runs/s; the
mean time to the first complete group no more than 10% worse cold than warm.

    python benchmarks/grpo_shape.py [--steps 10] [--problems 16] [--group 8] [--repeat 1]
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

from _common import OUT_DIR, CpuMeter, print_table, write_json

MAX_PARALLEL = 8
WARMUP_RUNS = 16
TARGET_FRESH = 0.85  # fresh-cache cold runs/s >= this x warm
TARGET_PERSISTED = 0.95  # persisted-cache cold runs/s >= this x warm
TARGET_FIRST_GROUP = 1.10  # cold mean time to first group <= this x warm
ARMS = ("fresh cache", "persisted cache", "warm")


# -- the worker: one process, one or more passes -------------------------------------------


class _TreeCpu:
    """CPU of this process and its descendants from ``/proc`` (utime + stime, plus what
    reaped children left in cutime + cstime): the fallback when no cgroup is writable."""

    mode = "proc-tree"

    def read_ms(self) -> float:
        stats: dict[int, tuple[int, int]] = {}  # pid -> (ppid, ticks)
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            fields = raw[raw.rfind(b")") + 2 :].split()
            stats[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        ticks, todo = 0, [os.getpid()]
        while todo:
            pid = todo.pop()
            ticks += stats.get(pid, (0, 0))[1]
            todo += children.get(pid, [])
        return ticks * 1000.0 / os.sysconf("SC_CLK_TCK")


def _plan(steps: int, problems: int, group: int) -> list[tuple[list[Any], list[str]]]:
    """The pass: per step, one environment per answer and the answers (group-major)."""
    from deepgym import load_suite

    envs = load_suite("humaneval")
    need = steps * problems
    if need > len(envs):
        raise SystemExit(f"{steps} steps x {problems} problems > HumanEval's {len(envs)} problems")
    plan = []
    for s in range(steps):
        chosen = envs[s * problems : (s + 1) * problems]
        per_answer = [e for e in chosen for _ in range(group)]
        plan.append((per_answer, [e.reference_solution or "" for e in per_answer]))
    return plan


def _one_pass(
    dg: Any, plan: list[tuple[list[Any], list[str]]], group: int, meter: Any
) -> dict[str, Any]:
    firsts: list[float] = []
    step_s: list[float] = []
    runs = passed = 0
    failures: list[str] = []
    cpu0, t_pass = meter.read_ms(), time.perf_counter()
    for envs, answers in plan:
        t0 = time.perf_counter()
        first: float | None = None
        for _, results in dg.stream_groups(
            envs, answers, group_size=group, max_parallel=MAX_PARALLEL
        ):
            if first is None:
                first = time.perf_counter() - t0
            runs += len(results)
            passed += sum(r.passed for r in results)
            for r in results:
                if not r.passed and len(failures) < 5:  # a canonical answer should pass
                    cause = r.error or "; ".join(c.message for c in r.cases if not c.passed)
                    failures.append(f"{r.env_name} {r.error_type} {cause[:160]}")
        step_s.append(time.perf_counter() - t0)
        firsts.append(first if first is not None else 0.0)
    wall = time.perf_counter() - t_pass
    cpu = meter.read_ms() - cpu0
    return {
        "runs": runs,
        "passed": passed,
        "wall_s": wall,
        "runs_per_s": runs / wall,
        "cpu_ms_per_run": cpu / runs,
        "first_group_ms_mean": statistics.mean(firsts) * 1000.0,
        "first_group_ms": [x * 1000.0 for x in firsts],
        "step_ms_median": statistics.median(step_s) * 1000.0,
        "failures": failures,
    }


def worker(passes: int, steps: int, problems: int, group: int, result: Path) -> None:
    from deepgym import DeepGym, load_environment

    meter: Any = CpuMeter()
    if meter.mode != "cgroup-cpuacct":
        meter = _TreeCpu()
    plan = _plan(steps, problems, group)
    two_sum = load_environment("two_sum")
    out: dict[str, Any] = {"cpu_measured_by": meter.mode, "passes": []}
    try:
        with DeepGym() as dg:
            t0 = time.perf_counter()  # the pool's start and a warm-up: set-up, not timed
            dg.run_batch(
                [two_sum] * WARMUP_RUNS,
                [two_sum.reference_solution or ""] * WARMUP_RUNS,
                max_parallel=MAX_PARALLEL,
            )
            out["startup_s"] = time.perf_counter() - t0
            for _ in range(passes):
                out["passes"].append(_one_pass(dg, plan, group, meter))
    finally:
        group_dir = getattr(meter, "_group", None)
        if group_dir is not None:  # leave no cgroup behind (best effort: the pool has closed)
            try:
                (group_dir.parent.parent / "cgroup.procs").write_text(str(os.getpid()))
                group_dir.rmdir()
            except OSError:
                pass
    result.write_text(json.dumps(out))


# -- the comparison ------------------------------------------------------------------------


def _spawn(home: str, passes: int, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    result = scratch / f"worker-{time.monotonic_ns()}.json"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(passes), "--result"]
    cmd += [str(result), "--steps", str(args.steps), "--problems", str(args.problems)]
    cmd += ["--group", str(args.group)]
    subprocess.run(cmd, env={**os.environ, "DEEPGYM_HOME": home}, check=True)
    got: dict[str, Any] = json.loads(result.read_text())
    return got


def _listing(home: str) -> list[str]:
    """What a process left under ``DEEPGYM_HOME``: each file and its size."""
    root = Path(home)
    return [
        f"{p.relative_to(root)} ({p.stat().st_size} B)"
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def one_round(i: int, args: argparse.Namespace) -> dict[str, Any]:
    """The three arms once, in an order rotated by ``i``; each arm's reported pass."""
    order = list(ARMS[i % 3 :] + ARMS[: i % 3])
    got: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="grpo-shape-") as tmp:
        scratch = Path(tmp)
        for arm in order:
            home = tempfile.mkdtemp(prefix="home-", dir=tmp)
            if arm == "fresh cache":
                w = _spawn(home, 1, args, scratch)
                got[arm] = {**w["passes"][0], "startup_s": w["startup_s"]}
            elif arm == "persisted cache":
                fill = _spawn(home, 1, args, scratch)
                left = _listing(home)
                w = _spawn(home, 1, args, scratch)
                got[arm] = {
                    **w["passes"][0],
                    "startup_s": w["startup_s"],
                    "fill_pass": fill["passes"][0],
                    "home_after_fill": left,
                }
            else:
                w = _spawn(home, 2, args, scratch)
                got[arm] = {
                    **w["passes"][1],
                    "startup_s": w["startup_s"],
                    "first_pass": w["passes"][0],
                }
            got["cpu_measured_by"] = w["cpu_measured_by"]
            print(f"  round {i + 1}: {arm} ({got[arm]['runs_per_s']:.0f} runs/s)", file=sys.stderr)
    warm = got["warm"]
    got["ratios"] = {
        "fresh_runs_per_s": got["fresh cache"]["runs_per_s"] / warm["runs_per_s"],
        "persisted_runs_per_s": got["persisted cache"]["runs_per_s"] / warm["runs_per_s"],
        "fresh_first_group": got["fresh cache"]["first_group_ms_mean"]
        / warm["first_group_ms_mean"],
        "persisted_first_group": got["persisted cache"]["first_group_ms_mean"]
        / warm["first_group_ms_mean"],
        "fresh_cpu": got["fresh cache"]["cpu_ms_per_run"] / warm["cpu_ms_per_run"],
        "persisted_cpu": got["persisted cache"]["cpu_ms_per_run"] / warm["cpu_ms_per_run"],
    }
    return got


def _med(rounds: list[dict[str, Any]], *keys: str) -> float:
    vals = []
    for r in rounds:
        v: Any = r
        for k in keys:
            v = v[k]
        vals.append(float(v))
    return statistics.median(vals)


def _spread(rounds: list[dict[str, Any]], key: str) -> str:
    vals = [r["ratios"][key] for r in rounds]
    med = statistics.median(vals)
    return f"{med:.2f}x" if len(vals) == 1 else f"{med:.2f}x ({min(vals):.2f}-{max(vals):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per pass")
    parser.add_argument("--problems", type=int, default=16, help="new problems per step")
    parser.add_argument("--group", type=int, default=8, help="answers per problem (group size)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the three arms")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "grpo_shape.json")
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.problems, args.group, args.result)
        return 0

    runs = args.steps * args.problems * args.group
    print(
        f"a pass: {args.steps} steps x {args.problems} new problems x {args.group} answers = "
        f"{runs} runs, max_parallel {MAX_PARALLEL}; {args.repeat} round(s) of the three arms, "
        "each process its own",
        file=sys.stderr,
    )
    rounds = [one_round(i, args) for i in range(args.repeat)]

    rows = []
    for arm in ARMS:
        passed = sum(r[arm]["passed"] for r in rounds)
        total = sum(r[arm]["runs"] for r in rounds)
        rows.append(
            [
                arm,
                f"{_med(rounds, arm, 'runs_per_s'):.0f}",
                f"{_med(rounds, arm, 'cpu_ms_per_run'):.2f}",
                f"{_med(rounds, arm, 'first_group_ms_mean'):.1f}",
                f"{_med(rounds, arm, 'step_ms_median'):.0f}",
                f"{passed}/{total}",
            ]
        )
    print(
        f"\nGRPO-shaped pass ({runs} runs; medians over {args.repeat} round(s); "
        f"CPU from {rounds[0]['cpu_measured_by']})\n"
    )
    print_table(
        rows,
        ["arm", "runs/s", "CPU ms/run", "first group ms (mean)", "step ms (median)", "passed"],
    )
    for arm in ARMS:
        for r in rounds:
            for f in r[arm]["failures"]:
                print(f"  not passed ({arm}): {f}")

    fresh_rps = statistics.median(r["ratios"]["fresh_runs_per_s"] for r in rounds)
    pers_rps = statistics.median(r["ratios"]["persisted_runs_per_s"] for r in rounds)
    fresh_fg = statistics.median(r["ratios"]["fresh_first_group"] for r in rounds)
    pers_fg = statistics.median(r["ratios"]["persisted_first_group"] for r in rounds)
    met = {
        "fresh_runs_per_s": fresh_rps >= TARGET_FRESH,
        "persisted_runs_per_s": pers_rps >= TARGET_PERSISTED,
        "fresh_first_group": fresh_fg <= TARGET_FIRST_GROUP,
        "persisted_first_group": pers_fg <= TARGET_FIRST_GROUP,
    }

    def word(ok: bool) -> str:
        return "met" if ok else "missed"

    ratio_rows = [
        [
            "runs/s: fresh-cache cold / warm",
            _spread(rounds, "fresh_runs_per_s"),
            f">= {TARGET_FRESH:.2f}x",
            word(met["fresh_runs_per_s"]),
        ],
        [
            "runs/s: persisted-cache cold / warm",
            _spread(rounds, "persisted_runs_per_s"),
            f">= {TARGET_PERSISTED:.2f}x",
            word(met["persisted_runs_per_s"]),
        ],
        [
            "first group: fresh-cache cold / warm",
            _spread(rounds, "fresh_first_group"),
            f"<= {TARGET_FIRST_GROUP:.2f}x",
            word(met["fresh_first_group"]),
        ],
        [
            "first group: persisted-cache cold / warm",
            _spread(rounds, "persisted_first_group"),
            f"<= {TARGET_FIRST_GROUP:.2f}x",
            word(met["persisted_first_group"]),
        ],
        ["CPU/run: fresh-cache cold / warm", _spread(rounds, "fresh_cpu"), "-", "-"],
        ["CPU/run: persisted-cache cold / warm", _spread(rounds, "persisted_cpu"), "-", "-"],
    ]
    print("\nratios (each round's cold arm against its own warm arm; median over rounds)\n")
    print_table(ratio_rows, ["ratio", "value", "target", ""])
    left = rounds[-1]["persisted cache"]["home_after_fill"]
    print(
        "\nDEEPGYM_HOME after the persisted arm's first process: "
        + (", ".join(left) if left else "empty (nothing persisted)")
    )
    startup = statistics.median(r[a]["startup_s"] for r in rounds for a in ARMS)
    print(f"untimed set-up per process (pool start + {WARMUP_RUNS}-run warm-up): {startup:.2f} s")

    write_json(
        args.out,
        {
            "steps": args.steps,
            "problems_per_step": args.problems,
            "group_size": args.group,
            "max_parallel": MAX_PARALLEL,
            "runs_per_pass": runs,
            "repeat": args.repeat,
            "cpu_measured_by": rounds[0]["cpu_measured_by"],
            "rounds": rounds,
            "medians": {
                arm: {
                    k: _med(rounds, arm, k)
                    for k in ("runs_per_s", "cpu_ms_per_run", "first_group_ms_mean")
                }
                for arm in ARMS
            },
            "ratios": {
                "fresh_runs_per_s": fresh_rps,
                "persisted_runs_per_s": pers_rps,
                "fresh_first_group": fresh_fg,
                "persisted_first_group": pers_fg,
            },
            "targets": {
                "fresh_runs_per_s_min": TARGET_FRESH,
                "persisted_runs_per_s_min": TARGET_PERSISTED,
                "first_group_max": TARGET_FIRST_GROUP,
            },
            "target_met": met,
        },
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
