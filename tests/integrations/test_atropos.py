"""Atropos: ``DeepGymAtroposEnv`` run by Atropos's own ``process`` command against a scripted
OpenAI-protocol server (a tokenizer made here: no hub), its groups' scores equal deepgym's own
for the same answers; an answer without a verdict is left out of its group, never scored 0."""

from __future__ import annotations

import asyncio
import json
import os
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym, RunResult
from deepgym.integrations import reward as dg_reward
from deepgym.integrations.atropos import (
    DeepGymAtroposConfig,
    DeepGymAtroposEnv,
    scored_group,
)
from deepgym.integrations.reward import MaskedRate
from tests.eval.openai_server import serve as serve_model
from tests.integrations.conftest import TWO_SUM_OK, ScriptedBackend

WRONG = "def two_sum(nums, target):\n    return [0, 0]\n"
TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def make_tokenizer(folder: Path) -> Path:
    """A character-level tokenizer with a chat template, saved as Hugging Face loads it."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<unk>", "<eos>", *dict.fromkeys(string.printable)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", eos_token="<eos>")
    tok.chat_template = TEMPLATE
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer(tmp_path_factory.mktemp("tokenizer"))


def _fenced(code: str) -> str:
    return f"text:Here is my answer.\n```python\n{code}```"


def test_tokens_and_masks_match_atropos_tokenize_for_trainer(tokenizer_dir: Path) -> None:
    from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
    from transformers import AutoTokenizer

    from deepgym.integrations.atropos import tokenize_chat

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    theirs = tokenize_for_trainer(tok, chat)
    ours = tokenize_chat(tok, chat)
    if not isinstance(theirs["tokens"], list):  # transformers 5: a BatchEncoding
        theirs_tokens = list(theirs["tokens"]["input_ids"])
        assert ours["tokens"] == theirs_tokens
    else:
        assert ours == theirs
    assert ours["masks"][-1] == ours["tokens"][-1] and ours["masks"][0] == -100


def test_scored_group_leaves_out_answers_without_a_verdict() -> None:
    tokenized = [{"tokens": [i], "masks": [i]} for i in range(4)]
    results = [
        RunResult(score=1.0, passed=True),
        RunResult.no_verdict("sandbox_error", "the sandbox could not start"),
        RunResult(score=0.0, passed=False),
        RunResult(score=1.0, passed=True),
    ]
    rate = MaskedRate("test")
    group = scored_group(tokenized, results, rate)
    assert group is not None
    assert group["scores"] == [1.0, 0.0, 1.0] and group["tokens"] == [[0], [2], [3]]
    assert group["group_overrides"] == {"group_size": 3}  # Atropos's API fills it up
    assert (rate.total, rate.masked) == (4, 1)
    nov = RunResult.no_verdict("timeout", "starved")
    assert scored_group(tokenized[:3], [results[0], nov, nov]) is None  # one judged: no signal


@pytest.fixture
def scripted_sandbox() -> Iterator[ScriptedBackend]:
    backend = ScriptedBackend()
    client = DeepGym(backend=backend)
    dg_reward._clients["scripted"] = client
    yield backend
    dg_reward._clients.pop("scripted", None)
    client.close()


def test_collect_trajectories_in_process(
    tokenizer_dir: Path, scripted_sandbox: ScriptedBackend
) -> None:
    from atroposlib.envs.server_handling.server_baseline import APIServerConfig

    answers = ["text:```python\npass\n```", "text:nov", "text:fail", "text:pass"]
    with serve_model({}, default=answers) as (url, _):
        config = DeepGymAtroposConfig(
            envs="two_sum",
            group_size=4,
            tokenizer_name=str(tokenizer_dir),
            use_wandb=False,
            sandbox="scripted",
            include_messages=True,
        )
        server = APIServerConfig(
            base_url=url,
            api_key="x",
            model_name="scripted",
            health_check=False,
            n_kwarg_is_ignored=True,  # the scripted server answers one choice a request
        )
        env = DeepGymAtroposEnv(config, [server])

        async def one() -> Any:
            await env.setup()
            item = await env.get_next_item()
            try:
                return await env.collect_trajectories(item)
            finally:  # Atropos never closes its model clients; its process exits instead
                for model in env.server.servers:
                    await model.openai.close()

        group, backlog = asyncio.run(one())
    assert backlog == []
    assert sorted(group["scores"]) == [0.0, 1.0, 1.0]  # "nov" had no verdict: left out
    assert group["group_overrides"] == {"group_size": 3}
    assert [m[-1]["role"] for m in group["messages"]] == ["assistant"] * 3
    for tokens, mask in zip(group["tokens"], group["masks"], strict=True):
        assert isinstance(tokens, list) and len(mask) == len(tokens)
        assert mask[0] == -100 and mask[-1] == tokens[-1]  # the prompt masked, the answer kept
    assert sorted(scripted_sandbox.answers) == ["fail", "nov", "pass", "pass"]  # sent at once
    assert env.masked_rate.masked == 1


@pytest.mark.sandbox
def test_atropos_process_command_writes_deepgyms_scores(
    tokenizer_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "groups.jsonl"
    answers = [_fenced(TWO_SUM_OK), _fenced(WRONG)]
    with serve_model({}, default=answers) as (url, script):
        argv = [
            sys.executable, "-m", "deepgym.integrations.atropos", "process",
            "--env.envs", "two_sum",
            "--env.group_size", "4",
            "--env.total_steps", "2",
            "--env.tokenizer_name", str(tokenizer_dir),
            "--env.use_wandb", "false",
            "--env.data_path_to_save_groups", str(out),
            "--openai.base_url", url,
            "--openai.api_key", "x",
            "--openai.model_name", "scripted",
            "--openai.health_check", "false",
            "--openai.n_kwarg_is_ignored", "true",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert script.total >= 8
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(groups) == 2
    with DeepGym() as dg:
        own = [r.score for r in dg.run_batch("two_sum", [TWO_SUM_OK, WRONG] * 2).results]
    for group in groups:
        assert sorted(group["scores"]) == sorted(own) == [0.0, 0.0, 1.0, 1.0]
        assert len(group["tokens"]) == 4
