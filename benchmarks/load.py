"""Load test: 8 concurrent clients x 500 answers against one ``deepgym serve`` on 127.0.0.1.

Measured in one run, in interleaved blocks (a slow moment of the machine hits both modes alike):

- **latency**: each client scores its answers one ``run`` call at a time, in local mode (one
  in-process client with W pool workers) and in remote mode (8 remote clients, one server with the
  same W workers). With 8 clients on W workers most of a call's wall time is waiting for a worker,
  and the two modes queue differently, so the service's added latency is taken per call as wall
  time minus the run's own service time (queue + sandbox, which the result reports), remote minus
  local, quantile by quantile. Raw wall-time quantiles are reported too.
- **streamed batches**: each client sends its 500 answers as one ``run_batch`` streamed by group;
  every answer carries a unique id that its result echoes (the failing test's message), so a lost,
  duplicated or misplaced result is caught.

Loopback only, bounded (``--max-seconds``; the server is stopped whatever happens).

    python benchmarks/load.py [--clients 8] [--answers 500] [--workers N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import print_table, quantile, write_json

from deepgym import AsyncDeepGym, Environment, RunResult

ENV = Environment(
    name="load_echo",
    entry_point="f",
    test_cases=[{"args": [0], "expected": 0}, {"args": [1], "expected": "never"}],
    timeout=10.0,
    time_limit=5.0,
)
"""Case 0 passes; case 1 fails with ``expected 'never', got '<id>'``: a result names its answer."""

_ID = re.compile(r"got '(c\d+-\d+)'")


def answer(client: int, i: int) -> str:
    return f"def f(x):\n    return 0 if x == 0 else 'c{client}-{i}'\n"


def answer_id(result: RunResult) -> str | None:
    for case in result.cases:
        m = _ID.search(case.message)
        if m:
            return m.group(1)
    return None


def start_server(workers: int, store: Path, deadline: float) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "deepgym",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--workers",
        str(workers),
        "--concurrency",
        str(workers),
        "--store",
        str(store),
        "--grace",
        "5",
    ]
    env = {**os.environ, "DEEPGYM_TOKEN": ""}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", line)
    if not m or time.monotonic() > deadline:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    proc.stdout.readline()  # the console line
    return proc, m.group(1)


async def latency_block(
    clients: list[AsyncDeepGym],
    lo: int,
    hi: int,
    out: list[list[tuple[float, float]]],
    seen: list[list[str]],
) -> None:
    """Each client scores answers ``lo..hi-1`` one ``run`` at a time; all clients at once.
    ``out`` gets (wall ms, the result's service ms) per call."""

    async def one(c: int) -> None:
        for i in range(lo, hi):
            t = time.perf_counter()
            r = await clients[c].run(ENV, answer(c, i))
            out[c].append(((time.perf_counter() - t) * 1000.0, r.service.total_ms))
            seen[c].append(answer_id(r) or "?")

    await asyncio.gather(*(one(c) for c in range(len(clients))))


async def batch_round(clients: list[AsyncDeepGym], n: int, group_size: int) -> dict[str, Any]:
    """Every client streams its ``n`` answers as one batch; check each result's id and place."""
    lost = dup = misplaced = no_verdict = 0

    async def one(c: int) -> float:
        nonlocal lost, dup, misplaced, no_verdict
        t = time.perf_counter()
        groups = {}
        async for g, rs in clients[c].stream_groups(
            [ENV] * n,
            [answer(c, i) for i in range(n)],
            group_size=group_size,
            max_parallel=group_size * 2,
        ):
            if g in groups:
                dup += len(rs)
            groups[g] = rs
        flat = [r for g in sorted(groups) for r in groups[g]]
        lost += n - len(flat)
        ids = [answer_id(r) for r in flat]
        misplaced += sum(1 for i, x in enumerate(ids) if x is not None and x != f"c{c}-{i}")
        dup += len(ids) - len(set(ids))
        no_verdict += sum(1 for r in flat if not r.has_verdict)
        return (time.perf_counter() - t) * 1000.0

    walls = await asyncio.gather(*(one(c) for c in range(len(clients))))
    return {
        "lost": lost,
        "duplicated": dup,
        "misplaced": misplaced,
        "no_verdict": no_verdict,
        "wall_ms_max": max(walls),
    }


def _q(xs: list[float]) -> dict[str, float]:
    return {"p50": quantile(xs, 0.5), "p90": quantile(xs, 0.9), "p99": quantile(xs, 0.99)}


async def run(args: argparse.Namespace, url: str, deadline: float) -> dict[str, Any]:
    n_clients, n = args.clients, args.answers
    local = AsyncDeepGym(workers=args.workers)
    remotes = [AsyncDeepGym(mode="remote", url=url) for _ in range(n_clients)]
    shared_local = [local] * n_clients
    try:
        # warm both: workers started, the environment's files in place
        await latency_block(shared_local, 0, 1, [[] for _ in range(n_clients)], [[]] * n_clients)
        await latency_block(remotes, 0, 1, [[] for _ in range(n_clients)], [[]] * n_clients)
        lat: dict[str, list[list[tuple[float, float]]]] = {
            m: [[] for _ in range(n_clients)] for m in ("local", "remote")
        }
        seen: dict[str, list[list[str]]] = {
            m: [[] for _ in range(n_clients)] for m in ("local", "remote")
        }
        t0 = time.monotonic()
        for lo in range(0, n, args.block):
            hi = min(lo + args.block, n)
            for mode, cs in (("local", shared_local), ("remote", remotes)):
                await latency_block(cs, lo, hi, lat[mode], seen[mode])
            if time.monotonic() > deadline:
                raise SystemExit(f"over --max-seconds after {hi} answers per client")
        latency_s = time.monotonic() - t0
        checks = {}
        for mode in ("local", "remote"):
            wrong = sum(
                1 for c in range(n_clients) for i, x in enumerate(seen[mode][c]) if x != f"c{c}-{i}"
            )
            checks[mode] = {
                "results": sum(len(s) for s in seen[mode]),
                "wrong_or_missing_id": wrong,
            }
        batch = {}
        for mode, cs in (("local", shared_local), ("remote", remotes)):
            if time.monotonic() > deadline:
                raise SystemExit("over --max-seconds before the batch round")
            batch[mode] = await batch_round(cs, n, args.group_size)
        flat = {m: [x for xs in lat[m] for x in xs] for m in lat}
        wall = {m: _q([w for w, _ in flat[m]]) for m in flat}
        service = {m: _q([s for _, s in flat[m]]) for m in flat}
        outside = {m: _q([w - s for w, s in flat[m]]) for m in flat}
        return {
            "clients": n_clients,
            "answers_per_client": n,
            "workers": args.workers,
            "latency_phase_s": latency_s,
            "run_wall_ms": wall,
            "run_service_ms": service,
            "run_outside_service_ms": outside,
            "added_by_service_ms": {
                k: outside["remote"][k] - outside["local"][k] for k in wall["local"]
            },
            "run_checks": checks,
            "stream_batches": batch,
        }
    finally:
        await local.close()
        for r in remotes:
            await r.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--answers", type=int, default=500)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--block", type=int, default=25, help="answers per interleaved block")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    parser.add_argument("--quick", action="store_true", help="8 x 40: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.answers = 40
    deadline = time.monotonic() + args.max_seconds
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(args.workers, Path(tmp) / "runs.sqlite", deadline)
        try:
            result = asyncio.run(run(args, url, deadline))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    rows = []
    for key, label in (
        ("run_wall_ms", "wall"),
        ("run_service_ms", "service time"),
        ("run_outside_service_ms", "wall - service"),
    ):
        for mode in ("local", "remote"):
            q = result[key][mode]
            rows.append(
                [f"{label}, {mode}", f"{q['p50']:.2f}", f"{q['p90']:.2f}", f"{q['p99']:.2f}"]
            )
    added = result["added_by_service_ms"]
    rows.append(
        [
            "added by the service",
            f"{added['p50']:+.2f}",
            f"{added['p90']:+.2f}",
            f"{added['p99']:+.2f}",
        ]
    )
    print(
        f"{result['clients']} clients x {result['answers_per_client']} answers, "
        f"{result['workers']} workers; one run call at a time per client (ms):"
    )
    print_table(rows, ["per run call (ms)", "p50", "p90", "p99"])
    print()
    for mode in ("local", "remote"):
        b = result["stream_batches"][mode]
        c = result["run_checks"][mode]
        print(
            f"{mode}: run calls {c['results']} results, {c['wrong_or_missing_id']} wrong or "
            f"missing; streamed batches: lost {b['lost']}, duplicated {b['duplicated']}, "
            f"misplaced {b['misplaced']}, no verdict {b['no_verdict']}, "
            f"slowest client {b['wall_ms_max'] / 1000:.1f} s"
        )
    path = write_json("load", result)
    print(f"\nwritten: {path}")
    bad = sum(
        result["stream_batches"][m][k] for m in ("local", "remote") for k in ("lost", "duplicated")
    ) + sum(result["run_checks"][m]["wrong_or_missing_id"] for m in ("local", "remote"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
