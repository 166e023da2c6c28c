"""Atropos: ``DeepGymAtroposEnv``, an ``atroposlib`` ``BaseEnv`` whose items are deepgym
environments and whose groups are scored by deepgym.

Each item is one of ``config.envs`` (comma-separated names) in turn (its task as the user's
message, plus ``config.instruction``). ``collect_trajectories`` asks the inference server for
``group_size`` answers (``self.server.chat_completion(n=...)``), runs them in deepgym's sandbox
as one batch
(the answer: the reply's last fenced code block, else all of it), and returns a
``ScoredDataGroup`` (``tokens`` and ``masks`` as Atropos's ``tokenize_for_trainer`` makes them,
``scores`` = the runs' scores, ``messages`` when ``include_messages``).

An answer without a verdict is left out of its group, never scored 0: the group then carries
``group_overrides["group_size"]`` (the answers it kept), which Atropos's API fills up with other
short groups to the trainer's group size. A group with fewer than two judged answers carries no
signal and is dropped (``None``), as is any group whose scores are all equal when
``ensure_scores_are_not_same`` (Atropos's own rule). ``MaskedRate`` warns when more than 5 of a
block of 100 answers had no verdict; ``wandb_log`` adds ``train/deepgym_no_verdict_rate``.

Run it with Atropos's CLI: ``python -m deepgym.integrations.atropos serve|process|evaluate
--env.envs two_sum,fizzbuzz --openai.base_url ...``. ``config.sandbox`` picks the sandbox (default
``DEEPGYM_SANDBOX``, else ``pool``). ``import deepgym`` never imports atroposlib; importing this
module does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup

from deepgym import DeepGym, Environment, RunResult, load_environment
from deepgym.completions import answer_of
from deepgym.exceptions import ConfigError
from deepgym.integrations.reward import MaskedRate, shared_client

__all__ = [
    "INSTRUCTION",
    "DeepGymAtroposConfig",
    "DeepGymAtroposEnv",
    "scored_group",
    "tokenize_chat",
]

INSTRUCTION = "\n\nAnswer with the complete solution in one ```python code block."


class DeepGymAtroposConfig(BaseEnvConfig):  # type: ignore[misc]
    """``BaseEnvConfig`` plus which environments to draw and how to run them."""

    envs: str = "two_sum"
    """deepgym environment names, comma-separated (Atropos's CLI passes a string), drawn in
    turn."""
    instruction: str = INSTRUCTION
    """Appended to each environment's task."""
    sandbox: str | None = None
    """deepgym's sandbox (None: ``DEEPGYM_SANDBOX``, else ``pool``)."""
    max_parallel: int = 8
    """Answers of one group run at once."""
    max_tokens: int = 2048
    """Each answer's token cap at the inference server."""
    temperature: float = 1.0


def tokenize_chat(
    tokenizer: Any,
    chat: list[dict[str, str]],
    finish_reason: str = "",
    include_messages: bool = False,
) -> dict[str, Any]:
    """Atropos's ``tokenize_for_trainer`` (its default path: the prompt masked with -100, the
    answer's tokens kept) with token lists under transformers 4 and 5 alike: atroposlib 0.4's
    own calls ``apply_chat_template`` without ``return_dict=False``, and transformers 5 then
    returns a ``BatchEncoding`` that its JSON writer and trainer cannot take."""
    tokens = list(tokenizer.apply_chat_template(chat, tokenize=True, return_dict=False))
    prefix = tokenizer.apply_chat_template(
        chat[:-1], tokenize=True, add_generation_prompt=True, return_dict=False
    )
    masks = [-100] * len(prefix) + tokens[len(prefix) :]
    if finish_reason == "length" and tokens and tokens[-1] == tokenizer.eos_token_id:
        tokens, masks = tokens[:-1], masks[:-1]  # as Atropos: a cut-off answer has no EOS
    out: dict[str, Any] = {"tokens": tokens, "masks": masks}
    if include_messages:
        out["messages"] = chat
    return out


def scored_group(
    tokenized: list[dict[str, Any]], results: list[RunResult], rate: MaskedRate | None = None
) -> ScoredDataGroup | None:
    """The ``ScoredDataGroup`` of the judged answers (``tokenized[i]`` is answer ``i``'s
    ``tokenize_for_trainer`` output); None when fewer than two were judged (no signal)."""
    keep = [i for i, r in enumerate(results) if r.has_verdict]
    if rate is not None:
        rate.update(not r.has_verdict for r in results)
    if len(keep) < 2:
        return None
    group = ScoredDataGroup(
        tokens=[tokenized[i]["tokens"] for i in keep],
        masks=[tokenized[i]["masks"] for i in keep],
        scores=[float(results[i].score) for i in keep],
        advantages=None,
        ref_logprobs=None,
        messages=([tokenized[i]["messages"] for i in keep] if "messages" in tokenized[0] else None),
        group_overrides={"group_size": len(keep)} if len(keep) < len(results) else {},
        overrides=None,
        images=None,
    )
    return group


class DeepGymAtroposEnv(BaseEnv):  # type: ignore[misc]
    """Atropos's environment over deepgym's (see the module docstring)."""

    name = "deepgym"
    env_config_cls = DeepGymAtroposConfig

    def __init__(self, config: DeepGymAtroposConfig, server_configs: Any, **kwargs: Any) -> None:
        super().__init__(config, server_configs, **kwargs)
        self.config: DeepGymAtroposConfig = config
        self.environments: list[Environment] = []
        self.next_index = 0
        self.masked_rate = MaskedRate("atropos")

    @classmethod
    def config_init(cls) -> tuple[DeepGymAtroposConfig, list[APIServerConfig]]:
        """Defaults for Atropos's CLI (every field can be overridden there)."""
        return DeepGymAtroposConfig(), [APIServerConfig()]

    @property
    def client(self) -> DeepGym:
        """The process's deepgym client for ``config.sandbox``."""
        return shared_client(self.config.sandbox)

    async def setup(self) -> None:
        """Load the environments (an unknown name fails here, before any model call)."""
        names = [n.strip() for n in self.config.envs.split(",") if n.strip()]
        if not names:
            raise ConfigError("envs must name at least one deepgym environment")
        self.environments = [load_environment(name) for name in names]
        for env in self.environments:
            if env.kind == "session":
                raise ConfigError(
                    f"{env.name} is a session environment: Atropos items are one-shot"
                )

    def messages(self, env: Environment) -> list[dict[str, str]]:
        """The conversation an item starts with."""
        return [{"role": "user", "content": env.task + self.config.instruction}]

    async def get_next_item(self) -> str:
        """The next environment's name, in turn."""
        env = self.environments[self.next_index % len(self.environments)]
        self.next_index += 1
        return env.name

    def _environment(self, name: str) -> Environment:
        for env in self.environments:
            if env.name == name:
                return env
        return load_environment(name)

    async def collect_trajectories(self, item: str) -> tuple[ScoredDataGroup | None, list[Any]]:
        """Sample ``group_size`` answers, score them in deepgym, return the judged group."""
        env = self._environment(item)
        messages = self.messages(env)
        completion = await self.server.chat_completion(
            messages=messages,
            n=self.config.group_size,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
        )
        chats, answers = [], []
        for choice in completion.choices:
            text = choice.message.content or ""
            chats.append(([*messages, {"role": "assistant", "content": text}], choice))
            answers.append(answer_of(text))
        batch = await asyncio.to_thread(
            self.client.run_batch, env, answers, max_parallel=self.config.max_parallel
        )
        tokenized = [
            tokenize_chat(
                self.tokenizer,
                chat,
                finish_reason=getattr(choice, "finish_reason", "") or "",
                include_messages=self.config.include_messages,
            )
            for chat, choice in chats
        ]
        return scored_group(tokenized, list(batch.results), self.masked_rate), []

    async def evaluate(self, *args: Any, **kwargs: Any) -> None:
        """One greedy answer per environment; logs ``eval/deepgym_pass`` over judged ones."""
        passed, judged = 0, 0
        for env in self.environments:
            completion = await self.server.chat_completion(
                messages=self.messages(env), n=1, max_tokens=self.config.max_tokens, split="eval"
            )
            text = completion.choices[0].message.content or ""
            result = await asyncio.to_thread(self.client.run_one, env, answer_of(text))
            if result.has_verdict:
                judged += 1
                passed += int(result.passed)
        metrics = {"eval/deepgym_judged": judged / max(1, len(self.environments))}
        if judged:
            metrics["eval/deepgym_pass"] = passed / judged
        await self.evaluate_log(metrics=metrics)

    async def wandb_log(self, wandb_metrics: dict[str, Any] | None = None) -> None:
        """Atropos's metrics plus the share of answers without a verdict."""
        metrics = dict(wandb_metrics or {})
        metrics["train/deepgym_no_verdict_rate"] = self.masked_rate.rate
        await super().wandb_log(metrics)


if __name__ == "__main__":
    DeepGymAtroposEnv.cli()
