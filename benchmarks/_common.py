"""Shared helpers for the benchmark scripts: interleaved timing, medians, a table, JSON out."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parent / "out"


def interleaved(
    arms: dict[str, Callable[[], Any]], rounds: int, warmup: int = 3
) -> dict[str, list[float]]:
    """Wall milliseconds per call of each arm, arms interleaved round by round (fair on a noisy
    machine: a slow moment hits every arm alike)."""
    for fn in arms.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, fn in arms.items():
            t = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t) * 1000.0)
    return times


def timed_threads(parallel: int, jobs: list[Callable[[], bool]]) -> tuple[list[float], int]:
    """Run ``jobs`` on ``parallel`` threads: each one's latency (ms), and how many returned True."""

    def timed(job: Callable[[], bool]) -> tuple[float, bool]:
        t = time.perf_counter()
        ok = job()
        return (time.perf_counter() - t) * 1000.0, ok

    with ThreadPoolExecutor(parallel) as pool:
        out = list(pool.map(timed, jobs))
    return [t for t, _ in out], sum(ok for _, ok in out)


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def summarise(xs: list[float]) -> dict[str, float]:
    return {
        "median_ms": statistics.median(xs),
        "p90_ms": quantile(xs, 0.9),
        "p99_ms": quantile(xs, 0.99),
        "n": len(xs),
    }


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def proc_stat(pid: int) -> tuple[str, list[str]] | None:
    """Process ``pid``'s name (``comm``) and the fields of ``/proc/<pid>/stat`` after it (state
    first: ``fields[1]`` is the parent's pid), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    head, _, tail = stat.rpartition(")")  # (a name may hold spaces and parentheses)
    return head.partition("(")[2], tail.split()


def write_json(name: str | Path, data: dict[str, Any]) -> Path:
    """``data`` with the machine's facts, to ``OUT_DIR/<name>.json`` (or to ``name`` itself
    when it is a path)."""
    data = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
        },
        **data,
    }
    path = name if isinstance(name, Path) else OUT_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


class CpuMeter:
    """CPU time of this process and every process it starts (workers and sandboxes included).

    Uses a cpuacct cgroup when one is writable (exact, immune to other load on the machine);
    otherwise the machine-wide busy time from /proc/stat (run on a quiet machine then).
    """

    def __init__(self) -> None:
        self.mode = "proc-stat"
        self._group: Path | None = None
        base = Path("/sys/fs/cgroup/cpuacct")
        if (base / "cgroup.procs").is_file():
            group = base / "deepgym-bench" / str(os.getpid())
            try:
                group.mkdir(parents=True, exist_ok=True)
                (group / "cgroup.procs").write_text(str(os.getpid()))
                self._group = group
                self.mode = "cgroup-cpuacct"
            except OSError:
                self._group = None

    def read_ms(self) -> float:
        if self._group is not None:
            return int((self._group / "cpuacct.usage").read_text()) / 1e6
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        busy = sum(fields[:8]) - fields[3] - fields[4]
        return busy * 1000.0 / os.sysconf("SC_CLK_TCK")
