"""``deepgym eval --model-url URL --model NAME``: evaluate a model (``DeepGym.eval_model``).

The metrics come from the library (``deepgym.eval.passk``), never recomputed here. A sample without
a verdict (not generated, or not judged) is reported as such and left out of n, never a 0; the
samples not generated are counted by cause (``deepgym.eval.model.GENERATION_CAUSES``).
With the run store, every sample's text and result are recorded as they come; ``eval --resume
ID`` of a model eval rebuilds the model from the stored run (the key read again from its
environment variable) and asks it only for the samples the store has no text for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from deepgym.cli import common
from deepgym.cli.common import EXIT_NO_VERDICT, CliError, Interrupted
from deepgym.envs.registry import list_suites
from deepgym.eval.evaluate import ModelEval, Sample, model_of_run
from deepgym.eval.model import MAX_REPLY_BYTES, ChatModel
from deepgym.models import Environment
from deepgym.store import RunStore
from deepgym.text import clip, short_cause
from deepgym.validation import MAX_TEXT_CHARS, number, seconds

__all__ = [
    "ModelOptions",
    "parse_ks",
    "print_summary",
    "run_model_eval",
    "summary_json",
    "summary_lines",
]


def parse_ks(text: str, what: str) -> list[int]:
    """``"1,10"`` as ``[1, 10]``; a bad list raises ``CliError`` naming ``what``."""
    try:
        ks = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise CliError(f"{what} must be a comma-separated list of integers, got {text!r}") from None
    return ks


@dataclass(frozen=True)
class ModelOptions:
    """What ``eval`` was asked for besides the model: samples, metrics, outputs."""

    samples: int
    ks: list[int]
    hat_ks: list[int]
    max_parallel: int
    as_json: bool
    out: Path | None
    filter_path: Path | None
    dedupe: bool = True


LABEL_CHARS = 20
"""The progress bar's label at most (a list of environments is cut), so its rate and pass@1
fit on an 80-column terminal."""


@contextmanager
def _progress(title: str, console: Console | None = None) -> Iterator[Callable[[Sample], None]]:
    """A bar on stderr (on a terminal only) with samples/s and the running pass@1."""
    err = console or Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(clip(title, LABEL_CHARS), total=None, rate="")
    t0 = time.monotonic()
    state = {"done": 0, "judged": 0, "passed": 0}

    def advance(s: Sample) -> None:
        state["done"] += 1
        state["judged"] += s.has_verdict
        state["passed"] += s.passed
        speed = state["done"] / max(time.monotonic() - t0, 1e-9)
        p1 = f"pass@1 {state['passed'] / state['judged']:.3f}" if state["judged"] else "pass@1 -"
        bar.update(task, completed=state["done"], rate=f"{speed:.1f} samples/s, {p1}")

    with bar:
        yield advance


def summary_json(ev: ModelEval) -> dict[str, Any]:
    """The run as JSON: the model, the metrics, and each problem's counts."""
    m = ev.metrics
    learnable, easy, hard, unjudged = ev.difficulty()
    return {
        "run_id": ev.run_id,
        "model": ev.model,
        "samples_per_problem": ev.samples_per_problem,
        "problems": m.problems,
        "samples": m.samples,
        "judged": m.judged,
        "no_verdict": m.no_verdict,
        "generation_failed": ev.generation_failed,
        "generation_failures": ev.generation_failures(),
        "distinct_answers": ev.distinct_answers,
        "sandbox_runs": ev.runs,
        "mean_score": m.mean_score,
        "pass_at_k": {str(k): v for k, v in m.pass_at.items()},
        "pass_hat_k": {str(k): v for k, v in m.pass_hat.items()},
        "problems_short_of_k": {str(k): v for k, v in m.problems_short.items()},
        "difficulty": {
            "learnable": len(learnable),
            "too_easy": len(easy),
            "too_hard": len(hard),
            "unjudged": len(unjudged),
        },
        "per_problem": {
            name: {"n": c.n, "c": c.c, "no_verdict": c.no_verdict, "pass_rate": c.pass_rate}
            for name, c in ev.counts().items()
        },
        "execution_time_ms": ev.execution_time_ms,
    }


