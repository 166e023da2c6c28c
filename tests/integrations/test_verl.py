"""verl, against the real package (it installs on Python 3.11 without a GPU).

``compute_score`` is loaded the way verl loads a custom reward function (``pkg://`` path through
``get_custom_reward_fn``) and driven through verl's own ``NaiveRewardManager``. The agent loop is
registered from the shipped YAML the way verl's ``AgentLoopWorker`` does it, built with
``hydra.utils.instantiate`` like verl, and run end to end with an in-memory LLM server in place of
vLLM (no GPU here). Runs go to a scripted backend except where a test says it uses the sandbox.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import hydra
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopOutput,
    DictConfigWrap,
    _agent_loop_registry,
)
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.rollout.replica import TokenOutput

from deepgym import DeepGym, NoVerdictError
from deepgym.client import AsyncDeepGym
from deepgym.integrations import verl as dg_verl
from tests.integrations.conftest import TWO_SUM_OK, ScriptedBackend

CHAT = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<eos>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    chars = sorted({chr(c) for c in range(32, 127)} | {"\n"})
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2} | {c: i + 3 for i, c in enumerate(chars)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    out = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    out.chat_template = CHAT
    return out


@pytest.fixture
def scripted_sync(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedBackend]:
    backend = ScriptedBackend()
    dg = DeepGym(backend=backend)
    monkeypatch.setattr(dg_verl, "_sync_client", dg)
    yield backend
    dg.close()


@pytest.fixture
def scripted_async(monkeypatch: pytest.MonkeyPatch) -> ScriptedBackend:
    clients: dict[int, AsyncDeepGym] = {}
    backend = ScriptedBackend()

    def client() -> AsyncDeepGym:
        loop = id(asyncio.get_running_loop())
        if loop not in clients:
            clients[loop] = AsyncDeepGym(backend=backend)
        return clients[loop]

    monkeypatch.setattr(dg_verl, "_async_client", client)
    return backend


def _config(name: str, **reward_kwargs: Any) -> Any:
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://deepgym.integrations.verl",
                    "name": name,
                    "reward_kwargs": reward_kwargs,
                },
                "reward_manager": {"name": "naive", "source": "register"},
            }
        }
    )


def _fenced(code: str) -> str:
    return f"Here it is:\n```python\n{code}\n```\n"


def test_verl_loads_compute_score_by_pkg_path(scripted_sync: ScriptedBackend) -> None:
    fn = get_custom_reward_fn(_config("compute_score", env="two_sum"))
    assert fn is not None and not inspect.iscoroutinefunction(fn)
    out = fn(data_source="x", solution_str=_fenced("half"), ground_truth="", extra_info={})
    assert out == {"score": 0.0, "acc": 0.0, "error": 0.0}
    assert scripted_sync.answers == ["half"]
    # The per-sample column wins over the reward kwarg; the keys never change.
    out = fn(data_source="x", solution_str="pass", ground_truth="", extra_info={"env": "fizzbuzz"})
    assert set(out) == {"score", "acc", "error"} and out["score"] == 1.0
    with pytest.raises(NoVerdictError) as info:
        fn(data_source="x", solution_str=_fenced("nov"), ground_truth=None, extra_info=None)
    assert info.value.result is not None and not info.value.result.has_verdict


def test_return_dict_false_gives_a_float(scripted_sync: ScriptedBackend) -> None:
    fn = get_custom_reward_fn(_config("compute_score", env="two_sum", return_dict=False))
    assert fn is not None
    assert fn(data_source="x", solution_str="half", ground_truth="", extra_info={}) == 0.0


def test_async_variant_is_awaited_by_verl(scripted_async: ScriptedBackend) -> None:
    fn = get_custom_reward_fn(_config("compute_score_async", env="two_sum"))
    assert fn is not None and inspect.iscoroutinefunction(fn)

    async def go() -> Any:
        ok = await fn(data_source="x", solution_str=_fenced("pass"), ground_truth="", extra_info={})
        with pytest.raises(NoVerdictError):
            await fn(data_source="x", solution_str="nov", ground_truth="", extra_info={})
        return ok

    assert asyncio.run(go()) == {"score": 1.0, "acc": 1.0, "error": 0.0}


def _sample(tokenizer: PreTrainedTokenizerFast, response: str, data_source: str) -> DataProto:
    prompt = tokenizer("Q:", add_special_tokens=False)["input_ids"]
    resp = tokenizer(response, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + resp])
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt]),
            "responses": torch.tensor([resp]),
            "attention_mask": torch.ones_like(ids),
        },
        non_tensors={
            "data_source": np.array([data_source], dtype=object),
            "reward_model": np.array([{"ground_truth": ""}], dtype=object),
            "extra_info": np.array([{}], dtype=object),
        },
    )


def test_naive_reward_manager_scores_and_raises(
    tokenizer: PreTrainedTokenizerFast, scripted_async: ScriptedBackend
) -> None:
    config = _config("compute_score_async")

    async def go() -> Any:
        # Built inside the loop, as in verl's reward-loop worker (it keeps the running loop).
        manager = NaiveRewardManager(config, tokenizer, get_custom_reward_fn(config))
        out = await manager.run_single(_sample(tokenizer, _fenced("half"), "deepgym/two_sum"))
        with pytest.raises(NoVerdictError):
            await manager.run_single(_sample(tokenizer, "nov", "deepgym/two_sum"))
        return out

    out = asyncio.run(go())
    assert out["reward_score"] == 0.0
    assert out["reward_extra_info"] == {"score": 0.0, "acc": 0.0, "error": 0.0}


def test_compute_score_runs_in_the_real_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    dg = DeepGym()
    monkeypatch.setattr(dg_verl, "_sync_client", dg)
    try:
        out = dg_verl.compute_score("deepgym/two_sum", _fenced(TWO_SUM_OK), None, {})
    finally:
        dg.close()
    assert out == {"score": 1.0, "acc": 1.0, "error": 0.0}


def test_make_verl_reward_fn_returns_none_without_a_verdict(
    scripted_sync: ScriptedBackend,
) -> None:
    fn = dg_verl.make_verl_reward_fn("two_sum")
    assert fn(data_source="x", solution_str="half") == 0.0
    assert fn(data_source="x", solution_str="nov") is None
    assert fn(data_source="x", solution_str="raise") is None  # a host failure: no verdict
    assert dg_verl.make_verl_reward_fn()(data_source="unknown", solution_str="pass") is None


# -- the agent loop -------------------------------------------------------------------------------


class FakeServer:
    """Stands in for verl's LLM server client: answers every prompt with ``reply``."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast, reply: str) -> None:
        self.ids = tokenizer(reply, add_special_tokens=False)["input_ids"] + [1]
        self.prompts: list[list[int]] = []

    async def generate(self, *, prompt_ids: list[int], **kwargs: Any) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        return TokenOutput(token_ids=self.ids, log_probs=None, stop_reason="completed")


