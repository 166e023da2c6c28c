"""Evaluate a model: sample n answers per problem from a ``ChatModel``, score each one the moment
it arrives, and report pass@k (``deepgym.eval.passk``).

Invariants:

- The prompt is the environment's ``task``; the answer is the completion's code by
  ``deepgym.completions.answer_of`` (a completion endpoint's text continues the prompt, so the
  prompt is its prefix when it has no fenced block).
- Generation and scoring overlap: every sample is a task that generates (at most the model's
  ``concurrency`` requests in flight) and then scores (at most ``max_parallel`` runs), so the
  wall time is close to the generation time alone.
- A sample the model server could not give (``GenerationError``: an error status, a reply over
  the cap, a request past its deadline, ... ``deepgym.eval.model``) has no verdict: its result is
  a ``generation_error`` one (stored like any other, so a finished run has a result for every
  sample), counted in ``generation_failed`` and by cause in ``generation_failures()``, left out
  of n, never scored 0; a resumed eval asks the model for it again. It fails that sample only:
  the others are generated and scored as if it had not happened.
- The model's text reaches nothing that can raise for it: ``ChatModel`` gives only a text that
  is a valid answer, and a text refused as an answer all the same (``ConfigError`` from the
  scoring, such as a service that refuses a request that large) is that sample's
  ``generation_error`` (``answer_refused``); its text is kept, so a resumed eval scores it
  again. A refusal of the environment itself (unknown to a service, verifier code refused)
  would fail every sample alike: it stops the run, as any misconfiguration does.
- Scoring is per problem group: with ``dedupe`` (the default) an answer already scored, or
  being scored, for the same problem is not run again; it shares that run's result (a model
  sampled n times often writes the same code twice; a deterministic verifier gives it the same
  verdict). ``ModelEval.runs`` counts the sandbox runs made.
- Sample ``j`` of problem ``p`` is index ``p * samples + j``, problem-major. With a run store,
  each sample's text is committed before it is scored and each result after, so a resumed eval
  (``resume=``) asks the model only for the indices without a stored text, scores again what
  has a text but no verdict, and keeps every stored verdict.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deepgym.completions import answer_of
from deepgym.eval.model import GENERATION_CAUSES, ChatModel, Sampler
from deepgym.eval.passk import Counts, Metrics, difficulty, metrics
from deepgym.exceptions import (
    ConfigError,
    GenerationError,
    UnknownEnvironmentError,
    VerifierCodeRefusedError,
)
from deepgym.models import Environment, RunResult
from deepgym.validation import bounded_int

if TYPE_CHECKING:
    from deepgym.client import AsyncDeepGym
    from deepgym.store import RunStore
    from deepgym.types import ProgressFn

__all__ = ["ModelEval", "Sample", "evaluate_model", "model_of_run", "stored_eval"]


@dataclass
class Sample:
    """One sampled answer: its text (None: not generated), its result (None: not scored) and,
    for a sample the server did not give, why (``error``, and ``cause`` from
    ``deepgym.eval.model.GENERATION_CAUSES``)."""

    problem: str
    index: int
    text: str | None = None
    answer: str = ""
    result: RunResult | None = None
    error: str = ""
    cause: str = ""

    @property
    def generation_failed(self) -> bool:
        """The server gave no sample, or none that could be an answer (no verdict)."""
        if self.result is None:
            return self.text is None
        return self.result.error_type == "generation_error"

    @property
    def has_verdict(self) -> bool:
        """A result with a verdict (a sample not generated, or not judged, has none)."""
        return self.result is not None and self.result.has_verdict

    @property
    def passed(self) -> bool:
        """Judged and passed."""
        return self.result is not None and self.result.passed


@dataclass
class ModelEval:
    """A model eval: every sample, problem-major, and its metrics (``deepgym.eval.passk``)."""

    model: dict[str, Any]
    problems: list[str]
    samples_per_problem: int
    samples: list[Sample]
    ks: tuple[int, ...] = (1,)
    hat_ks: tuple[int, ...] = ()
    execution_time_ms: float = 0.0
    run_id: str | None = None
    runs: int = 0
    """Sandbox runs this call made (fewer than the samples scored where answers repeat)."""
    metrics: Metrics = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = metrics(self.counts(), self.ks, self.hat_ks)

    @property
    def generation_failed(self) -> int:
        """Samples the model server did not give (no verdict, left out of n)."""
        return sum(1 for s in self.samples if s.generation_failed)

    def generation_failures(self) -> dict[str, int]:
        """``generation_failed`` by cause (``deepgym.eval.model.GENERATION_CAUSES``), the most
        frequent first."""
        causes = Counter(s.cause or "unknown" for s in self.samples if s.generation_failed)
        return dict(causes.most_common())

    @property
    def distinct_answers(self) -> int:
        """Distinct answers among the generated samples, counted per problem."""
        return len({(s.problem, s.answer) for s in self.samples if s.text is not None})

    def counts(self) -> dict[str, Counts]:
        """Each problem's judged count, passed count, scores and samples without a verdict."""
        out: dict[str, Counts] = {}
        n = self.samples_per_problem
        for p, name in enumerate(self.problems):
            group = self.samples[p * n : (p + 1) * n]
            judged = [s.result for s in group if s.result is not None and s.result.has_verdict]
            out[name] = Counts(
                n=len(judged),
                c=sum(1 for r in judged if r.passed),
                no_verdict=len(group) - len(judged),
                scores=tuple(r.score for r in judged),
            )
        return out

    def difficulty(self) -> tuple[list[str], list[str], list[str], list[str]]:
        """``(learnable, too_easy, too_hard, unjudged)``: ``deepgym.eval.passk.difficulty``."""
        return difficulty(self.counts())