def print_summary(ev: ModelEval) -> None:
    """The run in a few lines: counts, pass@k, pass^k, mean score, time."""
    for text in summary_lines(ev):
        click.echo(text)


def summary_lines(ev: ModelEval, *, stored: bool = False) -> list[str]:
    """``print_summary``'s lines; ``stored``: a run read back from the store (its time is every
    resume's together, and the sandbox runs of each call are not kept)."""
    m = ev.metrics
    not_judged = m.no_verdict - ev.generation_failed
    lines = [
        f"Model {ev.model['model']} at {ev.model['url']}: {m.problems} problems x "
        f"{ev.samples_per_problem} samples",
        f"Judged: {m.judged}/{m.samples} samples; no verdict: {m.no_verdict} "
        f"({ev.generation_failed} not generated, {not_judged} not judged; left out of n)",
    ]
    causes = ev.generation_failures()
    if causes:
        lines.append("Not generated: " + ", ".join(f"{n} {c}" for c, n in causes.items()))
    for k, v in m.pass_at.items():
        short = m.problems_short.get(k, 0)
        lines.append(
            f"pass@{k}: {v:.4f}" + (f" ({short} problems with < {k} judged)" if short else "")
        )
    lines += [f"pass^{k}: {v:.4f}" for k, v in m.pass_hat.items()]
    if m.mean_score is not None:
        lines.append(f"Mean score (judged): {m.mean_score:.4f}")
    runs = "" if stored else f"; {ev.runs} sandbox runs"
    lines.append(
        f"Time: {ev.execution_time_ms / 1000:.1f} s for {m.samples} samples "
        f"({ev.distinct_answers} distinct answers{runs})"
    )
    if ev.run_id and not stored:
        lines.append(f"Run {ev.run_id} ('deepgym runs {ev.run_id}' shows every sample)")
    return lines


def _write_samples(path: Path, ev: ModelEval) -> None:
    n = ev.samples_per_problem
    with path.open("w", encoding="utf-8") as f:
        for s in ev.samples:
            r = s.result
            row = {
                "problem": s.problem,
                "sample": s.index % n,
                "text": s.text,
                "answer": s.answer if s.text is not None else None,
                "has_verdict": s.has_verdict,
                "passed": s.passed,
                "score": r.score if r is not None and r.has_verdict else None,
                "error_type": r.error_type if r is not None else None,
                "error": s.error or (r.error if r is not None else ""),
                "cause": s.cause or None,
            }
            f.write(json.dumps(row) + "\n")


def _write_filter(path: Path, ev: ModelEval) -> str:
    """Write the problems with a pass rate strictly between 0 and 1; returns the counts line."""
    learnable, easy, hard, unjudged = ev.difficulty()
    counts = ev.counts()
    with path.open("w", encoding="utf-8") as f:
        for name in learnable:
            c = counts[name]
            f.write(json.dumps({"env": name, "pass_rate": c.pass_rate, "n": c.n, "c": c.c}) + "\n")
    return (
        f"filter: {len(learnable)} problems with 0 < pass rate < 1 written to {path}; "
        f"too easy {len(easy)}, too hard {len(hard)}, no judged sample {len(unjudged)}"
    )


