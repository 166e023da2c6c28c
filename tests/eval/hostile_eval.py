"""A model eval against a hostile server, run in its own process so that its peak memory is its
own: ``python -m tests.eval.hostile_eval URL STORE`` evaluates ``PROBLEMS`` x 2 samples on a fake
backend with a small reply cap and deadline (``model``), then prints, as one JSON line, its
resident memory before the eval, its peak (the kernel's ``VmHWM`` of this process's own memory,
which ``exec`` started afresh: ``ru_maxrss`` would count the parent it was forked from) and what
the eval reported. Its address space is limited to 4 GiB, a safety net should a reply be read
whole."""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

from deepgym.eval.model import ChatModel, RetryPolicy
from deepgym.store import RunStore
from tests.eval.child_eval import PROBLEMS, client

SAMPLES = 2
CAP = 2**20
TIMEOUT_S = 1.0


def model(url: str) -> ChatModel:
    retry = RetryPolicy(attempts=2, base_s=0.001, max_s=0.01)
    return ChatModel(url, "m", concurrency=8, timeout=TIMEOUT_S, max_reply_bytes=CAP, retry=retry)


def memory_kib(field: str) -> int:
    """This process's ``VmRSS`` (resident now) or ``VmHWM`` (its peak), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def main(url: str, store_path: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))
    with RunStore(store_path) as store, client() as dg:
        dg.eval_model(PROBLEMS[3:], model(url), samples=1)  # all imported and started
        before = memory_kib("VmRSS")
        ev = dg.eval_model(PROBLEMS, model(url), samples=SAMPLES, store=store)
        peak = memory_kib("VmHWM")
    report = {
        "rss_before_kib": before,
        "peak_kib": peak,
        "run_id": ev.run_id,
        "judged": ev.metrics.judged,
        "generation_failed": ev.generation_failed,
        "by_cause": ev.generation_failures(),
        "errors": {s.problem: s.error for s in ev.samples if s.error},
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
