"""``RewardFunction`` / ``AsyncRewardFunction``: the answer each completion gives, ``None`` without
a verdict, one bad sample never raising, the deadline, and the shapes trainers read."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import pickle
import time
from typing import Any

import pytest

from deepgym import AsyncRewardFunction, RewardFunction, load_environment
from deepgym.exceptions import ConfigError, UnknownEnvironmentError
from deepgym.reward_function import as_coroutine_function
from tests.integrations.conftest import BROKEN, TWO_SUM_OK, scripted_client

# -- scoring, over a scripted backend ----------------------------------------------------------


def _reward(**kw: Any) -> RewardFunction:
    client, _ = scripted_client()
    return RewardFunction("two_sum", client=client, **kw)


def test_scores_in_order_with_none_without_a_verdict() -> None:
    with _reward() as reward:
        out = reward(
            completions=[
                "pass",
                "```\nhalf\n```",
                [{"role": "assistant", "content": "nov"}],
                "fail",
            ],
            prompts=["p"] * 4,
            completion_ids=[[1]] * 4,
            trainer_state=object(),
            some_dataset_column=[1, 2, 3, 4],
        )
    assert out == [1.0, 0.0, None, 0.0]  # half the cases: nothing (two_sum is all-or-nothing)


def test_one_bad_sample_is_none_and_the_rest_are_scored(caplog: pytest.LogCaptureFixture) -> None:
    with _reward() as reward, caplog.at_level(logging.WARNING, logger="deepgym.rewards"):
        out = reward(["pass", 42, "raise", "pass"], env=["two_sum", "two_sum", None, "nope"])
    # 42 is not a completion; "raise" is a host failure; "nope" is no environment.
    assert out == [1.0, None, None, None]
    assert "sample 1" in caplog.text and "sample 3" in caplog.text


def test_the_env_column_names_each_samples_environment() -> None:
    client, backend = scripted_client()
    with RewardFunction(client=client, environments={"b": BROKEN}) as reward:
        assert reward(["pass", "pass"], env_name=["fizzbuzz", "b"]) == [1.0, None]
        assert reward(["pass"], env="two_sum") == [1.0]  # one name for all
        with pytest.raises(ConfigError, match="no environment"):
            reward(["pass"])  # no environment for any sample: a misconfiguration, raised
        assert reward(["pass", "pass"], env_name=["two_sum", None]) == [1.0, None]  # one sample
        with pytest.raises(ConfigError, match="env_name"):
            reward(["pass", "pass"], env_name=["two_sum"])  # a column of the wrong length
    # (Runs in flight together reach the backend in either order.)
    assert sorted(backend.envs) == ["broken", "fizzbuzz", "two_sum", "two_sum"]


def test_a_call_without_any_verdict_logs_one_error(caplog: pytest.LogCaptureFixture) -> None:
    with _reward() as reward, caplog.at_level(logging.WARNING, logger="deepgym.rewards"):
        assert reward(["nov"] * 6 + ["raise"] * 2) == [None] * 8
    (record,) = caplog.records  # one line for the call, not one per sample
    assert record.levelno == logging.ERROR
    assert "no sample of this call got a verdict (all 8 left out)" in record.message
    assert "6 of 8: samples 0, 1, 2, 3, 4, ..." in record.message
    assert (
        "sandbox_error: SandboxError: the host failed the run: the host ran out of pipes "
        "(2 of 8: samples 6, 7)"
    ) in record.message


def test_some_samples_without_a_verdict_log_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with _reward() as reward, caplog.at_level(logging.WARNING, logger="deepgym.rewards"):
        assert reward(["pass", "nov", "nov"]) == [1.0, None, None]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.message == (
        "2 of 3 samples got no verdict (left out): verifier_error: broke (2 of 3: samples 1, 2)"
    )


def test_a_misconfiguration_that_fails_every_sample_raises() -> None:
    from deepgym.exceptions import SandboxUnavailableError

    with _reward() as reward:
        with pytest.raises(SandboxUnavailableError, match="bwrap cannot run"):
            reward(["unavailable", "unavailable"])
        with pytest.raises(UnknownEnvironmentError):
            reward(["pass", "pass"], env="no_such_env")
        # Not every sample: the rest are scored, the misconfigured ones are None.
        assert reward(["pass", "pass"], env=["two_sum", "no_such_env"]) == [1.0, None]


def test_the_deadline_makes_late_samples_none() -> None:
    with _reward(timeout=0.3) as reward:
        t0 = time.monotonic()
        out = reward(["pass", "sleep:2"])
        assert time.monotonic() - t0 < 1.8  # the deadline, not the 2 s sample (slack for load)
    assert out == [1.0, None]


def test_log_metric_gets_the_no_verdict_share_and_cannot_break_a_step() -> None:
    seen: list[tuple[str, float]] = []

    def broken_metric(name: str, value: float) -> None:
        raise RuntimeError("logging is down")

    with _reward(name="code") as reward:
        assert reward(["pass", "nov"], log_metric=lambda n, v: seen.append((n, v))) == [1.0, None]
        assert reward(["pass"], log_metric=broken_metric) == [1.0]
    assert seen == [("code/no_verdict_frac", 0.5)]
    assert reward.__name__ == "code"


def test_shaped_and_per_test_rewards() -> None:
    with _reward() as reward:
        shaped = reward.shaped_rewards(["half", "nov"])
        per_test = reward.per_test_rewards(["half", "nov"])
        results = reward.results(["half"])
    assert shaped == [{"correct": 0.5, "style": 0.5}, None]  # components stay as reported
    assert per_test == [{"test_0": 1.0, "test_1": 0.0, "overall": 0.0}, None]
    assert results[0] is not None and results[0].score == 0.0


def test_completions_must_be_a_list() -> None:
    with _reward() as reward:
        for bad in (None, "one string", {"role": "assistant"}):
            with pytest.raises(ConfigError, match="completions"):
                reward(bad)
        with pytest.raises(ConfigError, match="prompts"):
            reward(["a"], prompts=["a", "b"])


def test_bad_settings_name_the_parameter() -> None:
    with pytest.raises(ConfigError, match="max_parallel"):
        RewardFunction("two_sum", max_parallel=0)
    with pytest.raises(ConfigError, match="timeout"):
        RewardFunction("two_sum", timeout=-1)


def test_the_async_function_and_its_coroutine_form() -> None:
    async def go() -> tuple[list[float | None], list[float | None]]:
        client, _ = scripted_client()
        reward = AsyncRewardFunction("two_sum", client=client)
        fn = as_coroutine_function(reward)
        assert inspect.iscoroutinefunction(fn) and fn.__name__ == "deepgym"
        a = await reward(completions=["pass", "nov"])
        b = await fn(prompts=["p"], completions=["half"], log_extra=None)
        await reward.close()
        await client.close()
        return a, b

    assert asyncio.run(go()) == ([1.0, None], [0.0])


def test_a_pickled_copy_starts_without_the_live_client() -> None:
    reward = RewardFunction("two_sum", max_parallel=3, name="x")
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "x" and copy.env is not None and copy.env.name == "two_sum"
    assert copy._core._client is None and copy._core.max_parallel == 3
    reward.close()


# -- the real sandbox ---------------------------------------------------------------------------


def test_real_sandbox_scores_and_leaves_out_a_broken_verifier() -> None:
    wrong = "```python\ndef two_sum(nums, target):\n    return [0, 1]\n```"
    with RewardFunction("two_sum", environments={"broken": BROKEN}) as reward:
        comps = [f"```python\n{TWO_SUM_OK}```", wrong, TWO_SUM_OK]
        out = reward(comps, env_name=[None, None, "broken"])
        per_test = reward.per_test_rewards(comps[:2])
    assert out[0] == 1.0 and out[1] == 0.0 and out[2] is None  # all-or-nothing
    assert per_test[0] is not None and per_test[1] is not None
    assert per_test[0]["overall"] == 1.0 and per_test[0]["test_0"] == 1.0
    assert math.isclose(per_test[1]["overall"], out[1])  # type: ignore[arg-type]
    assert len(per_test[1]) > 2 and 0 < sum(per_test[1].values()) < len(per_test[1]) - 1


def test_partial_scoring_passes_the_share_of_cases_through() -> None:
    """An environment with per-case partial credit: the wrong answer that passes some of
    two_sum's cases earns their share."""
    two_sum = load_environment("two_sum").model_copy(update={"scoring": "partial"})
    wrong = "def two_sum(nums, target):\n    return [0, 1]\n"
    with RewardFunction(two_sum) as reward:
        (score,) = reward([wrong])
        (per_test,) = reward.per_test_rewards([wrong])
    assert score is not None and 0.0 < score < 1.0
    assert per_test is not None and math.isclose(per_test["overall"], score)