def run_model_eval(
    title: str,
    envs: Sequence[Environment],
    model: ChatModel,
    opts: ModelOptions,
    sandbox: str | None,
    store: RunStore | None,
    resume: str | None = None,
) -> None:
    """Evaluate ``model`` on ``envs`` with a progress bar, then report and write the files."""
    run_id = resume
    # a suite by its name, so the store's run names the suite ("humaneval"), not its members
    target: str | list[Environment] = title if title in list_suites() else list(envs)
    try:
        with common.make_client(sandbox) as dg, _progress(title) as advance:
            ev = dg.eval_model(
                target,
                model,
                samples=opts.samples,
                k=opts.ks,
                pass_hat=opts.hat_ks,
                max_parallel=opts.max_parallel,
                dedupe=opts.dedupe,
                store=store,
                resume=resume,
                on_sample=advance,
                meta=_meta(opts),
            )
    except KeyboardInterrupt:
        if store is None:
            raise Interrupted("nothing kept (--no-store)") from None
        run_id = run_id or store.runs(limit=1)[0].id
        kept = len(store.samples(run_id))
        raise Interrupted(
            f"{kept} sample texts stored in run {run_id}; to finish it: "
            f"deepgym eval --resume {run_id}"
        ) from None
    if opts.as_json:
        click.echo(json.dumps(summary_json(ev), indent=2))
    else:
        print_summary(ev)
    if opts.out is not None:
        _write_samples(opts.out, ev)
    if opts.filter_path is not None:
        click.echo(_write_filter(opts.filter_path, ev), err=True)
    if ev.samples and ev.generation_failed == len(ev.samples):
        raise NothingGenerated(_nothing_generated(ev))


class NothingGenerated(CliError):
    """Not one sample was generated: the model server failed (exit 3: no verdict)."""

    exit_code = EXIT_NO_VERDICT


def _nothing_generated(ev: ModelEval) -> str:
    """One line: no sample was generated, by cause, with the first failure's own words."""
    causes = ", ".join(f"{n} {c}" for c, n in ev.generation_failures().items())
    first = next((s.error for s in ev.samples if s.error), "")
    said = f" (first: {short_cause(first, 200)})" if first else ""
    return f"no sample was generated by {ev.model['url']}: {causes}{said}"


def _meta(opts: ModelOptions) -> dict[str, str]:
    """The output files the run was started with, kept for a resume."""
    meta = {}
    if opts.out is not None:
        meta["out"] = str(opts.out.resolve())
    if opts.filter_path is not None:
        meta["filter"] = str(opts.filter_path.resolve())
    return meta


def resume_model(
    store: RunStore,
    run_id: str,
    load: Callable[[str], list[Environment]],
    opts: ModelOptions,
    sandbox: str | None,
) -> None:
    """Finish the stored model eval ``run_id`` with the model and settings it was started with."""
    info = store.run(run_id)
    model = model_of_run(info.params)
    p = info.params
    opts = ModelOptions(
        samples=int(p["samples"]),
        ks=list(p.get("k", [1])),
        hat_ks=list(p.get("pass_hat", [])),
        max_parallel=opts.max_parallel,
        as_json=opts.as_json,
        out=opts.out or _kept_path(p, "out"),
        filter_path=opts.filter_path or _kept_path(p, "filter"),
        dedupe=bool(p.get("dedupe", True)),
    )
    have = len(store.samples(run_id))
    click.echo(
        f"run {run_id}: resuming ({have} of {info.total} samples stored; only the others are "
        "generated)",
        err=True,
    )
    run_model_eval(info.source, load(info.source), model, opts, sandbox, store, run_id)


def _kept_path(params: dict[str, Any], key: str) -> Path | None:
    """An output file the stored run was started with (``--out``, ``--filter``)."""
    meta = params.get("meta")
    value = meta.get(key) if isinstance(meta, dict) else None
    return Path(value) if isinstance(value, str) and value else None


