"""Load test of SandboxFusion's ``POST /run_code`` on ``deepgym serve``: requests/s against the
same runs through the Python API, and what the HTTP route adds to a request's latency.

One ``deepgym serve`` on 127.0.0.1 (a subprocess, no token, no store, W pool workers) takes
``{"code": "print(1)", "language": "python"}`` from an httpx async client with N requests in
flight, as verl's reward sends them. The baseline is the same run through the Python API in this
process: ``AsyncDeepGym(workers=W).run_one`` of the environment ``server.fusion.run_code_env``
builds for that request, N in flight, with the time limit the route gives it. The two arms take
turns block by block (a slow moment of the machine hits both alike); every reply is checked
(HTTP 200, ``Success``, stdout ``1``; every result a verdict with that output: the
environment compares nothing).

``--baseline-tree PATH`` adds a third arm: a second ``deepgym serve`` run from another source tree
(its ``src`` first on ``PYTHONPATH``: the code before a change), taking turns with the other two,
so that a change's effect on the route is measured in the same run as the route itself.

The load generator is httpx's async client (``--client httpx``, as a Python trainer would post),
or a minimal HTTP/1.1 client on asyncio streams (``--client raw``: keep-alive, one request per
connection at a time, about a tenth of httpx's CPU), so that the generator's own CPU, which
shares the 2 cores with the service here and is a trainer's elsewhere, weighs less on the route.

CPU: the benchmark's process and everything it starts (the services, every worker and sandbox)
are metered together (``_common.CpuMeter``: a cpuacct cgroup, exact under other load); each
block's CPU over its requests is that arm's CPU a request, and the generator's share of it is
this process's own CPU during the route's blocks (the API's pool is idle then). On a loaded
machine that figure, not the requests/s, says what the route costs: the ratio of the API's CPU
a run to the route's CPU a request is the throughput ratio 2 saturated cores would give.

Reported: requests/s of the route (replies over the route's blocks' wall time) against the API's
runs/s, and their ratio; CPU ms a request of each arm (and of the load generator); latency
quantiles of both at N in flight and the p99 overhead (route p99 less API p99); the same one
request at a time (nothing queued: the route's own cost). Targets (2 cores): the route at >= 0.8
of the API's throughput at 16 in flight, and <= 3 ms added at the p50 one request at a time
(issue 43); >= 300 requests/s and a p99 overhead <= 50 ms at N in flight (the first load
test's).

    python benchmarks/fusion.py [--in-flight 16] [--block 200] [--rounds 5] [--workers 4]
                                [--baseline-tree /path/to/other/checkout] [--client raw]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from _common import CpuMeter, print_table, quantile, write_json

from deepgym.client import AsyncDeepGym
from deepgym.server.fusion import RunCodeRequest, run_code_env
from deepgym.server.inputs import Limits

TARGET_RPS = 300.0
TARGET_P99_OVERHEAD_MS = 50.0
TARGET_RATIO = 0.8
TARGET_SINGLE_P50_OVERHEAD_MS = 3.0
BODY = {"code": "print(1)", "language": "python"}
METER = CpuMeter()


class RawClient:
    """A minimal HTTP/1.1 client: one keep-alive connection per lane, ``POST`` with a JSON body,
    the reply's status and JSON body (``Content-Length`` framed, as uvicorn sends it)."""

    def __init__(self, url: str) -> None:
        m = re.match(r"http://([^:/]+):(\d+)$", url)
        if not m:
            raise SystemExit(f"not an http://HOST:PORT url: {url}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes) -> tuple[int, Any]:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = next(
            int(v)
            for k, _, v in (h.partition(":") for h in lines[1:])
            if k.lower() == "content-length"
        )
        data = json.loads(await reader.readexactly(length))
        self.idle.append(conn)
        return status, data

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


