"""Throughput of several source trees, interleaved: each tree's own ``benchmarks/throughput.py``
in turn, round by round (a slow moment of a shared machine hits every tree alike), then each
tree's median pool CPU per run and runs per second, and their ratio to the first tree's.

    .venv/bin/python benchmarks/trees.py --rounds 8 BEFORE AFTER [MORE ...]

A tree is a checkout of one commit (``git worktree add --detach DIR REV``). Each run uses the
tree's own ``src`` and ``benchmarks`` with this virtual environment's Python, in a pid namespace
of its own (``unshare``), and only the pool arm (``--skip b,c,d,e``). CPU per run is the figure
other load moves least: the benchmark counts it in a ``cpuacct`` group of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from _common import print_table, write_json

ARM = "a pool"


def one_run(tree: Path, repeat: int) -> dict[str, float]:
    """One ``throughput.py`` run of ``tree``'s pool arm: its runs/s and CPU ms per run."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{tree / 'benchmarks'}"}
    cmd = [sys.executable, "benchmarks/throughput.py", "--repeat", str(repeat), "--skip", "b,c,d,e"]
    unshare = shutil.which("unshare")
    if unshare:
        cmd = [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", *cmd]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: throughput.py exited {done.returncode}\n{done.stderr[-2000:]}")
    arm = json.loads((tree / "benchmarks/out/throughput.json").read_text())["arms"][ARM]
    return {"runs_per_s": arm["runs_per_s"], "cpu_ms_per_run": arm["cpu_ms_per_run"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="the first is the baseline")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2, help="throughput.py's passes per run")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.trees]
    for tree in trees:
        if not (tree / "benchmarks/throughput.py").is_file():
            parser.error(f"{tree}: no benchmarks/throughput.py (not a deepgym tree)")
    runs: dict[str, list[dict[str, float]]] = {str(t): [] for t in trees}
    for r in range(1, args.rounds + 1):
        for tree in trees:
            got = one_run(tree, args.repeat)
            runs[str(tree)].append(got)
            print(
                f"round {r}/{args.rounds} {tree.name}: {got['runs_per_s']:.0f} runs/s, "
                f"{got['cpu_ms_per_run']:.2f} CPU ms/run",
                flush=True,
            )
    medians = {
        t: {k: statistics.median(x[k] for x in rs) for k in ("runs_per_s", "cpu_ms_per_run")}
        for t, rs in runs.items()
    }
    base = medians[str(trees[0])]
    rows = [
        [
            Path(t).name,
            f"{m['runs_per_s']:.0f}",
            f"{m['runs_per_s'] / base['runs_per_s']:.2f}x",
            f"{m['cpu_ms_per_run']:.2f}",
            f"{m['cpu_ms_per_run'] / base['cpu_ms_per_run']:.2f}x",
        ]
        for t, m in medians.items()
    ]
    print()
    print_table(rows, ["tree", "runs/s", "vs first", "CPU ms/run", "vs first"])
    path = write_json("trees", {"rounds": args.rounds, "runs": runs, "medians": medians})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
