"""``eval_model`` end to end on a fake backend, against the scripted OpenAI-protocol server:
metrics, no-verdict samples left out of n, overlap, the run store and resume after SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from deepgym.client import AsyncDeepGym
from deepgym.engines.remote import RemoteEngine
from deepgym.eval.evaluate import ModelEval, Sample, model_of_run
from deepgym.eval.model import ChatModel, RetryPolicy
from deepgym.exceptions import ConfigError, VerifierCodeRefusedError
from deepgym.models import Environment
from deepgym.server.inputs import Limits
from deepgym.store import RunStore
from tests.eval import hostile_eval
from tests.eval.child_eval import PROBLEMS, SAMPLES, client
from tests.eval.openai_server import serve
from tests.fakes import FakeBackend
from tests.server.conftest import TOKEN, fake_app

FAST = RetryPolicy(attempts=2, base_s=0.001, max_s=0.01)
ROOT = Path(__file__).resolve().parents[2]


def test_metrics_and_failures_without_a_verdict() -> None:
    scripts = {
        "P0": ["text:pass"],
        "P1": ["text:```python\npass\n```", "text:fail"],  # the fenced block is the answer
        "P2": ["429", *["text:fail", "null"] * 4],  # one retry; "" passes the fake
        "P3": ["500"],  # every sample a generation failure
    }
    seen: list[Sample] = []
    with serve(scripts) as (url, server), client() as dg:
        model = ChatModel(url, "m", retry=FAST)
        ev = dg.eval_model(PROBLEMS, model, samples=SAMPLES, k=(1, 2), on_sample=seen.append)
    assert len(seen) == len(ev.samples) == 16
    assert sorted(s.answer for s in ev.samples[4:8]) == ["fail", "fail", "pass\n", "pass\n"]
    counts = ev.counts()
    assert (counts["p0"].n, counts["p0"].c) == (4, 4)
    assert (counts["p1"].n, counts["p1"].c) == (4, 2)
    assert counts["p3"].n == 0 and counts["p3"].no_verdict == 4
    assert ev.generation_failed == 4, [s.error for s in ev.samples if s.text is None]
    assert ev.generation_failures() == {"http_error": 4}
    for s in ev.samples[12:]:  # no verdict, never a 0: the server's failure, not the answer's
        assert s.result is not None and "HTTP 500" in s.error
        assert (s.result.has_verdict, s.result.error_type) == (False, "generation_error")
    m = ev.metrics
    assert (m.samples, m.judged, m.no_verdict) == (16, 12, 4)
    assert m.problems_short[1] == 1  # p3 is left out of pass@k, not scored 0
    assert m.pass_at[1] == pytest.approx((1.0 + 0.5 + counts["p2"].c / 4) / 3)
    assert ev.difficulty()[3] == ["p3"]
    assert server.requests["P3"] == SAMPLES * FAST.attempts, server.requests


def test_a_sample_the_sandbox_cannot_judge_has_no_verdict() -> None:
    with serve({"P0": ["text:down"]}, default=["text:pass"]) as (url, _), client() as dg:
        ev = dg.eval_model(PROBLEMS[:2], ChatModel(url, "m"), samples=2)
    c = ev.counts()
    assert (c["p0"].n, c["p0"].no_verdict, c["p1"].n) == (0, 2, 2)
    assert ev.generation_failed == 0 and ev.metrics.pass_at == {1: 1.0}


def test_completions_continue_the_prompt() -> None:
    with serve(default=["text:\n    return 1\n"]) as (url, _), client() as dg:
        ev = dg.eval_model(PROBLEMS[:1], ChatModel(url, "m", completions=True), samples=1)
    assert ev.samples[0].answer == "P0\n    return 1\n"


class _Watching(FakeBackend):
    """A fake backend that notes, as each scoring starts, how many samples the server was
    asked for by then."""

    def __init__(self, asked: Any) -> None:
        super().__init__()
        self.asked = asked
        self.seen: list[int] = []

    async def run(self, job: Any) -> Any:
        self.seen.append(self.asked())
        return await super().run(job)


def test_generation_and_scoring_overlap() -> None:
    """16 samples, 4 in flight, 50 ms each to generate: each is scored as it arrives, so the
    first scoring starts while most samples are yet to be asked for (an eval that scored after
    the generation would start with all 16 asked). Judged on the order of events, never on the
    clock."""
    with serve(default=["slow:0.05:pass"]) as (url, server):
        backend = _Watching(lambda: server.total)
        with client(backend) as dg:
            model = ChatModel(url, "m", concurrency=4)
            dg.eval_model(PROBLEMS, model, samples=SAMPLES, max_parallel=4, dedupe=False)
    assert len(backend.seen) == 16 and backend.seen[0] < 16, backend.seen


@pytest.mark.parametrize(
    ("k", "what"),
    [((0,), "from 1 to 4, got 0"), ((5,), "samples=4"), ((True,), "got True")],
)
def test_bad_k_is_refused(k: tuple[int, ...], what: str) -> None:
    with client() as dg, pytest.raises(ConfigError, match=what):
        dg.eval_model(PROBLEMS, ChatModel("http://127.0.0.1:9/v1", "m"), samples=4, k=k)


def test_resume_after_sigkill_asks_only_for_the_missing_samples(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    with serve(default=["slow:0.1:pass"]) as (url, server):
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.eval.child_eval", url, str(path)], cwd=ROOT, env=env
        )
        try:
            deadline = time.monotonic() + 80  # (a loaded host may hold the child's start back)
            while time.monotonic() < deadline:
                if path.exists():
                    with RunStore(path) as store:
                        runs = store.runs()
                        if runs and len(store.samples(runs[0].id)) >= 5:
                            break
                time.sleep(0.02)
            else:
                pytest.fail("the child stored no samples")
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        with RunStore(path) as store:
            run_id = store.runs()[0].id
            kept = store.samples(run_id)
            asked = server.total
            assert 5 <= len(kept) < 16
            with client() as dg:
                ev = dg.eval_model(
                    PROBLEMS,
                    ChatModel(url, "m", concurrency=2),
                    samples=SAMPLES,
                    store=store,
                    resume=run_id,
                )
            assert server.total - asked == 16 - len(kept)
            assert ev.run_id == run_id and ev.metrics.pass_at[1] == 1.0
            assert store.run(run_id).complete
            assert len(store.samples(run_id)) == 16


def test_a_stored_run_keeps_the_models_limits() -> None:
    """A resume asks with the cap and the deadline the run started with (defaults for a run
    stored before they were kept)."""
    model = ChatModel("http://127.0.0.1:9/v1", "m", timeout=2.5, max_reply_bytes=1000)
    again = model_of_run({"model": model.describe()})
    assert (again.timeout, again.max_reply_bytes) == (2.5, 1000)
    old = {k: v for k, v in model.describe().items() if k not in ("timeout", "max_reply_bytes")}
    default = ChatModel("http://127.0.0.1:9/v1", "m")
    again = model_of_run({"model": old})
    assert (again.timeout, again.max_reply_bytes) == (default.timeout, default.max_reply_bytes)


def test_resume_checks_the_run(tmp_path: Path) -> None:
    with serve() as (url, _), RunStore(tmp_path / "r.sqlite") as store, client() as dg:
        ev = dg.eval_model(PROBLEMS[:1], ChatModel(url, "m"), samples=2, store=store)
        assert ev.run_id is not None
        with pytest.raises(ConfigError, match="differ"):
            dg.eval_model(
                PROBLEMS[:2], ChatModel(url, "m"), samples=2, store=store, resume=ev.run_id
            )
        assert [a for _, a in store.inputs(ev.run_id)] == ["pass", "pass"]


def test_identical_answers_of_a_problem_are_scored_once() -> None:
    """Each problem's samples: "pass", "pass", "fail", "pass": 2 distinct answers, 2 runs; the
    same answer of another problem is that problem's own run."""
    backend = FakeBackend()
    script = ["text:pass", "text:pass", "text:fail", "text:pass"]
    with serve(default=script) as (url, _), client(backend) as dg:
        ev = dg.eval_model(PROBLEMS, ChatModel(url, "m", concurrency=1), samples=SAMPLES)
    assert ev.runs == sum(backend.calls.values()) == 2 * len(PROBLEMS), backend.calls
    assert ev.distinct_answers == 2 * len(PROBLEMS)
    assert [c.c for c in ev.counts().values()] == [3] * len(PROBLEMS)
    assert all(s.result is not None and s.result.env_name == s.problem for s in ev.samples)
    backend = FakeBackend()
    with serve(default=script) as (url, _), client(backend) as dg:
        every = dg.eval_model(PROBLEMS, ChatModel(url, "m"), samples=SAMPLES, dedupe=False)
    assert every.runs == sum(backend.calls.values()) == len(PROBLEMS) * SAMPLES
    assert every.metrics.pass_at == ev.metrics.pass_at


