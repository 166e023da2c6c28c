"""Generation and scoring overlap in ``eval_model``: a model eval's wall time against the
generation time alone.

A stand-in OpenAI-compatible server on 127.0.0.1 answers every request after a fixed latency,
with the problem's reference solution (a fenced block), made distinct per request by a trailing
comment (``# sample N``) unless asked to repeat it. Arms, one after the other on the same
server: generation alone (every request, ``--concurrency`` in flight, nothing scored), scoring
alone (``run_batch`` of the distinct answers), ``DeepGym.eval_model`` on distinct answers (each
scored in the sandbox as it arrives: nothing to deduplicate), then ``eval_model`` with the
server repeating each problem's answer (a problem's twins are scored once). Target: eval wall
time <= 1.2x the generation alone, which on distinct answers needs the sandbox to score at least
as fast as the server answers (concurrency / latency samples a second); else the eval is
scoring-bound, and its wall time is compared with the scoring alone.

    python benchmarks/eval_model.py [--problems 164] [--samples 10] [--latency 0.05]
        [--concurrency 16] [--sandbox pool]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _common import print_table, write_json

from deepgym import ChatModel, DeepGym, load_suite

TARGET_RATIO = 1.2


def serve(answers: dict[str, str], latency: float, mode: dict[str, bool]) -> ThreadingHTTPServer:
    count = itertools.count()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency)
            code = answers[body["messages"][-1]["content"]]
            if not mode["repeat"]:
                code += f"\n# sample {next(count)}"
            text = f"```python\n{code}\n```"
            data = json.dumps({"choices": [{"message": {"content": text}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 256
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    return server


async def generate_only(model: ChatModel, prompts: list[str]) -> None:
    async with model.connect() as sample:
        await asyncio.gather(*(sample(p) for p in prompts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sandbox", default="pool")
    args = parser.parse_args()

    envs = load_suite("humaneval")[: args.problems]
    mode = {"repeat": False}
    server = serve({e.task: e.reference_solution or "" for e in envs}, args.latency, mode)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    model = ChatModel(url, "stand-in", concurrency=args.concurrency)
    prompts = [e.task for e in envs for _ in range(args.samples)]
    t0 = time.monotonic()
    asyncio.run(generate_only(model, prompts))
    generation = time.monotonic() - t0
    with DeepGym(sandbox=args.sandbox) as dg:
        dg.eval_model(envs[:1], model, samples=1)  # the pool started, the limits measured once
        t0 = time.monotonic()
        batch_envs = [e for e in envs for _ in range(args.samples)]
        answers = [
            f"```python\n{e.reference_solution}\n# sample {i}\n```"
            for i, e in enumerate(batch_envs)
        ]
        dg.run_batch(batch_envs, answers)
        scoring = time.monotonic() - t0
        t0 = time.monotonic()
        ev = dg.eval_model(envs, model, samples=args.samples, k=[1])
        wall = time.monotonic() - t0
        mode["repeat"] = True
        t0 = time.monotonic()
        twins = dg.eval_model(envs, model, samples=args.samples, k=[1])
        wall_twins = time.monotonic() - t0
    server.shutdown()
    ratio = wall / generation
    ratio_twins = wall_twins / generation
    rows = [
        ["generation alone", f"{generation:.2f} s", f"{len(prompts) / generation:.1f}/s", "-"],
        ["scoring alone", f"{scoring:.2f} s", f"{len(prompts) / scoring:.1f}/s", str(len(prompts))],
        ["eval_model, distinct", f"{wall:.2f} s", f"{len(prompts) / wall:.1f}/s", str(ev.runs)],
        [
            "eval_model, repeated",
            f"{wall_twins:.2f} s",
            f"{len(prompts) / wall_twins:.1f}/s",
            str(twins.runs),
        ],
    ]
    print_table(rows, ["arm", "wall", "samples", "sandbox runs"])
    print(
        f"ratio distinct {ratio:.2f}, repeated {ratio_twins:.2f} (target <= {TARGET_RATIO}); "
        f"pass@1 {ev.metrics.pass_at.get(1)}, {twins.metrics.pass_at.get(1)}; "
        f"no verdict {ev.metrics.no_verdict}, {twins.metrics.no_verdict}"
    )
    write_json(
        "eval_model",
        {
            "args": vars(args),
            "generation_s": generation,
            "scoring_s": scoring,
            "eval_s": wall,
            "eval_runs": ev.runs,
            "ratio": ratio,
            "eval_repeated_s": wall_twins,
            "eval_repeated_runs": twins.runs,
            "ratio_repeated": ratio_twins,
            "pass_at_1": ev.metrics.pass_at.get(1),
            "pass_at_1_repeated": twins.metrics.pass_at.get(1),
            "no_verdict": ev.metrics.no_verdict + twins.metrics.no_verdict,
        },
    )
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