def stored_eval(store: RunStore, run_id: str) -> ModelEval:
    """The stored model eval ``run_id`` as a ``ModelEval`` (its texts, results and metrics as
    the run store holds them; a sample with no text and no result is one not yet asked for)."""
    info = store.run(run_id)
    p = info.params
    if not isinstance(p.get("model"), Mapping):
        raise ConfigError(f"run {run_id} is not a model eval (its params name no model)")
    n = int(p["samples"])
    names = [name for name, _ in store.inputs(run_id)]
    texts, results = store.samples(run_id), store.results(run_id)
    samples = []
    for i, name in enumerate(names):
        r = results.get(i)
        s = Sample(name, i, texts.get(i), result=r)
        if r is not None and r.error_type == "generation_error":
            cause, _, said = r.error.partition(": ")
            s.cause, s.error = (cause, said) if cause in GENERATION_CAUSES else ("", r.error)
        samples.append(s)
    return ModelEval(
        model=dict(p["model"]),
        problems=names[::n],
        samples_per_problem=n,
        samples=samples,
        ks=tuple(p.get("k", [1])),
        hat_ks=tuple(p.get("pass_hat", [])),
        execution_time_ms=info.execution_time_ms or 0.0,
        run_id=run_id,
    )


def model_of_run(params: Mapping[str, Any]) -> ChatModel:
    """The ``ChatModel`` a stored model eval used (its key read again from the environment)."""
    m = params.get("model")
    if not isinstance(m, Mapping):
        raise ConfigError("this run is not a model eval (its params name no model)")
    # the deadline and the reply cap, where the run kept them (the defaults otherwise)
    limits = {k: m[k] for k in ("timeout", "max_reply_bytes") if k in m}
    return ChatModel(
        m["url"],
        m["model"],
        temperature=m["temperature"],
        max_tokens=m["max_tokens"],
        completions=m["completions"],
        system=m.get("system"),
        **limits,
    )