def test_twins_in_flight_wait_for_one_run() -> None:
    """Four identical answers arriving together: one run, three waiting on it."""
    backend = FakeBackend()
    with serve(default=["text:sleep:0.2"]) as (url, _), client(backend) as dg:
        ev = dg.eval_model(PROBLEMS[:1], ChatModel(url, "m", concurrency=4), samples=SAMPLES)
    assert backend.calls["sleep:0.2"] == 1 and ev.runs == 1
    assert ev.metrics.pass_at[1] == 1.0


def test_a_generation_failure_is_stored_and_asked_again_on_resume(tmp_path: Path) -> None:
    with RunStore(tmp_path / "r.sqlite") as store, client() as dg:
        with serve({"P1": ["500"]}, default=["text:pass"]) as (url, _):
            ev = dg.eval_model(
                PROBLEMS[:2], ChatModel(url, "m", retry=FAST), samples=2, store=store
            )
        assert ev.run_id is not None and ev.generation_failed == 2
        info = store.run(ev.run_id)
        assert info.complete and info.recorded == 4 and info.totals.no_verdict_count == 2
        stored = store.results(ev.run_id)
        assert {stored[i].error_type for i in (2, 3)} == {"generation_error"}
        with serve(default=["text:pass"]) as (url, server):
            again = dg.eval_model(
                PROBLEMS[:2], ChatModel(url, "m"), samples=2, store=store, resume=ev.run_id
            )
        assert server.requests == {"P1": 2}  # only the failed samples are asked for again
        assert again.generation_failed == 0 and again.metrics.pass_at[1] == 1.0
        assert store.run(ev.run_id).totals.no_verdict_count == 0


