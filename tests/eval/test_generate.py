"""``ChatModel`` against the scripted OpenAI-protocol server: both endpoints, retries, failures."""

from __future__ import annotations

import asyncio
import time

import pytest

from deepgym.eval.model import ChatModel
from deepgym.exceptions import ConfigError, GenerationError
from deepgym.retry import RetryPolicy
from tests.eval.openai_server import serve

FAST = RetryPolicy(attempts=3, base_s=0.001, max_s=0.01)


def _sample(model: ChatModel, prompt: str) -> str:
    async def go() -> str:
        async with model.connect() as sample:
            return await sample(prompt)

    return asyncio.run(go())


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
        pytest.raises(GenerationError, match="after 3 tries") as err,
    ):
        _sample(ChatModel(url, "m", retry=FAST), "P")
    assert script.requests["P"] == 3 and err.value.cause == "http_error"


@pytest.mark.parametrize(
    ("action", "cause"),
    [("400", "http_error"), ("garbage", "malformed_reply"), ("deep", "malformed_reply")],
)
def test_a_client_error_or_a_bad_body_is_not_retried(action: str, cause: str) -> None:
    with serve({"P": [action]}) as (url, script), pytest.raises(GenerationError) as err:
        _sample(ChatModel(url, "m", retry=FAST), "P")
    assert script.requests["P"] == 1 and err.value.cause == cause


@pytest.mark.parametrize("action", ["null", "text:"])
def test_an_empty_reply_is_a_sample(action: str) -> None:
    with serve({"P": [action]}) as (url, _):
        assert _sample(ChatModel(url, "m", retry=FAST), "P") == ""


def test_a_server_that_is_down_is_a_generation_error() -> None:
    with serve() as (url, _):
        pass  # the port is closed now
    with pytest.raises(GenerationError, match="ConnectError") as err:
        _sample(ChatModel(url, "m", retry=FAST), "P")
    assert err.value.cause == "connection"


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
        ({"max_reply_bytes": 0}, "max_reply_bytes"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"url": "http://h/v1", "name": "m", **kwargs}
    with pytest.raises(ConfigError, match=field):
        ChatModel(**args)  # type: ignore[arg-type]


CAP = 64 * 2**10


def _failure(model: ChatModel, prompt: str = "P") -> GenerationError:
    with pytest.raises(GenerationError) as err:
        _sample(model, prompt)
    return err.value


def test_a_reply_within_the_cap_is_a_sample() -> None:
    with serve({"P": ["huge:60000"]}) as (url, _):
        assert _sample(ChatModel(url, "m", max_reply_bytes=CAP), "P") == "x" * 60000


@pytest.mark.parametrize("action", ["huge:1000000", "endless:200"])
def test_a_reply_over_the_cap_is_a_generation_error_asked_once(action: str) -> None:
    """Declared or not, a body over ``max_reply_bytes`` is refused as it streams in."""
    with serve({"P": [action]}) as (url, script):
        err = _failure(ChatModel(url, "m", max_reply_bytes=CAP, retry=FAST, timeout=5))
    assert err.cause == "reply_too_large" and f"{CAP} bytes" in str(err)
    assert script.requests["P"] == 1


def test_an_endless_error_body_is_read_only_in_part() -> None:
    """A 500 whose body never ends is still a 500: retried, then a generation error."""
    with serve({"P": ["endless:500"]}) as (url, script):
        err = _failure(ChatModel(url, "m", max_reply_bytes=CAP, retry=FAST, timeout=5))
    assert err.cause == "http_error" and "HTTP 500" in str(err)
    assert script.requests["P"] == FAST.attempts


def test_the_timeout_covers_the_whole_request() -> None:
    """One byte every 50 ms: no read waits long, the reply would take 20 s; the request ends at
    its deadline, and is not asked again."""
    with serve({"P": ["trickle:0.05:" + "x" * 300]}) as (url, script):
        t0 = time.monotonic()
        err = _failure(ChatModel(url, "m", timeout=0.5, retry=FAST))
        elapsed = time.monotonic() - t0
    assert err.cause == "deadline" and "timeout=0.5" in str(err)
    assert script.requests["P"] == 1
    assert elapsed < 10, elapsed


def test_a_silent_server_is_a_deadline_asked_once() -> None:
    with serve({"P": ["slow:3:late"]}) as (url, script):
        err = _failure(ChatModel(url, "m", timeout=0.3, retry=FAST))
    assert err.cause == "deadline" and script.requests["P"] == 1


def test_a_compressed_reply_is_refused() -> None:
    """The client asks for the identity encoding: a compressed body (a bomb, perhaps) is refused
    unread."""
    with serve({"P": ["gzip:hello"]}) as (url, script):
        err = _failure(ChatModel(url, "m", retry=FAST))
    assert err.cause == "malformed_reply" and "gzip" in str(err)
    assert script.requests["P"] == 1
    assert script.headers[0]["Accept-Encoding"] == "identity"


def test_a_text_that_is_not_unicode_is_a_generation_error() -> None:
    """A lone surrogate would be refused by every later step (the answer's check, the store)."""
    with serve({"P": ["surrogate"]}) as (url, _):
        err = _failure(ChatModel(url, "m", retry=FAST))
    assert err.cause == "invalid_text" and "surrogate" in str(err)
