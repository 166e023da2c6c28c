"""TRL: a real ``GRPOTrainer`` run on CPU with a tiny random-weight model and ``RewardFunction``.

Nothing is downloaded: the tokenizer is character-level and built here, the model is built from a
``LlamaConfig`` with random weights. The completions come from TRL's ``rollout_func`` hook so that
each group holds known answers (one right, one half right, one wrong, one whose environment's
verifier crashes: no verdict), scored in the real sandbox. TRL must leave the unjudged completion
out of its group's baseline and give it advantage 0.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from datasets import Dataset
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import is_async_callable

from deepgym import AsyncRewardFunction, RewardFunction
from deepgym.integrations import trl as dg_trl
from deepgym.integrations.dapo import DAPO_ARGS, dapo_config
from tests.integrations.conftest import BROKEN, TWO_SUM_OK

GROUP = [
    (f"```python\n{TWO_SUM_OK}```", None),  # right: 1.0
    ("```python\ndef two_sum(nums, target):\n    return [0, 1]\n```", None),  # some cases
    ("def two_sum(nums, target):\n    return None\n", None),  # wrong: a judged 0
    (f"```python\n{TWO_SUM_OK}```", "broken"),  # the verifier crashes: no verdict
]


def _tiny(tmp_path: Path) -> tuple[str, PreTrainedTokenizerFast]:
    chars = sorted({chr(c) for c in range(32, 127)} | {"\n", "\t"})
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2} | {c: i + 3 for i, c in enumerate(chars)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=1,
    )
    path = tmp_path / "tiny"
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path), tokenizer


def _rollout(tokenizer: PreTrainedTokenizerFast) -> Any:
    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, Any]:
        assert len(prompts) % len(GROUP) == 0, prompts
        picks = [GROUP[i % len(GROUP)] for i in range(len(prompts))]
        return {
            "prompt_ids": [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts],
            "completion_ids": [
                tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                for text, _ in picks
            ],
            "logprobs": None,
            "env_name": [env for _, env in picks],  # forwarded to the reward function
        }

    return rollout_func


@pytest.mark.parametrize("config", ["grpo", "dapo"])
def test_grpo_trainer_leaves_a_no_verdict_completion_out(
    config: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model_path, tokenizer = _tiny(tmp_path)
    reward = RewardFunction("two_sum", environments={"broken": BROKEN}, timeout=120.0)
    make = dapo_config if config == "dapo" else GRPOConfig
    args = make(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=len(GROUP),
        num_generations=len(GROUP),
        max_steps=2,
        max_completion_length=256,
        learning_rate=1e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=[reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["Solve two_sum.\n"] * 4}),
        processing_class=tokenizer,
        rollout_func=_rollout(tokenizer),
    )
    rewards: list[float] = []
    advantages: list[float] = []
    score_batch = trainer._generate_and_score_completions
    calculate = trainer._calculate_rewards

    def spy_rewards(*a: Any, **kw: Any) -> torch.Tensor:
        out = calculate(*a, **kw)
        rewards.extend(out[:, 0].tolist())
        return out

    def spy_batch(*a: Any, **kw: Any) -> dict[str, Any]:
        out = score_batch(*a, **kw)
        advantages.extend(out["advantages"].tolist())
        return out

    monkeypatch.setattr(trainer, "_calculate_rewards", spy_rewards)
    monkeypatch.setattr(trainer, "_generate_and_score_completions", spy_batch)
    try:
        trainer.train()
    finally:
        reward.close()

    assert trainer.state.global_step == 2
    assert len(rewards) == len(advantages) == 2 * len(GROUP)
    for step in range(2):
        r = rewards[step * 4 : step * 4 + 4]
        a = advantages[step * 4 : step * 4 + 4]
        assert r[0] == 1.0 and r[1] == 0.0 and r[2] == 0.0, r  # all-or-nothing
        assert math.isnan(r[3]), r  # None reached TRL as NaN
        assert a[3] == 0.0, a  # ... and the unjudged completion moves nothing
        # The baseline is the judged samples' mean: their advantages sum to 0 (a 0 for the
        # unjudged one would have pulled the mean down and made this sum positive).
        assert abs(sum(a[:3])) < 1e-4, a
        assert a[0] > 0 > a[2], a
    metrics = [
        h["deepgym/no_verdict_frac"]
        for h in trainer.state.log_history
        if "deepgym/no_verdict_frac" in h
    ]
    assert metrics and all(m == pytest.approx(0.25) for m in metrics)


def test_trl_detects_the_async_forms() -> None:
    # TRL 1.14+ reads an async ``__call__``; older TRL only an ``async def``: ship both.
    assert is_async_callable(AsyncRewardFunction("two_sum"))
    assert is_async_callable(dg_trl.deepgym_reward_async)
    assert inspect.iscoroutinefunction(dg_trl.deepgym_reward_async)
    assert not is_async_callable(RewardFunction("two_sum"))
    assert not is_async_callable(dg_trl.deepgym_reward)


def test_module_functions_follow_trls_keyword_call(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Recorder:
        def __call__(self, completions: Any = None, prompts: Any = None, **kw: Any) -> list[float]:
            seen.update(kw, completions=completions, prompts=prompts)
            return [1.0] * len(completions)

    monkeypatch.setattr(dg_trl, "default_reward_function", lambda: Recorder())
    out = dg_trl.deepgym_reward(
        prompts=["p"],
        completions=["c"],
        completion_ids=[[1]],
        env=["two_sum"],
        trainer_state=None,
        log_extra=None,
        log_metric=None,
    )
    assert out == [1.0]
    assert seen["completions"] == ["c"] and seen["prompts"] == ["p"] and seen["env"] == ["two_sum"]


def test_dapo_config_is_a_grpo_config_with_dapos_settings(tmp_path: Path) -> None:
    args = dapo_config(output_dir=str(tmp_path), epsilon_high=0.3, use_cpu=True, bf16=False)
    assert isinstance(args, GRPOConfig)
    assert args.loss_type == "dapo" and args.beta == 0.0 and args.mask_truncated_completions
    assert args.epsilon == DAPO_ARGS["epsilon"] and args.epsilon_high == 0.3
