"""``deepgym price`` and ``deepgym sweep``: what reward latency costs a GRPO step.

``price`` measures a real reward's service times on real answers and predicts the step
(``deepgym.latency.price``); ``sweep`` runs a real GRPO step on a small random-weight model with
the reward on a dial (``deepgym.latency.sweep``, needs torch). torch, numpy and matplotlib load
inside the commands, so ``import deepgym.cli`` stays light. Bad options raise ``ConfigError``
before anything runs: one ``Error: ...`` line, exit 2.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.text import Text

from deepgym.cli import common
from deepgym.cli.common import load_env, out, progress, read_batch_answers
from deepgym.cli.tables import Cell, Column, echo, print_table
from deepgym.client import SANDBOXES
from deepgym.exceptions import ConfigError
from deepgym.latency.sweep import SweepConfig
from deepgym.text import install_extra, percent
from deepgym.validation import positive_int, positive_number

if TYPE_CHECKING:
    from deepgym.latency.predictions import Finding
    from deepgym.latency.price import PriceReport
    from deepgym.latency.sweep import SweepResult

_D = SweepConfig()
"""The sweep's defaults, for the help text."""

__all__ = ["price_cmd", "sweep_cmd"]


# -- price -------------------------------------------------------------------------------------


_share = partial(percent, places=1, small=True)
"""A share at one decimal; a rare nonzero one (under 0.1%) at three, so it does not read 0.0%."""


def _price_text(r: PriceReport) -> None:
    console = out()
    q = r.quantiles_s
    hits = sum(r.timed_out)
    for text in (
        f"price: {r.env}, {r.batch} completions ({r.batch // r.group} groups of {r.group}), "
        f"busy {r.busy_s:g} s (training {r.training_s:g} s), timeout {r.timeout_s:g} s",
        f"service time (s), {r.runs} runs: p50 {q['p50']:.3f}  p90 {q['p90']:.3f}  "
        f"p99 {q['p99']:.3f}  max {q['max']:.3f}  mean {q['mean']:.3f}",
        f"timeout rate: {_share(r.timeout_rate)} ({hits}/{r.runs} timed out)",
        f"P(step stalls): {_share(r.p_stall)}  (knee: at {_share(r.knee_rate)} half the steps "
        f"of {r.batch} stall)",
        f"corrupted groups: {_share(r.corrupted_group_share)} of groups hold a timeout; scored 0, "
        "one the infrastructure caused is a wrong advantage (deepgym gives those no verdict)",
    ):
        echo(text, console)
    columns = [
        Column("schedule"),
        *(
            Column(header, justify="right")
            for header in ("timeout (s)", "timeout rate", "P(stall)", "step (s)", "GPU idle")
        ),
    ]
    rows: list[list[Cell]] = [
        [
            s.name,
            f"{s.timeout_s:g}",
            _share(s.timeout_rate),
            _share(s.p_stall),
            f"{s.step_s:.2f}",
            _share(s.idle),
        ]
        for s in (r.barrier, r.pipelined, r.derived)
    ]
    print_table(console, "predicted step", columns, rows)
    columns = [
        Column("fix"),
        Column("what", wrap=True),
        *(Column(h, justify="right") for h in ("step (s)", "gain (s)", "gain")),
    ]
    rows = [
        [f.name, f.detail, f"{f.step_s:.2f}", f"{f.gain_s:.2f}", _share(f.gain_share)]
        for f in r.fixes
    ]
    print_table(console, "fixes, in order of predicted gain", columns, rows)


