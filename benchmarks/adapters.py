"""What the environment-framework adapters add per answer: SkyRL, verifiers, NeMo Gym's /verify
and Atropos against the same answer run through deepgym directly, and their rewards against
deepgym's own.

Every arm scores ``two_sum`` answers in the real sandbox (``pool``), a right and a wrong one in
turn. The baseline is ``DeepGym.run_one`` of the same answer on the adapters' own shared client,
measured in the same run, the arms interleaved round by round (a slow moment hits every arm
alike):

- ``skyrl``: ``skyrl_gym.make("deepgym", ...)``, ``init``, ``step``, ``get_metrics``, ``close``
  (one trajectory, as SkyRL's generator plays it);
- ``verifiers``: verifiers' ``Task.score`` of a trace whose reply is the answer (its hook
  machinery and deepgym's ``@vf.reward``);
- ``nemo_gym``: ``POST /verify`` with NeMo Gym's body to a ``deepgym serve`` app on 127.0.0.1
  (its own pool; the baseline there is the same client's ``run_one`` as for the others);
- ``atropos``: ``collect_trajectories`` of a group of 4 against a scripted OpenAI-protocol server,
  against that group's chat completion plus ``run_batch`` of its answers directly; per answer =
  the group's time / 4.

Every adapter's reward must equal the baseline's score for the same answer (mismatches are
counted and must be 0). An arm is left out, with the reason printed, where its framework is not
installed (NeMo Gym's route needs no NeMo Gym).

    python benchmarks/adapters.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import print_table, write_json

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.eval.openai_server import serve as serve_model  # noqa: E402
from tests.integrations.conftest import TWO_SUM_OK  # noqa: E402

from deepgym import load_environment  # noqa: E402
from deepgym.integrations.reward import close_shared_clients, shared_client  # noqa: E402

WRONG = "def two_sum(nums, target):\n    return [0, 0]\n"
ANSWERS = [f"Here it is:\n```python\n{TWO_SUM_OK}```", f"```python\n{WRONG}```"]
CODES = [TWO_SUM_OK, WRONG]
GROUP = 4


def skyrl_arm() -> Callable[[str], float]:
    import skyrl_gym

    from deepgym.integrations.skyrl import dataset_rows

    (row,) = dataset_rows(["two_sum"])
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}

    def one(text: str) -> float:
        env = skyrl_gym.make("deepgym", env_config={}, extras={**extras, "max_turns": 1})
        env.init(row["prompt"])
        reward = float(env.step(text)["reward"])
        env.get_metrics()
        env.close()
        return reward

    return one


def verifiers_arm() -> Callable[[str], float]:
    import verifiers.v1 as vf
    from verifiers.v1.trace import AgentInfo, TraceTask
    from verifiers.v1.utils.loaders import taskset_config_type

    config = taskset_config_type("deepgym-verifiers")(id="deepgym-verifiers", envs=["two_sum"])
    task = next(iter(vf.load_taskset(config)))
    agent = AgentInfo(config=vf.AgentConfig())

    def one(text: str) -> float:
        trace = vf.Trace(
            task=TraceTask(type="DeepGymTask", data=task.data), agent=agent, root_reply=text
        )
        asyncio.run(task.score(trace))
        return float(trace.rewards["deepgym"].score)

    return one


def nemo_arm() -> tuple[Callable[[str], float], Callable[[], None]]:
    import httpx

    from deepgym.server.app import create_app
    from deepgym.server.runner import ThreadedServer

    server = ThreadedServer(create_app()).start()
    http = httpx.Client(base_url=server.url, timeout=60.0)
    base = {
        "responses_create_params": {"input": [{"role": "user", "content": "two_sum"}]},
        "verifier_metadata": {"env": "two_sum"},
    }

    def one(text: str) -> float:
        message = {"type": "message", "role": "assistant", "content": []}
        message["content"] = [{"type": "output_text", "text": text, "annotations": []}]
        r = http.post("/verify", json={**base, "response": {"id": "r", "output": [message]}})
        if r.status_code != 200:
            raise SystemExit(f"/verify answered {r.status_code}: {r.text[:300]}")
        return float(r.json()["reward"])

    def close() -> None:
        http.close()
        server.stop()

    return one, close


def atropos_arms(tmp: Path, url: str) -> tuple[Callable[[], Any], ...]:
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig
    from tests.integrations.test_atropos import make_tokenizer

    from deepgym.completions import answer_of
    from deepgym.integrations.atropos import DeepGymAtroposConfig, DeepGymAtroposEnv, tokenize_chat

    config = DeepGymAtroposConfig(
        envs="two_sum", group_size=GROUP, tokenizer_name=str(make_tokenizer(tmp)), use_wandb=False
    )
    server = APIServerConfig(
        base_url=url,
        api_key="x",
        model_name="scripted",
        health_check=False,
        n_kwarg_is_ignored=True,
    )
    env = DeepGymAtroposEnv(config, [server])
    loop = asyncio.new_event_loop()
    loop.run_until_complete(env.setup())
    two_sum = env.environments[0]
    client = shared_client()

    def adapter() -> list[float]:
        group, _ = loop.run_until_complete(env.collect_trajectories("two_sum"))
        return sorted(group["scores"])

    async def by_hand() -> list[float]:
        completion = await env.server.chat_completion(
            messages=env.messages(two_sum), n=GROUP, max_tokens=config.max_tokens
        )
        answers = [answer_of(c.message.content or "") for c in completion.choices]
        batch = await asyncio.to_thread(client.run_batch, two_sum, answers)
        return sorted(r.score for r in batch.results)

    def direct() -> list[float]:
        return loop.run_until_complete(by_hand())

    def tokenize() -> None:  # the adapter's tokenizing alone (every Atropos env tokenizes)
        chat = [*env.messages(two_sum), {"role": "assistant", "content": ANSWERS[0]}]
        tokenize_chat(env.tokenizer, chat)

    def close() -> None:
        for model in env.server.servers:
            loop.run_until_complete(model.openai.close())
        loop.close()

    return adapter, direct, tokenize, close


def _available(name: str, make: Callable[[], Any]) -> Any:
    try:
        return make()
    except ImportError as exc:
        print(f"{name}: left out ({exc})")
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="answers per arm")
    args = parser.parse_args()
    env = load_environment("two_sum")
    client = shared_client()
    arms: dict[str, Callable[[str], float]] = {}
    closers: list[Callable[[], None]] = []
    for name, make in (("skyrl", skyrl_arm), ("verifiers", verifiers_arm)):
        made = _available(name, make)
        if made is not None:
            arms[name] = made
    nemo = _available("nemo_gym", nemo_arm)
    if nemo is not None:
        arms["nemo_gym"], close = nemo
        closers.append(close)

    times: dict[str, list[float]] = {name: [] for name in ["direct", *arms]}
    mismatches: dict[str, int] = dict.fromkeys(arms, 0)
    import time

    def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
        t = time.perf_counter()
        out = fn()
        return (time.perf_counter() - t) * 1000.0, out

    for i in range(args.rounds + 2):  # two warm-up rounds, not counted
        which = i % 2
        ms, direct = timed(lambda w=which: client.run_one(env, CODES[w]).score)
        order = list(arms) if i % 2 == 0 else list(arms)[::-1]
        results = {}
        for name in order:
            results[name] = timed(lambda n=name, w=which: arms[n](ANSWERS[w]))
        if i < 2:
            continue
        times["direct"].append(ms)
        for name, (took, reward) in results.items():
            times[name].append(took)
            mismatches[name] += reward != direct

    group_times: dict[str, list[float]] = {}
    group_mismatch = 0
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve_model({}, default=[f"text:{a}" for a in ANSWERS]) as (url, _),
    ):
        made = _available("atropos", lambda: atropos_arms(Path(tmp), url))
        if made is not None:
            adapter, by_hand, tokenize, close = made
            group_times = {"atropos": [], "atropos_direct": [], "atropos_tokenize": []}
            for i in range(args.rounds // GROUP + 2):
                pair = [("atropos", adapter), ("atropos_direct", by_hand)]
                got = {}
                for name, fn in pair if i % 2 == 0 else pair[::-1]:
                    got[name] = timed(fn)
                if i < 2:
                    continue
                for name, (took, _) in got.items():
                    group_times[name].append(took / GROUP)
                group_times["atropos_tokenize"].append(timed(tokenize)[0])
                group_mismatch += got["atropos"][1] != got["atropos_direct"][1]
            close()
    for close in closers:
        close()
    close_shared_clients()

    base = statistics.median(times["direct"])
    rows, data = [], {"rounds": args.rounds, "arms": {}}
    for name, xs in times.items():
        med = statistics.median(xs)
        over = med - base
        wrong = mismatches.get(name, 0)
        rows.append([name, f"{med:.1f}", f"{over:+.1f}", f"{med / base:.2f}x", str(wrong)])
        data["arms"][name] = {
            "p50_ms": med,
            "overhead_p50_ms": over,
            "ratio": med / base,
            "n": len(xs),
            "reward_mismatches": wrong,
        }
    if group_times:
        gbase = statistics.median(group_times["atropos_direct"])
        for name, xs in group_times.items():
            med = statistics.median(xs)
            wrong = group_mismatch if name == "atropos" else 0
            if name == "atropos_tokenize":  # a part of the adapter's time, not an arm
                rows.append([f"{name} (one answer's tokens)", f"{med:.1f}", "", "", ""])
                data["arms"][name] = {"p50_ms": med, "n": len(xs)}
                continue
            rows.append(
                [
                    f"{name} (per answer of {GROUP})",
                    f"{med:.1f}",
                    f"{med - gbase:+.1f}",
                    f"{med / gbase:.2f}x",
                    str(wrong),
                ]
            )
            data["arms"][name] = {
                "p50_ms_per_answer": med,
                "overhead_p50_ms": med - gbase,
                "ratio": med / gbase,
                "n": len(xs),
                "reward_mismatches": wrong,
            }
    print_table(rows, ["arm", "p50 ms", "overhead", "vs its baseline", "reward mismatches"])
    path = write_json("adapters", data)
    print(f"wrote {path}")
    bad = sum(a.get("reward_mismatches", 0) for a in data["arms"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