def start_server(workers: int, tree: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """``deepgym serve`` on a free loopback port: this tree's, or ``tree``'s (its ``src``)."""
    cmd = [sys.executable, "-m", "deepgym", "serve", "--host", "127.0.0.1", "--port", "0"]
    cmd += ["--workers", str(workers), "--no-store", "--grace", "5"]
    env = {**os.environ, "DEEPGYM_TOKEN": ""}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(tree, "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
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


async def measure(args: argparse.Namespace, urls: dict[str, str]) -> dict[str, Any]:
    env = run_code_env(RunCodeRequest.model_validate(BODY), Limits())
    limits = httpx.Limits(max_connections=args.in_flight, max_keepalive_connections=args.in_flight)
    async with (
        httpx.AsyncClient(timeout=60.0, limits=limits) as http,
        AsyncDeepGym(workers=args.workers) as dg,
    ):
        raws: list[RawClient] = []
        payload = json.dumps(BODY).encode()

        def poster(url: str) -> Callable[[], Awaitable[None]]:
            raw = RawClient(url)
            raws.append(raw)

            async def route() -> None:
                if args.client == "raw":
                    status, body = await raw.post("/run_code", payload)
                else:
                    r = await http.post(f"{url}/run_code", json=BODY)
                    status, body = r.status_code, r.json()
                if status != 200 or body["status"] != "Success":
                    raise SystemExit(f"/run_code answered {status}: {str(body)[:300]}")
                if body["run_result"]["stdout"] != "1\n":
                    raise SystemExit(f"/run_code printed {body['run_result']['stdout']!r}")

            return route

        async def api() -> None:
            result = await dg.run_one(env, BODY["code"], time_limit=env.timeout)
            out = result.cases[0].output if result.cases else None
            if not result.has_verdict or out is None or out.stdout != "1\n":
                raise SystemExit(f"the API run failed: {result.error_type} {result.error}")

        arms = {name: poster(url) for name, url in urls.items()}
        arms["api"] = api
        for fn in arms.values():  # warm: workers started, connections open
            await block(fn, args.in_flight * 2, args.in_flight)
        loaded: dict[str, list[float]] = {a: [] for a in arms}
        wall_s = dict.fromkeys(arms, 0.0)
        cpu_ms = dict.fromkeys(arms, 0.0)
        own_ms = dict.fromkeys(arms, 0.0)  # this process's: the load generator's, on a route
        for r in range(args.rounds):
            for name in list(arms)[r % len(arms) :] + list(arms)[: r % len(arms)]:
                t, c, o = time.perf_counter(), METER.read_ms(), time.process_time()
                loaded[name] += await block(arms[name], args.block, args.in_flight)
                wall_s[name] += time.perf_counter() - t
                cpu_ms[name] += METER.read_ms() - c
                own_ms[name] += (time.process_time() - o) * 1000.0
        single: dict[str, list[float]] = {a: [] for a in arms}
        for _ in range(args.single // 20):
            for name, fn in arms.items():
                single[name] += await block(fn, 20, 1)
        for raw in raws:
            raw.close()
    rate = {a: len(loaded[a]) / wall_s[a] for a in arms}
    cpu = {a: cpu_ms[a] / len(loaded[a]) for a in arms}
    generator = {a: own_ms[a] / len(loaded[a]) for a in arms if a != "api"}
    q_loaded = {a: _q(loaded[a]) for a in arms}
    q_single = {a: _q(single[a]) for a in arms}
    return {
        "in_flight": args.in_flight,
        "workers": args.workers,
        "baseline_tree": args.baseline_tree,
        "requests_per_arm": len(loaded["route"]),
        "single_per_arm": len(single["route"]),
        "per_s": rate,
        "ratio_to_api": {a: rate[a] / rate["api"] for a in arms if a != "api"},
        "client": args.client,
        "cpu_meter": METER.mode,
        "cpu_ms_per_request": cpu,
        "generator_cpu_ms_per_request": generator,
        "cpu_ratio_to_api": {a: cpu["api"] / cpu[a] for a in arms if a != "api"},
        "cpu_ratio_to_api_without_generator": {
            a: cpu["api"] / (cpu[a] - generator[a]) for a in arms if a != "api"
        },
        "loaded_ms": q_loaded,
        "single_ms": q_single,
        "p99_overhead_ms": q_loaded["route"]["p99"] - q_loaded["api"]["p99"],
        "single_p99_overhead_ms": q_single["route"]["p99"] - q_single["api"]["p99"],
        "single_p50_overhead_ms": q_single["route"]["p50"] - q_single["api"]["p50"],
        "single_p50_overhead_ms_by_arm": {
            a: q_single[a]["p50"] - q_single["api"]["p50"] for a in arms if a != "api"
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--single", type=int, default=200, help="one-at-a-time calls per arm")
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument(
        "--baseline-tree", default=None, help="a checkout whose deepgym serve is a third arm"
    )
    parser.add_argument("--client", choices=("httpx", "raw"), default="httpx")
    args = parser.parse_args()

    servers = {"route": start_server(args.workers)}
    try:
        if args.baseline_tree:
            servers["baseline"] = start_server(args.workers, args.baseline_tree)
        data = asyncio.run(measure(args, {name: url for name, (_, url) in servers.items()}))
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(30)
    labels = {
        "route": "POST /run_code (HTTP)",
        "baseline": "POST /run_code, baseline tree",
        "api": "AsyncDeepGym.run_one",
    }
    rows = []
    for arm in data["per_s"]:
        lq, sq = data["loaded_ms"][arm], data["single_ms"][arm]
        rate = f"{data['per_s'][arm]:.0f}"
        ratio = f"{data['ratio_to_api'][arm]:.2f}" if arm != "api" else "1"
        cpu = f"{data['cpu_ms_per_request'][arm]:.2f}"
        if arm != "api":
            cpu += f" ({data['generator_cpu_ms_per_request'][arm]:.2f})"
        quantiles = [f"{q[k]:.1f}" for q in (lq, sq) for k in ("p50", "p99")]
        rows.append([labels[arm], rate, ratio, cpu, *quantiles])
    n = data["in_flight"]
    header = ["arm", "per s", "/ API", "CPU ms (generator)", f"p50 ms @{n}", f"p99 ms @{n}"]
    header += ["p50 ms @1", "p99 ms @1"]
    print_table(rows, header)
    rps, over = data["per_s"]["route"], data["p99_overhead_ms"]
    ratio, single = data["ratio_to_api"]["route"], data["single_p50_overhead_ms"]
    print(
        f"\nCPU ({data['cpu_meter']}): API ms a run / route ms a request = "
        f"{data['cpu_ratio_to_api']['route']:.2f}, without the load generator "
        f"{data['cpu_ratio_to_api_without_generator']['route']:.2f} (client: {args.client})"
    )
    print(
        f"route / API throughput @{n} = {ratio:.2f} (target >= {TARGET_RATIO}: "
        f"{'met' if ratio >= TARGET_RATIO else 'missed'}); one at a time p50 +{single:.1f} ms "
        f"(target <= {TARGET_SINGLE_P50_OVERHEAD_MS:.0f} ms: "
        f"{'met' if single <= TARGET_SINGLE_P50_OVERHEAD_MS else 'missed'}), p99 "
        f"+{data['single_p99_overhead_ms']:.1f} ms\nrequests/s = {rps:.0f} (target >= "
        f"{TARGET_RPS:.0f}: {'met' if rps >= TARGET_RPS else 'missed'}); p99 overhead @{n} = "
        f"{over:.1f} ms (target <= {TARGET_P99_OVERHEAD_MS:.0f} ms: "
        f"{'met' if over <= TARGET_P99_OVERHEAD_MS else 'missed'})"
    )
    path = write_json(
        "fusion",
        {
            **data,
            "target_rps": TARGET_RPS,
            "target_p99_overhead_ms": TARGET_P99_OVERHEAD_MS,
            "target_ratio": TARGET_RATIO,
            "target_single_p50_overhead_ms": TARGET_SINGLE_P50_OVERHEAD_MS,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
