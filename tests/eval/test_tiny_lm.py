"""``eval_model`` and ``deepgym eval --model-url`` against a real causal LM: a random-weight
``transformers`` Llama served on 127.0.0.1 (``tests/eval/tiny_lm_server.py``), its answers scored
in real sandboxes. Random weights write random bytes, so every sample is generated, judged and
failed: a wrong answer with a verdict, never a sample without one.

torch and transformers come with ``make test``'s extras (``scripts/install-torch.sh``, and trl's
dependencies); where they are missing (the core suite on other Pythons) the module is skipped.
Measured: about 7 s on 2 cores, most of it importing torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym.cli import cli
from deepgym.client import DeepGym
from deepgym.envs.registry import load_environment
from deepgym.eval.evaluate import ModelEval
from deepgym.eval.model import ChatModel
from deepgym.store import RunStore

pytest.importorskip("torch", reason="the tiny LM needs torch (make test's extras)")
pytest.importorskip("transformers", reason="the tiny LM needs transformers (trl's dependency)")

from tests.eval.tiny_lm_server import TinyLM, serve

pytestmark = pytest.mark.sandbox

NAMES = ["fizzbuzz", "two_sum"]
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[str, TinyLM]]:
    with serve() as served:
        yield served


def judged_wrong(ev: ModelEval) -> None:
    """Every sample generated and judged, none passed: a real model's random text."""
    assert ev.generation_failed == 0
    for s in ev.samples:
        assert s.text is not None and s.result is not None, s
        assert s.result.has_verdict and not s.result.passed, s.result
        assert s.result.isolation == "pool"  # a real sandbox, not a fake
        assert s.result.score == 0.0
    assert ev.metrics.no_verdict == 0


def test_eval_model_on_a_real_tiny_lm(tmp_path: Path, tiny: tuple[str, TinyLM]) -> None:
    url, lm = tiny
    envs = [load_environment(n) for n in NAMES]
    first = len(lm.replies)
    chat = ChatModel(url, "tiny", temperature=1.0, max_tokens=MAX_TOKENS, concurrency=2)
    greedy = ChatModel(url, "tiny", temperature=0.0, max_tokens=MAX_TOKENS, completions=True)
    with RunStore(tmp_path / "runs.sqlite") as store, DeepGym() as dg:
        ev = dg.eval_model(envs, chat, samples=2, k=[1, 2], store=store)
        served = lm.replies[first:]
        bodies = lm.bodies[first:]
        stored = store.samples(ev.run_id or "")
        done = len(lm.replies)
        base = dg.eval_model(envs[:1], greedy, samples=2, store=store)
    judged_wrong(ev)
    assert ev.metrics.pass_at == {1: 0.0, 2: 0.0} and ev.metrics.judged == 4
    # every sample is one request, asked with the environment's task, and its text is the
    # server's, in the result and in the run store
    assert sorted(b["messages"][-1]["content"] for b in bodies) == sorted(
        e.task for e in envs for _ in range(2)
    )
    assert all(b["model"] == "tiny" and b["max_tokens"] == MAX_TOKENS for b in bodies)
    assert sorted(s.text or "" for s in ev.samples) == sorted(served)
    assert stored == {s.index: s.text for s in ev.samples}
    assert any(served), served  # the model wrote something
    # the completion route continues the prompt; greedy decoding gives the same text twice
    judged_wrong(base)
    assert base.metrics.pass_at == {1: 0.0}
    texts = [s.text for s in base.samples]
    assert texts == lm.replies[done:] and texts[0] == texts[1]
    assert all(b["prompt"] == envs[0].task for b in lm.bodies[done:])
    assert base.samples[0].answer.startswith(envs[0].task)


def test_cli_eval_against_a_real_tiny_lm(tmp_path: Path, tiny: tuple[str, TinyLM]) -> None:
    url, lm = tiny
    out = tmp_path / "samples.jsonl"
    first = len(lm.replies)
    args = [
        "eval", NAMES[0], "--model-url", url, "--model", "tiny", "-n", "2", "--k", "1,2",
        "--max-tokens", str(MAX_TOKENS), "--json", "--out", str(out),
    ]  # fmt: skip
    r = CliRunner().invoke(cli, args, catch_exceptions=True)
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index("{") :])
    assert report["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert (report["judged"], report["no_verdict"], report["generation_failed"]) == (2, 0, 0)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["text"] for row in rows) == sorted(lm.replies[first:])
    assert all(row["has_verdict"] and not row["passed"] for row in rows), rows