def _registered() -> dict[str, Any]:
    # What verl's AgentLoopWorker does with agent_loop_config_path.
    for entry in OmegaConf.load(dg_verl.AGENT_LOOP_CONFIG):
        _agent_loop_registry[entry.name] = entry
    entry: Any = _agent_loop_registry[dg_verl.AGENT_LOOP_NAME]
    return entry


async def _drive(
    entry: Any,
    config: Any,
    server: Any,
    tokenizer: PreTrainedTokenizerFast,
    prompt: str,
    data_source: str,
) -> AgentLoopOutput:
    """Build the loop from its registry entry as verl does (hydra) and run one sample."""
    loop = hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=object,
        data_config=DictConfigWrap(config.data),
    )
    assert isinstance(loop, AgentLoopBase)
    out: AgentLoopOutput = await loop.run(
        {"temperature": 1.0},
        raw_prompt=[{"role": "user", "content": prompt}],
        data_source=data_source,
        extra_info={},
    )
    return out


def _run_loop(
    tokenizer: PreTrainedTokenizerFast,
    reply: str,
    *,
    use_v1: bool,
    data_source: str = "deepgym/two_sum",
) -> AgentLoopOutput:
    config = OmegaConf.create(
        {
            "trainer": {"use_v1": use_v1},
            "actor_rollout_ref": {
                "rollout": {"prompt_length": 64, "response_length": 64, "agent": {}},
            },
            "data": {},
        }
    )
    server = FakeServer(tokenizer, reply)

    async def go() -> AgentLoopOutput:
        return await _drive(_registered(), config, server, tokenizer, "Solve it.", data_source)

    out = asyncio.run(go())
    assert server.prompts, "the loop never asked the server"
    return out