HOSTILE = {
    "P0": ["huge:83886080", "text:pass"],  # 80 MiB: more than an answer may hold (64 Mi chars)
    "P1": ["endless:200", "text:pass"],
    "P2": ["trickle:0.05:" + "x" * 300, "text:pass"],  # 20 s, each byte on time
}
PEAK_GROWTH_KIB = 32 * 2**10
"""What a hostile eval may add to its process's peak memory: a few capped replies in flight."""


def test_a_hostile_server_fails_one_sample_never_the_run(tmp_path: Path) -> None:
    """A reply over the cap (declared, or endless) and one that trickles past the deadline are
    each their sample's generation error; the other samples are judged, memory stays bounded,
    the store holds every result, and a resume asks again for those three only."""
    path = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    with serve(HOSTILE) as (url, _):
        child = subprocess.run(
            [sys.executable, "-m", "tests.eval.hostile_eval", url, str(path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.splitlines()[-1])
    assert report["by_cause"] == {"reply_too_large": 2, "deadline": 1}, report["errors"]
    assert (report["judged"], report["generation_failed"]) == (5, 3)
    growth = report["peak_kib"] - report["rss_before_kib"]
    assert growth < PEAK_GROWTH_KIB, f"the peak RSS grew by {growth} KiB"
    with RunStore(path) as store:
        run_id = report["run_id"]
        info = store.run(run_id)
        assert info.complete and info.recorded == 8 and info.totals.no_verdict_count == 3
        assert len(store.samples(run_id)) == 5
        with serve() as (url, server), client() as dg:
            ev = dg.eval_model(
                PROBLEMS,
                hostile_eval.model(url),
                samples=hostile_eval.SAMPLES,
                store=store,
                resume=run_id,
            )
        assert server.requests == {"P0": 1, "P1": 1, "P2": 1}
        assert ev.metrics.judged == 8 and ev.generation_failed == 0
        assert store.run(run_id).totals.no_verdict_count == 0


def _remote_eval(envs: list[Environment], url: str, app: Any) -> ModelEval:
    """``eval_model`` in remote mode, against ``app`` (the service) in process."""
    engine = RemoteEngine("http://testserver", TOKEN, transport=httpx.ASGITransport(app=app))

    async def go() -> ModelEval:
        dg = AsyncDeepGym(engine=engine)
        try:
            return await dg.eval_model(envs, ChatModel(url, "m", retry=FAST), samples=2)
        finally:
            await dg.close()

    return asyncio.run(go())


def test_an_answer_the_service_refuses_is_that_samples_generation_error() -> None:
    """The model's text is more than the service takes in one request (413): that sample has no
    verdict, the others are judged."""
    app, _ = fake_app(token=TOKEN, limits=Limits(max_body_bytes=4096))
    with serve({"P1": ["text:" + "x" * 10_000, "text:pass"]}) as (url, _):
        ev = _remote_eval(PROBLEMS[:2], url, app)
    assert ev.generation_failures() == {"answer_refused": 1}
    assert ev.metrics.judged == 3 and ev.generation_failed == 1
    refused = next(s for s in ev.samples if s.cause)
    assert refused.problem == "p1" and refused.text == "x" * 10_000  # kept: scored on resume
    assert refused.result is not None and refused.result.error_type == "generation_error"
    assert "4096 bytes" in refused.error


def test_an_environment_the_service_refuses_stops_the_run() -> None:
    """Verifier code the service does not run fails every sample alike: raised, not counted."""
    env = PROBLEMS[0].model_copy(
        update={"verifier_code": "def verify(solution, test_cases):\n    return 1.0\n"}
    )
    app, _ = fake_app(token=TOKEN)
    with serve() as (url, _), pytest.raises(ExceptionGroup) as err:
        _remote_eval([env], url, app)
    assert err.group_contains(VerifierCodeRefusedError)