def _require_extra(what: str, extra: str, *modules: str, instead: str = "") -> None:
    """One ``error:`` line naming the extra to install when one of ``modules`` cannot be
    imported (``instead``: the option that does without): checked before any work, as ``serve``
    checks the server extra."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(
                f"{what} needs the {extra} extra ({module} is not installed): "
                f"{install_extra(extra)}{instead}"
            ) from None


def _check_price(
    batch: int, group: int, busy: float, training: float | None, timeout: float,
    slots: int | None, max_parallel: int, plot: Path | None,
) -> None:  # fmt: skip
    """Bad options, before anything runs: one ``Error:`` line each."""
    positive_int(batch, "--batch")
    positive_int(group, "--group")
    positive_int(max_parallel, "--max-parallel")
    if slots is not None:
        positive_int(slots, "--slots")
    if batch % group:
        raise ConfigError(f"--batch ({batch}) must be a multiple of --group ({group})")
    positive_number(busy, "--busy")
    positive_number(timeout, "--timeout")
    if training is not None and not (math.isfinite(training) and 0 <= training <= busy):
        raise ConfigError(f"--training must be between 0 and --busy ({busy:g}), got {training!r}")
    if plot is not None and not plot.parent.is_dir():
        raise ConfigError(f"--plot {plot}: no such directory {plot.parent}")


@click.command("price")
@click.argument("env")
@click.option(
    "--answers",
    "answers_file",
    required=True,
    type=click.Path(path_type=Path),
    help='JSONL of answers (strings or {"answer": ...}) or a directory of .py files.',
)
@click.option("--batch", type=int, default=128, show_default=True, help="Completions per step.")
@click.option("--group", type=int, default=8, show_default=True, help="Completions per group.")
@click.option(
    "--busy",
    type=float,
    default=24.5,
    show_default=True,
    help="Seconds of a step the GPU is busy (generation + training).",
)
@click.option(
    "--training",
    type=float,
    default=None,
    help="Seconds of --busy that are training (default: half).",
)
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="The reward timeout under study: the answers run under it, a timeout costs it.",
)
@click.option(
    "--slots",
    type=int,
    default=None,
    help="Sandboxes at once during training (default: one per completion).",
)
@click.option("--sandbox", type=click.Choice(SANDBOXES), default=None, help="The sandbox backend.")
@click.option("--max-parallel", type=int, default=8, show_default=True, help="Runs at once here.")
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="Write a PNG here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def price_cmd(
    env: str,
    answers_file: Path,
    batch: int,
    group: int,
    busy: float,
    training: float | None,
    timeout: float,
    slots: int | None,
    sandbox: str | None,
    max_parallel: int,
    plot: Path | None,
    as_json: bool,
) -> None:
    """Measure ENV's reward service times on real answers; predict what they cost a step."""
    from deepgym.latency.price import build_report, measure, service_samples

    _check_price(batch, group, busy, training, timeout, slots, max_parallel, plot)
    if plot is not None:
        _require_extra("--plot", "latency", "matplotlib", "numpy", instead=", or leave out --plot")
    environment = load_env(env)
    _labels, answers = read_batch_answers(answers_file)
    with common.make_client(sandbox) as dg, progress(f"price {environment.name}") as advance:
        result, derived = measure(
            dg,
            environment,
            answers,
            batch=batch,
            group=group,
            timeout=timeout,
            max_parallel=max_parallel,
            progress=advance,
        )
    samples, timed_out = service_samples(result.results)
    report = build_report(
        samples,
        timed_out,
        env=environment.name,
        batch=batch,
        group=group,
        busy=busy,
        timeout=timeout,
        derived_limit=derived,
        training=training,
        slots=slots,
    )
    # The report first: a plot that cannot be written loses nothing that was measured.
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        _price_text(report)
    if plot is not None:
        _write_plot(report, plot)
        if not as_json:
            click.echo(f"plot: {plot}")


def _write_plot(report: PriceReport, plot: Path) -> None:
    """``plot_price``, its failure one ``Error:`` line (the report is printed already)."""
    from deepgym.latency.plots import plot_price

    try:
        plot_price(report, plot)
    except Exception as exc:  # matplotlib's own errors have no common base
        raise ConfigError(
            f"--plot {plot}: not written ({type(exc).__name__}: {exc}); the report is above"
        ) from None


# -- sweep -------------------------------------------------------------------------------------


def _sweep_text(result: SweepResult) -> None:
    console = out()
    cfg = result.config
    echo(
        f"sweep: {cfg.blocks} blocks x {len(cfg.arms)} arms on {result.device}; "
        f"{cfg.prompts} prompts x {cfg.group} = {cfg.batch} completions; warm-up busy "
        f"{result.warmup_busy:.3f} s, one seed-second (the dial's unit: busy / 24.5 s) = "
        f"{result.seconds_per_seed_second * 1000:.2f} ms; {result.elapsed:.0f} s",
        console,
    )
    headers = ("steps", "step", "model", "generation", "reward", "training", "idle", "stalled")
    columns = [Column("arm"), *(Column(h, justify="right") for h in headers)]
    rows: list[list[Cell]] = []
    for a in result.arms.values():
        model = "-" if math.isnan(a.model_step) else f"{a.model_step:.3f}"
        rows.append(
            [
                a.arm,
                str(a.steps),
                f"{a.step:.3f}",
                model,
                f"{a.generation:.3f}",
                f"{a.reward_wait:.3f}",
                f"{a.training:.3f}",
                f"{a.idle:.1%}",
                f"{a.stall_share:.0%}",
            ]
        )
    print_table(console, "arms (means per step, seconds)", columns, rows)
    m = result.metrics
    for key, label in (
        ("step_ratio.pipe:1/stall:1", "pipelined / barrier step, one timeout (dial)"),
        ("raw_step_ratio.pipe:1/stall:1", "  the same, raw means"),
        ("step_ratio.sandbox-pipe/sandbox", "pipelined / barrier step, real sandbox reward"),
        ("drift.generation_cv", "generation drift across arms (CV)"),
        ("drift.training_cv", "training drift across barrier arms (CV)"),
    ):
        if key in m:
            click.echo(f"{label}: {m[key]:.3f}")
    if result.verdicts:
        _verdict_table(result.verdicts)
    for name, path in result.files.items():
        if not name.startswith("shard "):
            click.echo(f"{name}: {path}")


