"""Sessions of task corpora on an image: open + close as root, and episodes per second with 8
sessions at once, each against a baseline measured in the same run.

The image is the cached Debian bookworm root of ``benchmarks/images.py`` (busybox and bash,
built with mmdebstrap); the task is AgentBench's shape: the agent writes its answer to a file,
the final verifier compares it.

1. Open + close of a session on the image run as root (uid 0 of its own namespace, with the
   chown filter: what terminal-bench, Harbor and AgentBench tasks get), against the same session
   as the agent's uid 65534 and the same session on the host's system, interleaved round by
   round, a ``strict`` run between rounds so each warm standby has time to boot. Target: p50
   <= 50 ms as root.
2. Episodes (open, two actions, the final verifier, close) on the image as root: ``--episodes``
   of them one at a time (the baseline), then the same number 8 at a time on ``AsyncDeepGym``;
   episodes per second of each, and the median episode.
3. With ``--tbench``: terminal-bench's 16 aider-polyglot C++ tasks (``../shared/data``) into an
   empty image store: the stand-in for ``buildpack-deps:jammy`` built (``tests/data/stand-ins``,
   from Debian's mirror), the 16 imported on a cold build cache, then again on the warm one;
   then one episode of ``polyglot_cpp_clock``'s reference (``solution.sh``, then its tests).

    unshare --pid --fork --mount-proc --kill-child python benchmarks/corpora.py \\
        [--opens 30] [--episodes 48] [--tbench] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import interleaved, print_table, summarise, write_json  # noqa: E402
from tests.sandbox.image_fixtures import build_root, cache_dir  # noqa: E402

from deepgym import AsyncDeepGym, DeepGym, load_environment  # noqa: E402
from deepgym.images.store import ImageStore  # noqa: E402
from deepgym.models import Environment  # noqa: E402
from deepgym.session import Action  # noqa: E402
from images import root_layer, write_layout  # noqa: E402

TARGET_OPEN_MS = 50.0
CONCURRENT = 8
IMAGE = "bench/debian:1"
VERIFY = """
def verify(work, tests):
    answer = (work / "answer.txt").read_text().strip() if (work / "answer.txt").exists() else ""
    return answer == "42"
