"""The sweep harness: a real GRPO step on a small random-weight model, with only the reward moving.

Each step generates from a small decoder-only transformer (``tinylm``), scores the completions,
and runs the policy-gradient backward and the optimizer step. Generation and training are held
fixed: the policy and optimizer are restored before every step (outside the timed step) and the
sampling seed is the same, so every step generates the same tokens from the same weights. What
moves is the reward, one *arm* at a time:

- ``const:R``     the reward takes exactly R seed-seconds for every completion (the ladder);
- ``stall:K``     median 2 seed-seconds, K completions per batch hit the timeout (30);
- ``rate:P``      median 2, each completion hits the timeout with probability P (a dial);
- ``pipe:K``      as ``stall:K``, with each group's backward run as soon as it is scored;
- ``sandbox``     the real reward: a built-in environment through ``DeepGym`` on completions
  that mix the reference, wrong answers and one that never returns (its time limit is the
  reference-derived one); ``sandbox-pipe`` streams its groups (``stream_groups``) into a
  ``GroupPipeline`` that runs each group's backward on arrival.

*Seed-seconds* scale the seed's setup to this machine: warm-up steps measure the busy time
(generation + training), and one seed-second is ``busy / 24.5`` seconds here, so a timeout of
30 seed-seconds has the seed's timeout-to-busy ratio. The dial is a controlled wait (a
completion "scored elsewhere" after its service time), as in the seed.

Blocks are randomised and complete: every block runs every arm once, in an order drawn from the
seed; the rate arms in one block share their random draws (common random numbers). Outputs: a
CSV shard of raw timings per block, the timeline (JSON lines), a summary (JSON and CSV), plots,
and the verdicts of the pre-registered predictions.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym.exceptions import ConfigError
from deepgym.grpo import GroupPipeline, Score, group_advantages
from deepgym.latency.analysis import ArmStats, StepRow, json_safe, metrics, summarize, write_rows
from deepgym.latency.arms import (
    DEFAULT_ARMS,
    SEED_BUSY,
    Arm,
    Draws,
    Plan,
    dial_plan,
    model_step,
    parse_arm,
    sandbox_plan,
)
from deepgym.latency.lmconfig import TinyLMConfig
from deepgym.latency.predictions import Finding, Prediction, evaluate
from deepgym.latency.timeline import ProfileCheck, Step, Timeline, write_jsonl
from deepgym.models import RunResult
from deepgym.validation import optional_positive_int, positive_int

if TYPE_CHECKING:
    import torch

    from deepgym.client import DeepGym
    from deepgym.latency.tinylm import TinyCausalLM
    from deepgym.models import Environment

__all__ = [
    "DEFAULT_ARMS",
    "Arm",
    "SweepConfig",
    "SweepResult",
    "parse_arm",
    "run_sweep",
]

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class SweepConfig:
    """What to sweep, at what size. The defaults run in a few minutes on two CPU cores."""

    blocks: int = 5
    prompts: int = 16
    group: int = 8
    prompt_len: int = 8
    new_tokens: int = 8
    model: TinyLMConfig = field(default_factory=TinyLMConfig)
    """The random-weight model's shape (its ``max_len`` is set from the prompt and tokens)."""
    arms: tuple[str, ...] = DEFAULT_ARMS
    env: str = "fizzbuzz"
    seed: int = 0
    device: str = "auto"
    threads: int | None = 1
    warmup: int = 2
    lr: float = 1e-4
    max_parallel: int = 8
    settle: float = 0.1
    """Seconds of pause before each step (outside the timing)."""
    profile: bool = True
    plot: bool = True
    out: Path | None = None

    def __post_init__(self) -> None:
        positive = ("blocks", "prompts", "group", "prompt_len", "new_tokens", "max_parallel")
        for name in (*positive, "warmup"):
            positive_int(getattr(self, name), name)
        if not isinstance(self.model, TinyLMConfig):
            raise ConfigError(f"model must be a TinyLMConfig, got {type(self.model).__name__}")
        optional_positive_int(self.threads, "threads")
        if not isinstance(self.settle, int | float) or not 0 <= self.settle <= 60:
            raise ConfigError(f"settle must be between 0 and 60 seconds, got {self.settle!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if not self.arms:
            raise ConfigError("arms must name at least one arm")
        if len(set(self.arms)) != len(self.arms):
            raise ConfigError("arms must not repeat")
        for a in self.arms:
            parse_arm(a)

    @property
    def batch(self) -> int:
        """Completions per step: prompts times group size."""
        return self.prompts * self.group


@dataclass
class SweepResult:
    """What a sweep measured and concluded."""

    config: SweepConfig
    device: str
    seconds_per_seed_second: float
    """The scale: busy time here / the seed's 24.5 s."""
    warmup_busy: float
    rows: list[StepRow]
    arms: dict[str, ArmStats]
    metrics: dict[str, float]
    verdicts: list[Finding]
    profile: list[ProfileCheck] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    elapsed: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (the summary file)."""
        cfg = asdict(self.config)
        cfg["out"] = None if self.config.out is None else str(self.config.out)
        cfg["arms"] = list(self.config.arms)
        return {
            "config": cfg,
            "device": self.device,
            "seconds_per_seed_second": self.seconds_per_seed_second,
            "warmup_busy": self.warmup_busy,
            "arms": {k: asdict(v) for k, v in self.arms.items()},
            "metrics": self.metrics,
            "verdicts": [
                {**asdict(v.prediction), "value": v.value, "status": v.status}
                for v in self.verdicts
            ],
            "profile": [asdict(p) for p in self.profile],
            "files": self.files,
            "elapsed": self.elapsed,
        }


# -- the step ----------------------------------------------------------------------------------


@dataclass
class _Harness:
    """The model, its saved state, and everything a step needs."""

    cfg: SweepConfig
    model: TinyCausalLM
    state: dict[str, torch.Tensor]
    prompts: torch.Tensor
    device: str
    timeline: Timeline
    dg: DeepGym | None = None
    env: Environment | None = None
    scale: float = 1.0

    def restore(self) -> torch.optim.Optimizer:
        """The same weights and a fresh optimizer for every step, after a pause that lets the
        previous step's after-effects (sandbox clean-up, garbage) settle: outside the timing."""
        import torch

        gc.collect()
        if self.cfg.settle > 0:
            time.sleep(self.cfg.settle)
        self.model.load_state_dict(self.state)
        self.model.zero_grad(set_to_none=True)
        return torch.optim.AdamW(self.model.parameters(), lr=self.cfg.lr)

    def generate(self) -> torch.Tensor:
        import torch

        from deepgym.latency.tinylm import generate

        gen = torch.Generator(device=self.device).manual_seed(self.cfg.seed)
        return generate(self.model, self.prompts, self.cfg.new_tokens, gen)

    def backward(self, seqs: torch.Tensor, index: int, advantages: Sequence[Score]) -> None:
        """One group's backward pass, inside a ``training`` span."""
        from deepgym.latency.tinylm import group_loss

        g = self.cfg.group
        with self.timeline.span("training"):
            loss = group_loss(
                self.model,
                seqs[index * g : (index + 1) * g],
                self.cfg.prompt_len,
                advantages,
                self.cfg.batch,
            )
            if loss is not None:
                loss.backward()  # type: ignore[no-untyped-call]


def _dial_groups(
    start: float, services: list[float], results: list[RunResult], group: int
) -> Iterator[tuple[int, list[RunResult]]]:
    """Yield each group when its slowest completion is due: a reward scored elsewhere."""
    due = sorted((max(services[i : i + group]), i // group) for i in range(0, len(services), group))
    for d, g in due:
        wait = start + d - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        yield g, results[g * group : (g + 1) * group]


def _sandbox(h: _Harness) -> tuple[DeepGym, Environment]:
    if h.dg is None or h.env is None:
        raise ConfigError("a sandbox arm ran before the sandbox client started")
    return h.dg, h.env


def _reward_groups(
    h: _Harness, arm: Arm, plan: Plan, start: float
) -> Iterator[tuple[int, list[RunResult]]]:
    """Groups as they complete: the dial's due times, or the real reward's ``stream_groups``."""
    if arm.reward == "dial":
        return _dial_groups(start, plan.services, plan.results, h.cfg.group)
    dg, env = _sandbox(h)
    return dg.stream_groups(
        env, plan.completions, group_size=h.cfg.group, max_parallel=h.cfg.max_parallel
    )


def _reward_barrier(h: _Harness, arm: Arm, plan: Plan, start: float) -> list[RunResult]:
    """Every result, once the slowest is in."""
    if arm.reward == "dial":
        wait = start + max(plan.services) - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        return plan.results
    dg, env = _sandbox(h)
    batch = dg.run_batch(
        env, plan.completions, group_size=h.cfg.group, max_parallel=h.cfg.max_parallel
    )
    return batch.results


def _run_step(h: _Harness, arm: Arm, plan: Plan, meta: dict[str, Any]) -> tuple[Step, str]:
    """One timed GRPO step; returns its record and a hash of the generated tokens."""
    opt = h.restore()
    tl, g = h.timeline, h.cfg.group
    with tl.step(**meta) as step:
        with tl.span("generation"):
            seqs = h.generate()
        start = tl.clock()
        if arm.pipelined:
            arrivals: list[float] = []
            results: list[RunResult] = []

            def on_group(index: int, group: list[RunResult], adv: list[Score]) -> None:
                arrivals.append(tl.clock())
                results.extend(group)
                h.backward(seqs, index, adv)

            GroupPipeline(on_group).feed(_reward_groups(h, arm, plan, start))
            tl.record("reward", start, max(arrivals), busy=False)
        else:
            with tl.span("reward"):
                results = _reward_barrier(h, arm, plan, start)
            for i in range(h.cfg.prompts):
                h.backward(seqs, i, group_advantages(results[i * g : (i + 1) * g]))
        with tl.span("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
    step.meta["timeouts"] = sum(
        1 for r in results if r.error_type in ("timeout", "solution_timeout")
    )
    step.meta["no_verdict"] = sum(1 for r in results if not r.has_verdict)
    digest = hashlib.sha256(repr(seqs.cpu().tolist()).encode()).hexdigest()[:16]
    return step, digest


# -- the run -----------------------------------------------------------------------------------

BUSY_SPANS = frozenset({"generation", "training", "optimizer"})


def _device(cfg: SweepConfig) -> str:
    import torch

    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' asked for, but torch sees no CUDA device")
    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.device


def _harness(cfg: SweepConfig, device: str) -> _Harness:
    import torch

    from deepgym.latency.tinylm import TinyCausalLM

    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    lm = replace(cfg.model, max_len=cfg.prompt_len + cfg.new_tokens)
    torch.manual_seed(cfg.seed)
    model = TinyCausalLM(lm).to(device)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    prompts = torch.randint(0, cfg.model.vocab_size, (cfg.batch, cfg.prompt_len), generator=gen)
    sync = torch.cuda.synchronize if device == "cuda" else None
    return _Harness(
        cfg=cfg,
        model=model,
        state=state,
        prompts=prompts.to(device),
        device=device,
        timeline=Timeline(BUSY_SPANS, sync=sync),
    )


def _warm_up(h: _Harness) -> float:
    """Busy seconds of a step with an instant reward (median of the warm-up steps); the
    warm-up steps are not part of the results."""
    draws = Draws.of(h.cfg.seed, -1, ["const:0"], h.cfg.batch)
    arm = parse_arm("const:0")
    plan = dial_plan(arm, h.cfg.batch, 0.0, draws)
    busy = []
    for _ in range(h.cfg.warmup):
        step, _ = _run_step(h, arm, plan, {"warmup": True})
        busy.append(step.busy)
    h.timeline.steps.clear()
    return statistics.median(busy)


def _start_sandbox(h: _Harness) -> None:
    """A client and the environment for the sandbox arms, warmed up (outside the timing)."""
    from deepgym.client import DeepGym
    from deepgym.envs.registry import load_environment

    env = load_environment(h.cfg.env)
    if env.kind != "function" or not env.reference_solution:
        raise ConfigError(f"env {env.name!r} must be a function task with a reference solution")
    h.dg, h.env = DeepGym(), env
    h.dg.time_limit(env)  # measures the reference once: the time limit is reference-derived
    h.dg.run_batch(env, [env.reference_solution] * h.cfg.max_parallel)


def _row(h: _Harness, arm: Arm, plan: Plan, step: Step, digest: str) -> StepRow:
    return StepRow(
        block=int(step.meta["block"]),
        position=int(step.meta["position"]),
        arm=arm.name,
        mode="pipelined" if arm.pipelined else "barrier",
        reward=arm.reward,
        step=step.wall,
        generation=step.total("generation"),
        reward_wait=step.covered("reward"),
        training=step.total("training") + step.total("optimizer"),
        busy=step.busy,
        idle=step.idle,
        timeouts=int(step.meta["timeouts"]),
        no_verdict=int(step.meta["no_verdict"]),
        tokens=digest,
        model_step=model_step(arm, plan, step, h.cfg.prompts, h.cfg.group),
    )


def _block(h: _Harness, block: int, tick: Callable[[str], None]) -> list[StepRow]:
    """Every arm once, in this block's random order."""
    draws = Draws.of(h.cfg.seed, block, h.cfg.arms, h.cfg.batch)
    rows = []
    for position, name in enumerate(draws.order):
        arm = parse_arm(name)
        if arm.reward == "dial":
            plan = dial_plan(arm, h.cfg.batch, h.scale, draws)
        else:
            plan = sandbox_plan(_sandbox(h)[1], h.cfg.batch, draws)
        meta = {"block": block, "position": position, "arm": name}
        step, digest = _run_step(h, arm, plan, meta)
        rows.append(_row(h, arm, plan, step, digest))
        tick(name)
    return rows


def _profile(h: _Harness) -> list[ProfileCheck]:
    """The spans of a clean and a pipelined stalled step against the profiler's activity."""
    from deepgym.latency.timeline import profile_check

    out = []
    draws = Draws.of(h.cfg.seed, -2, ["const:2", "pipe:1"], h.cfg.batch)
    for name in ("const:2", "pipe:1"):
        arm = parse_arm(name)
        plan = dial_plan(arm, h.cfg.batch, h.scale, draws)
        tl = Timeline(BUSY_SPANS, sync=h.timeline.sync)
        saved, h.timeline = h.timeline, tl
        try:
            out.append(profile_check(functools.partial(_profiled_step, h, arm, plan), tl))
        finally:
            h.timeline = saved
    return out


def _profiled_step(h: _Harness, arm: Arm, plan: Plan, _timeline: Timeline) -> None:
    _run_step(h, arm, plan, {})


def run_sweep(
    cfg: SweepConfig,
    predictions: Sequence[Prediction] = (),
    progress: ProgressFn | None = None,
) -> SweepResult:
    """Run every block, write the outputs under ``cfg.out`` (if set), mark the predictions."""
    import torch

    t0 = time.perf_counter()
    device = _device(cfg)
    threads = torch.get_num_threads()
    h = _harness(cfg, device)
    arms = [parse_arm(a) for a in cfg.arms]
    total = cfg.blocks * len(arms)
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, label)

    try:
        if any(a.reward == "sandbox" for a in arms):
            _start_sandbox(h)
        busy = _warm_up(h)
        h.scale = busy / SEED_BUSY
        rows = [r for b in range(cfg.blocks) for r in _block(h, b, tick)]
        checks = _profile(h) if cfg.profile else []
    finally:
        torch.set_num_threads(threads)
        if h.dg is not None:
            h.dg.close()
    stats = summarize(rows)
    result = SweepResult(
        config=cfg,
        device=device,
        seconds_per_seed_second=h.scale,
        warmup_busy=busy,
        rows=rows,
        arms={name: stats[name] for name in cfg.arms if name in stats},
        metrics=metrics(rows, cfg.batch),
        verdicts=[],
        profile=checks,
    )
    for i, c in enumerate(checks):
        result.metrics[f"profile.outside_share.{('const:2', 'pipe:1')[i]}"] = c.outside_share
    result.verdicts = evaluate(predictions, result.metrics)
    result.elapsed = time.perf_counter() - t0
    if cfg.out is not None:
        result.files = _write(result, h.timeline.steps, cfg.out)
    return result


def _write(result: SweepResult, steps: list[Step], out: Path) -> dict[str, str]:
    """Shards, timeline, summary and plots under ``out``."""
    shards = out / "shards"
    shards.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for b in sorted({r.block for r in result.rows}):
        path = write_rows(shards / f"block-{b:03d}.csv", [r for r in result.rows if r.block == b])
        files[f"shard {b}"] = str(path)
    files["timeline"] = str(write_jsonl(out / "timeline.jsonl", steps))
    files["summary"] = str(out / "summary.json")
    files["arms"] = str(write_arm_table(out / "summary.csv", result.arms))
    if result.config.plot:
        from deepgym.latency.plots import plot_sweep

        files["plot"] = str(plot_sweep(result, out / "sweep.png"))
    summary = json_safe({**result.to_dict(), "files": files})
    (out / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False))
    return files


def write_arm_table(path: Path, arms: dict[str, ArmStats]) -> Path:
    """The per-arm summary as CSV."""
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        stats = list(arms.values())
        w = csv.DictWriter(f, fieldnames=list(asdict(stats[0])) if stats else ["arm"])
        w.writeheader()
        for s in stats:
            w.writerow(asdict(s))
    return path
