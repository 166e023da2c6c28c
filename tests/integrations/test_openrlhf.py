"""OpenRLHF, against its documented protocol (the package itself does not install here: it needs
``flash-attn`` and ``deepspeed`` builds that require CUDA).

The requests are what OpenRLHF 0.11's ``SingleTurnAgentExecutor`` sends (``_fetch_rewards_via_http``
posts ``{"query", "prompts", "labels"}``, one list each; the query is the decoded prompt plus
response with special tokens), and the reward file is loaded the way it loads one
(``importlib.util.spec_from_file_location(...)`` then ``module.reward_func(queries, prompts,
labels)``). The answers: ``rewards`` and ``scores``, one per query, and ``extra_logs`` of lists.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from deepgym import AsyncDeepGym, DeepGym
from deepgym.exceptions import SandboxUnavailableError
from deepgym.integrations import openrlhf
from deepgym.integrations.reward import MaskedRate
from deepgym.sandbox.base import Job, RawRun
from deepgym.verdict import Outcome
from tests.integrations.conftest import TWO_SUM_OK, ScriptedBackend, scripted_client

JSON = {"content-type": "application/json"}
PROMPT = "<|im_start|>user\nSolve two_sum.<|im_end|>\n<|im_start|>assistant\n"


def _query(answer: str) -> str:
    return f"<s>{PROMPT}```python\n{answer}\n```<|im_end|><|endoftext|>"


def _body(answers: list[str], labels: list[Any] | None = None) -> dict[str, Any]:
    return {
        "query": [_query(a) for a in answers],
        "prompts": [PROMPT] * len(answers),
        "labels": labels if labels is not None else ["two_sum"] * len(answers),
    }


def test_response_text_drops_the_prompt_and_special_tokens() -> None:
    assert openrlhf.response_text(_query("x = 1"), PROMPT) == "```python\nx = 1\n```"
    assert openrlhf.response_text("<s>Q: A: code</s><pad><pad>", "Q: A:") == " code"
    assert openrlhf.response_text("no prompt here<|eot_id|>", "missing") == "no prompt here"


def test_endpoint_answers_openrlhfs_request() -> None:
    client, backend = scripted_client()
    app = openrlhf.create_app(client, infra_failure_score=-1.0)
    with TestClient(app) as http:
        r = http.post(openrlhf.ROUTE, json=_body(["pass", "half", "nov", "fail"]))
        assert r.status_code == 200
        out = r.json()
        assert out["rewards"] == [1.0, 0.0, -1.0, 0.0]  # "half" passes half: all-or-nothing
        assert out["scores"] == out["rewards"]
        assert out["extra_logs"]["deepgym_no_verdict"] == [0.0, 0.0, 1.0, 0.0]
        assert all(len(v) == 4 for v in out["extra_logs"].values())
        assert backend.answers == ["pass", "half", "nov", "fail"]  # prompt and tokens cut off
        health = http.get("/health").json()
        assert health["samples"] == 4 and health["no_verdict"] == 1
    asyncio.run(client.close())


def test_each_label_names_its_environment() -> None:
    client, backend = scripted_client()
    app = openrlhf.create_app(client)
    labels = ["two_sum", '{"env": "fizzbuzz"}', {"env_name": "two_sum"}, "no_such_env", None]
    with TestClient(app) as http:
        out = http.post(openrlhf.ROUTE, json=_body(["pass"] * 5, labels)).json()
    # An unknown or missing environment is ours: no verdict, never a failed request.
    assert out["rewards"] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert out["extra_logs"]["deepgym_no_verdict"] == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert backend.envs == ["two_sum", "fizzbuzz", "two_sum"]
    asyncio.run(client.close())


def test_a_malformed_body_is_a_400() -> None:
    client, _ = scripted_client()
    with TestClient(openrlhf.create_app(client)) as http:
        assert http.post(openrlhf.ROUTE, json={"prompts": []}).status_code == 400
        assert http.post(openrlhf.ROUTE, json={"query": ["a"], "prompts": []}).status_code == 400
    asyncio.run(client.close())


class DownBackend(ScriptedBackend):
    """``ScriptedBackend``, where the time limit runs out before the answer came into play
    (ours: the engine retries it once, within the run's deadline) for every run of the answer
    ``down`` and the first run of the answer ``flaky``."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: Counter[str] = Counter()

    async def run(self, job: Job) -> RawRun:
        answer = job.answer.strip()
        self.runs[answer] += 1
        if answer == "down" or (answer == "flaky" and self.runs[answer] == 1):
            outcome = Outcome(report=None, in_play=False, wall_timeout=True)
            return RawRun(outcome=outcome, report=None, isolation="scripted")
        return await super().run(job)


def test_an_infrastructure_failure_is_retried_once_by_the_engine_alone() -> None:
    backend = DownBackend()
    client = AsyncDeepGym(backend=backend)
    rate = MaskedRate("openrlhf-test", block=2, limit=1)
    app = openrlhf.create_app(client, env="two_sum", infra_failure_score=0.25, masked_rate=rate)
    with TestClient(app) as http:
        out = http.post(openrlhf.ROUTE, json=_body(["flaky", "down"])).json()
    asyncio.run(client.close())
    assert out["rewards"] == [1.0, 0.25]
    assert out["extra_logs"]["deepgym_no_verdict"] == [0.0, 1.0]
    # One retry each, the engine's: no second loop of the adapter's on top (which ran a sample
    # that stayed down four times).
    assert (backend.runs["flaky"], backend.runs["down"]) == (2, 2)
    assert (rate.total, rate.masked) == (2, 1)


def test_the_file_form_retries_by_the_same_rule() -> None:
    backend = DownBackend()
    dg = DeepGym(backend=backend)
    fn = openrlhf.make_reward_func("two_sum", client=dg, infra_failure_score=-0.5)
    try:
        out = fn([_query("flaky"), _query("down")], [PROMPT] * 2, ["", ""])
    finally:
        fn.close()  # type: ignore[attr-defined]
        dg.close()
    assert out["rewards"] == [1.0, -0.5]
    assert (backend.runs["flaky"], backend.runs["down"]) == (2, 2)
    assert (fn.masked_rate.total, fn.masked_rate.masked) == (2, 1)  # type: ignore[attr-defined]


def test_a_sample_that_cannot_run_has_no_verdict_and_the_others_are_scored() -> None:
    client, backend = scripted_client()
    app = openrlhf.create_app(client, infra_failure_score=-1.0)
    # A lone surrogate (JSON may carry one, escaped): text the client refuses.
    body = _body(["pass", "pass\ud800", "pass", "half"], ["two_sum", "two_sum", "nope", "two_sum"])
    with TestClient(app) as http:
        r = http.post(openrlhf.ROUTE, content=json.dumps(body), headers=JSON)
    asyncio.run(client.close())
    out = r.json()
    assert out["rewards"] == [1.0, -1.0, -1.0, 0.0]
    assert out["extra_logs"]["deepgym_no_verdict"] == [0.0, 1.0, 1.0, 0.0]
    assert backend.answers == ["pass", "half"]  # the others never ran


def test_a_host_failure_of_one_run_is_that_samples_no_verdict() -> None:
    client, _ = scripted_client()
    with TestClient(openrlhf.create_app(client, infra_failure_score=0.5)) as http:
        out = http.post(openrlhf.ROUTE, json=_body(["raise", "pass"])).json()
    asyncio.run(client.close())
    assert out["rewards"] == [0.5, 1.0]


def test_a_failure_of_every_run_alike_fails_the_request() -> None:
    """A host that cannot sandbox at all: the request fails (OpenRLHF sees the error) rather than
    hand the trainer a batch of no-verdict rewards."""
    client, _ = scripted_client()
    app = openrlhf.create_app(client)
    with TestClient(app) as http, pytest.raises(SandboxUnavailableError):
        http.post(openrlhf.ROUTE, json=_body(["unavailable", "pass"]))
    asyncio.run(client.close())


def test_make_reward_func_follows_the_file_protocol() -> None:
    dg = DeepGym(backend=scripted_client()[1])
    fn = openrlhf.make_reward_func("two_sum", client=dg, infra_failure_score=-0.5)
    try:
        out = fn([_query("pass"), _query("nov")], [PROMPT, PROMPT], ["", ""])
    finally:
        dg.close()
    assert out["rewards"] == [1.0, -0.5] and out["scores"] == out["rewards"]
    assert out["extra_logs"]["deepgym_no_verdict"] == [0.0, 1.0]


def _load(path: Path) -> Any:
    # OpenRLHF's SingleTurnAgentExecutor, for a --remote_rm_url ending in .py.
    spec = importlib.util.spec_from_file_location("reward_func", str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


def test_the_reward_file_scores_in_the_real_sandbox(tmp_path: Path) -> None:
    path = openrlhf.write_reward_func_file(tmp_path / "reward.py", "two_sum")
    reward_func = _load(path)
    wrong = "def two_sum(a, b):\n    return None"
    try:
        out = reward_func([_query(TWO_SUM_OK), _query(wrong)], [PROMPT] * 2, [None, None])
    finally:
        reward_func.close()
    assert out["rewards"] == [1.0, 0.0]
    assert out["extra_logs"]["deepgym_no_verdict"] == [0.0, 0.0]


def test_write_reward_func_file_wants_a_py_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.py"):
        openrlhf.write_reward_func_file(tmp_path / "reward.txt", "two_sum")
    assert openrlhf.main([str(tmp_path / "r.py"), "--env", "two_sum"]) == 0
    assert "make_reward_func" in (tmp_path / "r.py").read_text()