def test_agent_loop_is_registered_under_its_name() -> None:
    entry = _registered()
    assert entry["_target_"] == "deepgym.integrations.verl.DeepGymSingleTurnAgentLoop"
    cls = hydra.utils.get_class(entry["_target_"])
    assert issubclass(cls, AgentLoopBase)
    assert "deepgym_single_turn" in _agent_loop_registry
    agent = _agent_loop_registry[dg_verl.AGENT_NAME]
    assert agent["_target_"] == "deepgym.integrations.verl.DeepGymAgentLoop"
    assert issubclass(hydra.utils.get_class(agent["_target_"]), AgentLoopBase)


def test_agent_loop_sets_the_reward_so_verl_skips_its_own(
    tokenizer: PreTrainedTokenizerFast, scripted_async: ScriptedBackend
) -> None:
    out = _run_loop(tokenizer, _fenced("half"), use_v1=True)
    assert out.reward_score == 0.0
    assert out.extra_fields["reward_extra_info"] == {"score": 0.0, "acc": 0.0, "error": 0.0}
    assert sum(out.response_mask) == len(out.response_ids) > 0
    assert scripted_async.answers == ["half"]


def test_agent_loop_drops_a_no_verdict_sample_under_v1(
    tokenizer: PreTrainedTokenizerFast, scripted_async: ScriptedBackend
) -> None:
    with pytest.raises(NoVerdictError):
        _run_loop(tokenizer, "nov", use_v1=True)


def test_agent_loop_masks_a_no_verdict_sample_under_the_legacy_trainer(
    tokenizer: PreTrainedTokenizerFast, scripted_async: ScriptedBackend
) -> None:
    rate = dg_verl.DeepGymSingleTurnAgentLoop.masked_rate
    before = rate.masked
    out = _run_loop(tokenizer, "nov", use_v1=False)
    assert out.reward_score == 0.0
    assert out.response_ids and sum(out.response_mask) == 0  # no gradient from this sample
    assert out.extra_fields["reward_extra_info"] == {"score": 0.0, "acc": 0.0, "error": 1.0}
    assert rate.masked == before + 1
    # An unknown environment is ours, not the policy's: masked the same way.
    out = _run_loop(tokenizer, "pass", use_v1=False, data_source="other")
    assert out.extra_fields["reward_extra_info"]["error"] == 1.0


