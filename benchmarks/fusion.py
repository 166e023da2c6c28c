"""Load test of SandboxFusion's ``POST /run_code`` on ``deepgym serve``: requests/s and the p99
the HTTP route adds over the same run through the Python API.

One ``deepgym serve`` on 127.0.0.1 (a subprocess, no token, no store, W pool workers) takes
``{"code": "print(1)", "language": "python"}`` from an httpx async client with N requests in
flight, as verl's reward sends them. The baseline is the same run through the Python API in this
process: ``AsyncDeepGym(workers=W).run_one`` of the environment ``server.fusion.run_code_env``
builds for that request, N in flight, with the time limit the route gives it. The two arms take
turns block by block (a slow moment of the machine hits both alike); every reply is checked
(HTTP 200, ``Success``, stdout ``1``; every result a verdict with that output: the
environment compares nothing).

Reported: requests/s of the route (replies over the route's blocks' wall time) against the API's
runs/s; latency quantiles of both at N in flight and the p99 overhead (route p99 less API p99);
the same one request at a time (nothing queued: the route's own cost). Targets (2 cores):
>= 300 requests/s, p99 overhead <= 50 ms at N in flight.

    python benchmarks/fusion.py [--in-flight 16] [--block 200] [--rounds 5] [--workers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from _common import print_table, quantile, write_json

from deepgym.client import AsyncDeepGym
from deepgym.server.fusion import RunCodeRequest, run_code_env
from deepgym.server.inputs import Limits

TARGET_RPS = 300.0
TARGET_P99_OVERHEAD_MS = 50.0
BODY = {"code": "print(1)", "language": "python"}


def start_server(workers: int) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "deepgym", "serve", "--host", "127.0.0.1", "--port", "0"]
    cmd += ["--workers", str(workers), "--no-store", "--grace", "5"]
    env = {**os.environ, "DEEPGYM_TOKEN": ""}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", line)
    if not m:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, m.group(1)


async def block(call: Callable[[], Awaitable[None]], n: int, in_flight: int) -> list[float]:
    """``n`` calls, ``in_flight`` at once: each one's wall milliseconds."""
    out: list[float] = []
    left = iter(range(n))

    async def lane() -> None:
        for _ in left:
            t = time.perf_counter()
            await call()
            out.append((time.perf_counter() - t) * 1000.0)

    await asyncio.gather(*(lane() for _ in range(in_flight)))
    return out


def _q(xs: list[float]) -> dict[str, float]:
    return {q: quantile(xs, v) for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}


async def measure(args: argparse.Namespace, url: str) -> dict[str, Any]:
    env = run_code_env(RunCodeRequest.model_validate(BODY), Limits())
    limits = httpx.Limits(max_connections=args.in_flight, max_keepalive_connections=args.in_flight)
    async with (
        httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as http,
        AsyncDeepGym(workers=args.workers) as dg,
    ):

        async def route() -> None:
            r = await http.post("/run_code", json=BODY)
            body = r.json()
            if r.status_code != 200 or body["status"] != "Success":
                raise SystemExit(f"/run_code answered {r.status_code}: {r.text[:300]}")
            if body["run_result"]["stdout"] != "1\n":
                raise SystemExit(f"/run_code printed {body['run_result']['stdout']!r}")

        async def api() -> None:
            result = await dg.run_one(env, BODY["code"], time_limit=env.timeout)
            out = result.cases[0].output if result.cases else None
            if not result.has_verdict or out is None or out.stdout != "1\n":
                raise SystemExit(f"the API run failed: {result.error_type} {result.error}")

        arms = {"route": route, "api": api}
        for fn in arms.values():  # warm: workers started, connections open
            await block(fn, args.in_flight * 2, args.in_flight)
        loaded: dict[str, list[float]] = {a: [] for a in arms}
        wall_s = dict.fromkeys(arms, 0.0)
        for r in range(args.rounds):
            for name in list(arms) if r % 2 == 0 else list(arms)[::-1]:
                t = time.perf_counter()
                loaded[name] += await block(arms[name], args.block, args.in_flight)
                wall_s[name] += time.perf_counter() - t
        single: dict[str, list[float]] = {a: [] for a in arms}
        for _ in range(args.single // 20):
            for name, fn in arms.items():
                single[name] += await block(fn, 20, 1)
    rate = {a: len(loaded[a]) / wall_s[a] for a in arms}
    q_loaded = {a: _q(loaded[a]) for a in arms}
    q_single = {a: _q(single[a]) for a in arms}
    return {
        "in_flight": args.in_flight,
        "workers": args.workers,
        "requests_per_arm": len(loaded["route"]),
        "single_per_arm": len(single["route"]),
        "per_s": rate,
        "loaded_ms": q_loaded,
        "single_ms": q_single,
        "p99_overhead_ms": q_loaded["route"]["p99"] - q_loaded["api"]["p99"],
        "single_p99_overhead_ms": q_single["route"]["p99"] - q_single["api"]["p99"],
        "single_p50_overhead_ms": q_single["route"]["p50"] - q_single["api"]["p50"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single", type=int, default=200, help="one-at-a-time calls per arm")
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1))
    args = parser.parse_args()

    proc, url = start_server(args.workers)
    try:
        data = asyncio.run(measure(args, url))
    finally:
        proc.terminate()
        proc.wait(30)
    rows = []
    for arm, label in (("route", "POST /run_code (HTTP)"), ("api", "AsyncDeepGym.run_one")):
        lq, sq = data["loaded_ms"][arm], data["single_ms"][arm]
        rate = f"{data['per_s'][arm]:.0f}"
        rows.append([label, rate, *(f"{q[k]:.1f}" for q in (lq, sq) for k in ("p50", "p99"))])
    n = data["in_flight"]
    header = ["arm", "per s", f"p50 ms @{n}", f"p99 ms @{n}", "p50 ms @1", "p99 ms @1"]
    print_table(rows, header)
    rps, over = data["per_s"]["route"], data["p99_overhead_ms"]
    print(
        f"\nrequests/s = {rps:.0f} (target >= {TARGET_RPS:.0f}: "
        f"{'met' if rps >= TARGET_RPS else 'missed'}); p99 overhead @{n} = {over:.1f} ms "
        f"(target <= {TARGET_P99_OVERHEAD_MS:.0f} ms: "
        f"{'met' if over <= TARGET_P99_OVERHEAD_MS else 'missed'}); one at a time: p50 "
        f"+{data['single_p50_overhead_ms']:.1f} ms, p99 +{data['single_p99_overhead_ms']:.1f} ms"
    )
    path = write_json(
        "fusion",
        {**data, "target_rps": TARGET_RPS, "target_p99_overhead_ms": TARGET_P99_OVERHEAD_MS},
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