"""
ACTIONS = [
    {"tool": "bash", "command": "echo $((6 * 7)) > /work/answer.txt"},
    {"tool": "done"},
]


def task_env(user: str = "root", image: str | None = IMAGE) -> Environment:
    return Environment(
        name=f"answer-{user}-{'image' if image else 'host'}",
        kind="session",
        task="Write 6 times 7 to /work/answer.txt.",
        image=image,
        user=user if image else "agent",
        verifier_code=textwrap.dedent(VERIFY),
        memory_mb=256,
        max_processes=64,
        max_file_mb=8,
        step_timeout=10.0,
        lifetime=60.0,
        timeout=20.0,
    )


def agent(obs: Any) -> Action:
    return Action.of(ACTIONS[min(obs.step, len(ACTIONS) - 1)])


def open_close(opens: int) -> dict[str, Any]:
    envs = {
        "image, as root": task_env("root"),
        "image, as uid 65534": task_env("agent"),
        "host's system": task_env(image=None),
    }
    with DeepGym(sandbox="strict") as dg:
        for env in envs.values():  # the first open of each starts its standby
            dg.session(env).close()
        two_sum = load_environment("two_sum")

        def arm(env: Environment) -> Any:
            return lambda: dg.session(env).close()

        def strict() -> None:
            if not dg.run(two_sum, two_sum.reference_solution or "").passed:
                raise SystemExit("two_sum's reference failed under strict")

        arms = {name: arm(env) for name, env in envs.items()}
        times = interleaved({**arms, "strict run (two_sum)": strict}, rounds=opens)
    stats = {name: summarise(xs) for name, xs in times.items()}
    rows = [[n, f"{s['median_ms']:.1f}", f"{s['p90_ms']:.1f}"] for n, s in stats.items()]
    print(f"\n1. Open + close ({opens} of each, interleaved, warm standby)\n")
    print_table(rows, ["arm", "median ms", "p90 ms"])
    p50 = stats["image, as root"]["median_ms"]
    met = p50 <= TARGET_OPEN_MS
    print(
        f"as root on the image: p50 {p50:.1f} ms (target <= {TARGET_OPEN_MS:g} ms: "
        f"{'met' if met else 'missed'})"
    )
    return {"opens": opens, "arms": stats, "target_ms": TARGET_OPEN_MS, "target_met": met}


async def _episodes(n: int, parallel: int) -> tuple[float, list[float], int]:
    env = task_env("root")
    async with AsyncDeepGym() as dg:
        await dg.run_episode(env, agent)  # its image resolved, its standby started
        gate = asyncio.Semaphore(parallel)
        times: list[float] = []

        async def one() -> bool:
            async with gate:
                t = time.perf_counter()
                episode = await dg.run_episode(env, agent)
                times.append((time.perf_counter() - t) * 1000.0)
                return episode.result.has_verdict and episode.result.score == 1.0

        t0 = time.perf_counter()
        ok = await asyncio.gather(*(one() for _ in range(n)))
        wall = time.perf_counter() - t0
    return wall, times, sum(ok)


def episodes(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = []
    for parallel in (1, CONCURRENT):
        wall, times, ok = asyncio.run(_episodes(n, parallel))
        out[str(parallel)] = {
            "episodes": n,
            "scored_one": ok,
            "wall_s": wall,
            "per_s": n / wall,
            "median_episode_ms": statistics.median(times),
        }
        rows.append(
            [str(parallel), f"{n / wall:.1f}", f"{statistics.median(times):.0f}", f"{ok}/{n}"]
        )
    print(f"\n2. Episodes on the image as root ({n} each way)\n")
    print_table(rows, ["at once", "episodes/s", "median episode ms", "scored 1.0"])
    return out


def tbench_import(work: Path) -> dict[str, Any]:
    from tests.shared_data import shared_data

    from deepgym.envs.harbor import import_harbor_folder
    from deepgym.envs.qa.session_check import reference_actions, scripted
    from deepgym.envs.registry import load_folder
    from deepgym.images.build import build

    data = shared_data() / "terminal-bench-datasets" / "datasets" / "aider_polyglot"
    stand_in = "bench/buildpack-deps:jammy"
    bases = {"buildpack-deps:jammy": stand_in}
    lines: list[str] = []
    t0 = time.perf_counter()
    build(
        ROOT / "tests" / "data" / "stand-ins" / "buildpack-deps-jammy" / "Dockerfile", ref=stand_in
    )
    t1 = time.perf_counter()
    cold = import_harbor_folder(data, work / "cold", progress=lines.append, bases=bases)
    t2 = time.perf_counter()
    warm = import_harbor_folder(data, work / "warm", bases=bases)
    t3 = time.perf_counter()
    if not (cold.ok and warm.ok):
        raise SystemExit("\n".join(cold.lines() + warm.lines()))
    steps = [line for line in lines if line.startswith("step ")]
    built = sum("(cached)" not in line for line in steps)
    env = load_folder(work / "cold" / "polyglot_cpp_clock")
    with DeepGym() as dg:
        t4 = time.perf_counter()
        result = dg.run_episode(env, scripted(reference_actions(env))).result
        t5 = time.perf_counter()
    out = {
        "tasks": len(cold.imported),
        "stand_in_s": t1 - t0,
        "cold_import_s": t2 - t1,
        "warm_import_s": t3 - t2,
        "build_steps": len(steps),
        "build_steps_run": built,
        "episode_s": t5 - t4,
        "episode_score": result.score if result.has_verdict else None,
    }
    print("\n3. terminal-bench's 16 C++ tasks into an empty store\n")
    print_table(
        [
            ["the stand-in (Debian bookworm + its packages)", f"{t1 - t0:.0f}"],
            [f"import of 16, cold ({built} of {len(steps)} build steps run)", f"{t2 - t1:.0f}"],
            ["import of 16, warm", f"{t3 - t2:.1f}"],
            [f"one episode: clock's reference (score {out['episode_score']})", f"{t5 - t4:.1f}"],
        ],
        ["what", "seconds"],
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--tbench", action="store_true", help="3.: import terminal-bench's tasks")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deepgym-bench-corpora-") as tmp:
        work = Path(tmp)
        os.environ["DEEPGYM_HOME"] = str(work / "home")
        root = build_root(cache_dir() / "bookworm-busybox-root")
        digest = write_layout(work / "layout", [root_layer(root)])
        store = ImageStore()
        store.import_layout(work / "layout", IMAGE)
        store.resolve(IMAGE)
        print(f"image {IMAGE}: {digest}")
        opened = open_close(args.opens) if args.opens else {}
        ran = episodes(args.episodes) if args.episodes else {}
        imported = tbench_import(work / "tbench") if args.tbench else {}
    write_json(
        args.out or "corpora",
        {"args": vars(args), "open_close": opened, "episodes": ran, "tbench": imported},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