def test_loading_the_adapter_does_not_import_verl() -> None:
    import subprocess
    import sys

    code = (
        "import sys, deepgym.integrations.verl as v; v.compute_score; "
        "print(any(m.split('.')[0] == 'verl' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the multi-turn loop over sessions ------------------------------------------------------------


def _bash(command: str) -> str:
    return f"Next:\n```bash\n{command}\n```\n"


class TurnServer:
    """verl's LLM server client, scripted: the n-th call answers ``turns[n]`` (then ``DONE``)."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast, turns: list[str]) -> None:
        self.tokenizer = tokenizer
        self.turns = list(turns)
        self.prompts: list[str] = []

    async def generate(self, *, prompt_ids: list[int], **kwargs: Any) -> TokenOutput:
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        reply = self.turns.pop(0) if self.turns else "DONE"
        ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"] + [1]
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")


def _run_agent(
    tokenizer: PreTrainedTokenizerFast,
    turns: list[str],
    *,
    use_v1: bool = False,
    data_source: str = "deepgym/agent/fix_add",
    response_length: int = 4096,
    client: Any = None,
    **loop_kwargs: Any,
) -> tuple[AgentLoopOutput, TurnServer]:
    for entry in OmegaConf.load(dg_verl.AGENT_LOOP_CONFIG):
        _agent_loop_registry[entry.name] = entry
    entry = OmegaConf.merge(_agent_loop_registry[dg_verl.AGENT_NAME], loop_kwargs)
    config = OmegaConf.create(
        {
            "trainer": {"use_v1": use_v1},
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 256,
                    "response_length": response_length,
                    "agent": {},
                }
            },
            "data": {},
        }
    )
    server = TurnServer(tokenizer, turns)

    async def go() -> AgentLoopOutput:
        own = client or AsyncDeepGym()
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(dg_verl, "_async_client", lambda: own)
                return await _drive(entry, config, server, tokenizer, "Fix calc.add.", data_source)
        finally:
            await own.close()

    return asyncio.run(go()), server


FIX = [_bash("cat calc.py"), _bash("sed -i 's/return a - b/return a + b/' calc.py"), "DONE"]


def _spans(mask: list[int]) -> list[tuple[int, int]]:
    """``mask``'s runs as (value, length)."""
    out: list[tuple[int, int]] = []
    for bit in mask:
        if out and out[-1][0] == bit:
            out[-1] = (bit, out[-1][1] + 1)
        else:
            out.append((bit, 1))
    return out


def test_agent_loop_solves_a_session_and_masks_the_observations(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    out, server = _run_agent(tokenizer, FIX)
    assert out.reward_score == 1.0
    assert out.extra_fields["reward_extra_info"] == {"score": 1.0, "acc": 1.0, "error": 0.0}
    assert len(server.prompts) == 3 and out.num_turns == 6
    # The second prompt carries what `cat calc.py` printed, as a message the model did not write.
    assert "def add(a, b)" in server.prompts[1] and "exit 0" in server.prompts[1]
    assert "def add(a, b)" not in server.prompts[0]
    # Model turns 1, observations 0: three turns with two observations between them.
    assert [bit for bit, _ in _spans(out.response_mask)] == [1, 0, 1, 0, 1]
    assert len(out.response_ids) == len(out.response_mask)
    text = tokenizer.decode(out.response_ids)
    assert text.count("```bash") == 2 and "def add(a, b)" in text
    prompt = tokenizer.decode(out.prompt_ids)
    assert "Fix calc.add." in prompt and "```bash" not in prompt


def test_agent_loop_scores_an_agent_that_does_nothing_zero(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    out, server = _run_agent(tokenizer, ["I am done. DONE"])
    assert out.reward_score == 0.0
    assert out.extra_fields["reward_extra_info"] == {"score": 0.0, "acc": 0.0, "error": 0.0}
    assert sum(out.response_mask) == len(out.response_ids) > 0  # judged: trained on
    assert len(server.prompts) == 1


def test_agent_loop_keeps_to_the_turn_budget(tokenizer: PreTrainedTokenizerFast) -> None:
    # Two turns allowed: the fix (turn 3) never runs.
    out, server = _run_agent(
        tokenizer, [_bash("ls"), _bash("cat calc.py"), FIX[1], "DONE"], max_turns=2
    )
    assert len(server.prompts) == 2
    assert out.reward_score == 0.0 and out.extra_fields["reward_extra_info"]["error"] == 0.0


def test_agent_loop_stops_at_the_response_length(tokenizer: PreTrainedTokenizerFast) -> None:
    out, server = _run_agent(tokenizer, [_bash("seq 1 5000")] * 5, response_length=200)
    assert len(out.response_ids) == len(out.response_mask) <= 200
    assert len(server.prompts) == 1  # the output would not fit: no second turn
    assert out.extra_fields["reward_extra_info"]["error"] == 0.0


def test_agent_loop_without_a_verdict_is_dropped_under_v1_and_masked_otherwise(
    tokenizer: PreTrainedTokenizerFast,
) -> None:
    class Refused(AsyncDeepGym):
        async def session(self, env: Any) -> Any:
            from deepgym.exceptions import SandboxUnavailableError

            raise SandboxUnavailableError("no sandbox on this host")

    with pytest.raises(NoVerdictError):
        _run_agent(tokenizer, FIX, use_v1=True, client=Refused())
    rate = dg_verl.DeepGymAgentLoop.masked_rate
    before = rate.masked
    out, _ = _run_agent(tokenizer, FIX, client=Refused())
    assert out.reward_score == 0.0 and sum(out.response_mask) == 0
    assert out.extra_fields["reward_extra_info"] == {"score": 0.0, "acc": 0.0, "error": 1.0}
    assert rate.masked == before + 1
    # A sample whose environment is unknown, or not a session, is masked the same way.
    for source in ("other", "deepgym/two_sum"):
        out, _ = _run_agent(tokenizer, FIX, data_source=source)
        assert out.extra_fields["reward_extra_info"]["error"] == 1.0