class _GroupScorer:
    """Scores the answers of each problem group, once per distinct answer with ``dedupe``."""

    def __init__(
        self,
        dg: AsyncDeepGym,
        max_parallel: int,
        time_limit: float | None,
        dedupe: bool,
        judged: Sequence[Sample],
        samples: int,
    ) -> None:
        self._dg = dg
        self._slots = asyncio.Semaphore(max_parallel)
        self._time_limit = time_limit
        self._dedupe = dedupe
        self._done: dict[tuple[int, str], RunResult] = {}
        self._running: dict[tuple[int, str], asyncio.Task[RunResult]] = {}
        self.runs = 0
        for s in judged:  # a resumed eval's stored verdicts
            if dedupe and s.text is not None and s.result is not None and s.result.has_verdict:
                self._done.setdefault((s.index // samples, s.answer), s.result)

    async def _run(self, env: Environment, answer: str) -> RunResult:
        async with self._slots:
            self.runs += 1
            return await self._dg.run_one(env, answer, time_limit=self._time_limit)

    async def score(self, problem: int, env: Environment, answer: str) -> RunResult:
        """``answer``'s result on ``env`` (problem number ``problem``): a new run, or the one
        its twin got (a copy)."""
        if not self._dedupe:
            return await self._run(env, answer)
        key = (problem, answer)
        if key in self._done:
            return self._done[key].model_copy()
        task = self._running.get(key)
        if task is not None:
            return (await task).model_copy()
        task = asyncio.ensure_future(self._run(env, answer))
        self._running[key] = task
        try:
            result = await task
        finally:
            del self._running[key]
        self._done[key] = result
        return result


async def _one(
    problem: int,
    env: Environment,
    s: Sample,
    model: ChatModel,
    sample: Sampler,
    scorer: _GroupScorer,
    on_text: Callable[[Sample], None],
) -> None:
    """Generate ``s`` (unless it has its text), then score it."""
    if s.text is None:
        try:
            text = await sample(env.task)
        except GenerationError as exc:
            _failed(s, env, str(exc), exc.cause)
            return
        s.text = text
        s.answer = answer_of(text, env.task if model.completions else "")
        on_text(s)
    s.error, s.cause = "", ""
    try:
        s.result = await scorer.score(problem, env, s.answer)
    except (UnknownEnvironmentError, VerifierCodeRefusedError):
        raise  # the environment's, not this text's: every sample would fail alike
    except ConfigError as exc:
        _failed(s, env, f"the answer was refused before scoring: {exc}", "answer_refused")


def _failed(s: Sample, env: Environment, error: str, cause: str) -> None:
    """``s`` has no verdict: its generation failed for ``cause``."""
    s.error, s.cause = error, cause
    # the cause leads the stored error, so a run read back from the store keeps it
    s.result = RunResult.no_verdict("generation_error", f"{cause}: {error}", env_name=env.name)


def _store_hooks(
    store: RunStore | None, run_id: str | None, again: set[int]
) -> tuple[Callable[[Sample], None], Callable[[Sample], None]]:
    def on_text(s: Sample) -> None:
        if store is not None and run_id is not None:
            store.record_sample(run_id, s.index, s.text or "", s.answer)

    def on_result(s: Sample) -> None:
        if store is None or run_id is None or s.result is None:
            return
        if s.index in again:
            store.replace_no_verdict(run_id, s.index, s.result)
        else:
            store.record(run_id, s.index, s.result)

    return on_text, on_result


def _open_run(
    store: RunStore,
    resume: str | None,
    source: str,
    envs: Sequence[Environment],
    model: ChatModel,
    params: dict[str, Any],
) -> tuple[str, dict[int, str], dict[int, RunResult]]:
    """The run to record in (a new one, or ``resume`` checked against ``envs``), its stored
    texts and results."""
    n = params["samples"]
    names = [e.name for e in envs for _ in range(n)]
    if resume is None:
        return store.create_run("eval", source, names, [""] * len(names), params), {}, {}
    info = store.run(resume)
    if not isinstance(info.params.get("model"), Mapping):
        raise ConfigError(f"run {resume} is not a model eval: resume it with 'deepgym eval'")
    if info.params.get("samples") != n or [name for name, _ in store.inputs(resume)] != names:
        raise ConfigError(f"run {resume}: its problems or samples differ from the ones given")
    store.claim(resume)
    return resume, store.samples(resume), store.results(resume)


async def evaluate_model(
    dg: AsyncDeepGym,
    envs: Sequence[Environment],
    model: ChatModel,
    *,
    samples: int,
    k: Sequence[int] = (1,),
    pass_hat: Sequence[int] = (),
    max_parallel: int = 8,
    time_limit: float | None = None,
    dedupe: bool = True,
    source: str = "",
    meta: Mapping[str, str] | None = None,
    store: RunStore | None = None,
    resume: str | None = None,
    progress: ProgressFn | None = None,
    on_sample: Callable[[Sample], None] | None = None,
) -> ModelEval:
    """``AsyncDeepGym.eval_model``'s work (see there), on environments already resolved."""
    if any(not e.task for e in envs):
        bare = next(e.name for e in envs if not e.task)
        raise ConfigError(f"env {bare!r} has no task to prompt a model with")
    ks, hat_ks = tuple(k), tuple(pass_hat)
    for value in (*ks, *hat_ks):
        bounded_int(value, f"k (at most samples={samples})", 1, samples)
    params = {
        "model": model.describe(),
        "samples": samples,
        "k": list(ks),
        "pass_hat": list(hat_ks),
        "dedupe": dedupe,
    }
    if meta:
        params["meta"] = dict(meta)
    run_id: str | None = None
    texts: dict[int, str] = {}
    results: dict[int, RunResult] = {}
    if store is not None:
        run_id, texts, results = _open_run(
            store, resume, source or ",".join(e.name for e in envs), envs, model, params
        )
    elif resume is not None:
        raise ConfigError("resume= needs the run store that holds the run (store=)")
    all_samples = [
        Sample(envs[i // samples].name, i, texts.get(i), result=results.get(i))
        for i in range(len(envs) * samples)
    ]
    for s in all_samples:
        if s.text is not None:
            env = envs[s.index // samples]
            s.answer = answer_of(s.text, env.task if model.completions else "")
    todo = [s for s in all_samples if not s.has_verdict]
    again = {s.index for s in todo if s.result is not None}
    on_text, on_result = _store_hooks(store, run_id, again)
    done = len(all_samples) - len(todo)
    scorer = _GroupScorer(dg, max_parallel, time_limit, dedupe, all_samples, samples)
    t0 = time.monotonic()

    async def one(s: Sample, sample: Sampler) -> None:
        nonlocal done
        p = s.index // samples
        await _one(p, envs[p], s, model, sample, scorer, on_text)
        on_result(s)
        done += 1
        if on_sample is not None:
            on_sample(s)
        if progress is not None:
            progress(done, len(all_samples))

    try:
        async with model.connect() as sample, asyncio.TaskGroup() as tg:
            for s in todo:
                tg.create_task(one(s, sample))
    except BaseException:
        if store is not None and run_id is not None:
            store.finish(run_id, "stopped", (time.monotonic() - t0) * 1000.0)
        raise
    elapsed = (time.monotonic() - t0) * 1000.0
    if store is not None and run_id is not None:
        store.finish(run_id, "complete", elapsed)
    return ModelEval(
        model=model.describe(),
        problems=[e.name for e in envs],
        samples_per_problem=samples,
        samples=all_samples,
        ks=ks,
        hat_ks=hat_ks,
        execution_time_ms=elapsed,
        run_id=run_id,
        runs=scorer.runs,
    )