_OPTIONS = [
    click.option(
        "--model-url",
        default=None,
        metavar="URL",
        help="Sample the answers from the OpenAI-compatible server at URL (its base, such as "
        "http://127.0.0.1:8000/v1) instead of reading --answers.",
    ),
    click.option("--model", "model_name", default=None, help="The model's name on that server."),
    click.option(
        "-n", "--samples", type=int, default=1, show_default=True, help="Samples per problem."
    ),
    click.option("--k", "ks", default="1", show_default=True, help="pass@k for these k (1,10)."),
    click.option("--pass-hat", default="", help="pass^k (every one of k passes) for these k."),
    click.option("--temperature", type=float, default=0.8, show_default=True),
    click.option("--max-tokens", type=int, default=512, show_default=True),
    click.option(
        "--concurrency", type=int, default=16, show_default=True, help="Requests in flight."
    ),
    click.option("--completions", is_flag=True, help="Use /completions (a base model)."),
    click.option(
        "--timeout",
        "request_timeout",
        type=float,
        default=300.0,
        show_default=True,
        help="Seconds one request may take in all, from the connect to the reply's last byte; "
        "past it, that sample is not generated (not asked again).",
    ),
    click.option(
        "--max-reply-mb",
        type=float,
        default=MAX_REPLY_BYTES / 2**20,
        show_default=True,
        help="A reply's size at most, in MiB; a longer one is that sample's generation error "
        "(not asked again).",
    ),
    click.option(
        "--api-key-env",
        default="OPENAI_API_KEY",
        show_default=True,
        help="The environment variable that holds the API key (unset: none sent).",
    ),
    click.option(
        "--out",
        "out_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Write every sample (text, answer, verdict) to this JSONL file.",
    ),
    click.option(
        "--filter",
        "filter_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Write the problems whose pass rate is strictly between 0 and 1 (for GRPO) here.",
    ),
    click.option(
        "--no-dedupe",
        is_flag=True,
        help="Run every sample, even one identical to a sample of the same problem already "
        "scored (by default it shares that run's result).",
    ),
]


def model_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``eval``'s options for evaluating a model."""
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def is_model_run(store: RunStore, run_id: str) -> bool:
    """Whether the stored run ``run_id`` is a model eval."""
    return isinstance(store.run(run_id).params.get("model"), dict)


def command(
    suite_or_envs: str | None,
    sandbox: str | None,
    max_parallel: int,
    as_json: bool,
    store: RunStore | None,
    args: dict[str, Any],
) -> None:
    """``eval --model-url``: check the options, build the model, run (the store is opened)."""
    if suite_or_envs is None:
        raise CliError("give SUITE_OR_ENVS to evaluate the model on")
    if not args["model_name"]:
        raise CliError("--model-url needs --model (the model's name on that server)")
    opts = ModelOptions(
        samples=args["samples"],
        ks=parse_ks(args["ks"], "--k"),
        hat_ks=parse_ks(args["pass_hat"], "--pass-hat"),
        max_parallel=max_parallel,
        as_json=as_json,
        out=args["out_path"],
        filter_path=args["filter_path"],
        dedupe=not args["no_dedupe"],
    )
    # click's float type lets "nan" through: number() checks the range.
    mib = number(args["max_reply_mb"], "--max-reply-mb", 2**-20, MAX_TEXT_CHARS / 2**20)
    model = ChatModel(
        args["model_url"],
        args["model_name"],
        api_key_env=args["api_key_env"] or None,
        temperature=args["temperature"],
        max_tokens=args["max_tokens"],
        concurrency=args["concurrency"],
        completions=args["completions"],
        timeout=seconds(args["request_timeout"], "--timeout"),
        max_reply_bytes=int(mib * 2**20),
    )
    envs = common.load_targets(suite_or_envs)
    run_model_eval(suite_or_envs, envs, model, opts, sandbox, store)


def resume_options(max_parallel: int, as_json: bool, args: dict[str, Any]) -> ModelOptions:
    """The options ``eval --resume`` of a model eval keeps from the command line."""
    return ModelOptions(
        samples=1,
        ks=[1],
        hat_ks=[],
        max_parallel=max_parallel,
        as_json=as_json,
        out=args["out_path"],
        filter_path=args["filter_path"],
    )
