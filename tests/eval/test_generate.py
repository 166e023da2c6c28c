"""``ChatModel`` against the scripted OpenAI-protocol server: both endpoints, retries, failures."""

from __future__ import annotations

import asyncio

import pytest

from deepgym.exceptions import ConfigError, GenerationError
from deepgym.generate import ChatModel, RetryPolicy, retry_delay, retryable
from tests.eval.openai_server import serve

FAST = RetryPolicy(attempts=3, base_s=0.001, max_s=0.01)


def _sample(model: ChatModel, prompt: str) -> str:
    async def go() -> str:
        async with model.connect() as sample:
            return await sample(prompt)

    return asyncio.run(go())


def test_retry_policy_is_bounded() -> None:
    p = RetryPolicy(attempts=5, base_s=0.5, max_s=4.0)
    assert [retry_delay(p, r) for r in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert retry_delay(p, 1, "2") == 2.0
    assert retry_delay(p, 1, "600") == 4.0
    assert retry_delay(p, 2, "Wed, 21 Oct 2015 07:28:00 GMT") == 1.0
    assert retryable(429) and retryable(503) and not retryable(400) and not retryable(200)


@pytest.mark.parametrize("completions", [False, True])
def test_both_endpoints(completions: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sekret")
    with serve({"P": ["text:hello"]}) as (url, script):
        model = ChatModel(
            url, "m", completions=completions, api_key_env="MY_KEY", temperature=0.2, retry=FAST
        )
        assert _sample(model, "P") == "hello"
    body = script.bodies[0]
    assert body["model"] == "m" and body["temperature"] == 0.2 and body["max_tokens"] == 512
    assert ("prompt" in body) is completions and ("messages" in body) is not completions
    assert script.headers[0]["Authorization"] == "Bearer sekret"
    assert "sekret" not in str(model.describe())


def test_429_and_500_are_retried() -> None:
    with serve({"P": ["429", "500", "text:ok"]}) as (url, script):
        assert _sample(ChatModel(url, "m", retry=FAST), "P") == "ok"
    assert script.requests["P"] == 3


def test_retries_are_bounded_then_generation_error() -> None:
    with (
        serve({"P": ["500"]}) as (url, script),
        pytest.raises(GenerationError, match="after 3 tries"),
    ):
        _sample(ChatModel(url, "m", retry=FAST), "P")
    assert script.requests["P"] == 3


@pytest.mark.parametrize("action", ["400", "garbage"])
def test_a_client_error_or_a_bad_body_is_not_retried(action: str) -> None:
    with serve({"P": [action]}) as (url, script), pytest.raises(GenerationError):
        _sample(ChatModel(url, "m", retry=FAST), "P")
    assert script.requests["P"] == 1


@pytest.mark.parametrize("action", ["null", "text:"])
def test_an_empty_reply_is_a_sample(action: str) -> None:
    with serve({"P": [action]}) as (url, _):
        assert _sample(ChatModel(url, "m", retry=FAST), "P") == ""


def test_a_server_that_is_down_is_a_generation_error() -> None:
    with serve() as (url, _):
        pass  # the port is closed now
    with pytest.raises(GenerationError, match="ConnectError"):
        _sample(ChatModel(url, "m", retry=FAST), "P")


def test_concurrency_bounds_requests_in_flight() -> None:
    async def go(model: ChatModel) -> list[str]:
        async with model.connect() as sample:
            return await asyncio.gather(*(sample("P") for _ in range(12)))

    with serve({"P": ["slow:0.05:x"]}) as (url, script):
        assert asyncio.run(go(ChatModel(url, "m", concurrency=3))) == ["x"] * 12
    assert script.in_flight_max == 3


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"url": "ftp://x"}, "url"),
        ({"name": ""}, "name"),
        ({"concurrency": 0}, "concurrency"),
        ({"temperature": -1}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"url": "http://h/v1", "name": "m", **kwargs}
    with pytest.raises(ConfigError, match=field):
        ChatModel(**args)  # type: ignore[arg-type]