def _verdict_table(verdicts: Sequence[Finding]) -> None:
    from deepgym.latency.predictions import verdict_rows

    rows: list[list[Cell]] = []
    for row in verdict_rows(verdicts):
        style = {"HELD": "green", "REFUTED": "red"}.get(row[-1], "yellow")
        rows.append([*row[:-1], Text(row[-1], style=f"bold {style}")])
    columns = [Column(h) for h in ("id", "metric", "expected", "measured", "verdict")]
    print_table(out(), "pre-registered predictions", columns, rows)
    held = sum(v.status == "held" for v in verdicts)
    click.echo(f"{held} of {len(verdicts)} predictions held")


def _arms(spec: str | None) -> Sequence[str] | None:
    if spec is None:
        return None
    arms = [s.strip() for s in spec.split(",") if s.strip()]
    if not arms:
        raise ConfigError("--arms must name at least one arm")
    return arms


@click.command("sweep")
@click.option("--blocks", type=int, default=None, help=f"Randomised complete blocks [{_D.blocks}].")
@click.option("--prompts", type=int, default=None, help=f"Prompts per step [{_D.prompts}].")
@click.option("--group", type=int, default=None, help=f"Completions per prompt [{_D.group}].")
@click.option(
    "--tokens", type=int, default=None, help=f"New tokens per completion [{_D.new_tokens}]."
)
@click.option("--d-model", type=int, default=None, help=f"Model width [{_D.model.d_model}].")
@click.option("--layers", type=int, default=None, help=f"Transformer blocks [{_D.model.n_layers}].")
@click.option("--arms", default=None, help=f"Comma-separated arms [{','.join(_D.arms)}].")
@click.option("--no-sandbox", is_flag=True, help="Leave out the real-sandbox arms.")
@click.option("--env", default=None, help=f"Built-in environment of the sandbox arms [{_D.env}].")
@click.option(
    "--seed",
    type=int,
    default=None,
    help="The random seed: it fixes the model's random weights, its prompts and sampling, "
    "each block's order of arms and the dial's random draws; the same seed repeats them "
    f"[{_D.seed}].",
)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None, help=f"[{_D.device}]"
)
@click.option("--threads", type=int, default=None, help=f"torch CPU threads [{_D.threads}].")
@click.option(
    "--predictions",
    "predictions_file",
    type=click.Path(path_type=Path),
    default=None,
    help="A predictions TOML file (default: the one deepgym ships).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("deepgym-sweep"),
    show_default=True,
    help="Directory for shards, timeline, summary and plots.",
)
@click.option("--no-plot", is_flag=True, help="Skip the plots.")
@click.option("--no-profile", is_flag=True, help="Skip the profiler cross-check.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def sweep_cmd(
    blocks: int | None,
    prompts: int | None,
    group: int | None,
    tokens: int | None,
    d_model: int | None,
    layers: int | None,
    arms: str | None,
    no_sandbox: bool,
    env: str | None,
    seed: int | None,
    device: str | None,
    threads: int | None,
    predictions_file: Path | None,
    out: Path,
    no_plot: bool,
    no_profile: bool,
    as_json: bool,
) -> None:
    """A real GRPO step on a small random-weight model, with the reward on a dial (needs torch)."""
    _require_extra("the sweep", "sweep", "torch")
    if not no_plot:
        _require_extra(
            "plotting the sweep", "latency", "matplotlib", "numpy", instead=", or give --no-plot"
        )
    from deepgym.latency.analysis import json_safe
    from deepgym.latency.predictions import load_predictions
    from deepgym.latency.sweep import run_sweep

    given = {
        "blocks": blocks,
        "prompts": prompts,
        "group": group,
        "new_tokens": tokens,
        "env": env,
        "seed": seed,
        "device": device,
        "threads": threads,
    }
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    shape = {"d_model": d_model, "n_layers": layers}
    if any(v is not None for v in shape.values()):
        model = {k: v for k, v in shape.items() if v is not None}
        changes["model"] = replace(_D.model, **model)
    chosen = _arms(arms)
    if chosen is not None:
        changes["arms"] = tuple(chosen)
    cfg = replace(SweepConfig(), **changes, plot=not no_plot, profile=not no_profile, out=out)
    if no_sandbox:
        cfg = replace(cfg, arms=tuple(a for a in cfg.arms if not a.startswith("sandbox")))
    predictions = load_predictions(predictions_file)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    with progress("sweep") as advance:
        result = run_sweep(cfg, predictions, progress=lambda d, t, _label: advance(d, t))
    if as_json:
        click.echo(json.dumps(json_safe(result.to_dict()), indent=2, allow_nan=False))
    else:
        _sweep_text(result)
