"""Sampling answers from a model behind any OpenAI-compatible server (vLLM, SGLang, llama.cpp,
Ollama, TGI, OpenAI itself): ``/chat/completions`` or ``/completions``, one sample a request.

Failure rules:

- A 429 or a 5xx, or a connection that fails or times out, is retried with capped exponential
  backoff (``retry_delay``, pure; a server's ``Retry-After`` is honoured up to the cap), at most
  ``RetryPolicy.attempts`` tries in all. Any other status, or a body of the wrong shape, is not
  retried.
- What is left after that raises ``GenerationError``: the sample has no verdict (the model
  server failed, not the answer), never a 0. A reply whose content is empty or null is a real
  sample, the empty answer, judged like any other.
- httpx is imported lazily (the ``server`` extra), so ``import deepgym`` does not load it; a
  ``transport=`` seam (an ``httpx.AsyncBaseTransport``) lets tests script the server.
- The API key is read from the environment variable ``api_key_env`` names, when the request is
  sent; it is never stored on the object or written to the run store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from deepgym.exceptions import ConfigError, GenerationError
from deepgym.validation import optional_seconds, positive_int

__all__ = ["ChatModel", "RetryPolicy", "retry_delay", "retryable"]


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``attempts`` tries a sample; the n-th retry waits ``base_s * 2**(n-1)`` seconds,
    at most ``max_s``."""

    attempts: int = 5
    base_s: float = 0.5
    max_s: float = 8.0


def retryable(status: int) -> bool:
    """A status worth asking again: rate limited (429) or the server's fault (5xx)."""
    return status == 429 or 500 <= status <= 599


def retry_delay(policy: RetryPolicy, retry: int, retry_after: str | None = None) -> float:
    """Seconds to wait before the ``retry``-th retry (1-based): the server's ``Retry-After``
    (seconds) if it gave one, else exponential backoff; capped at ``policy.max_s`` either way."""
    if retry_after is not None:
        with contextlib.suppress(ValueError):
            return min(max(float(retry_after), 0.0), policy.max_s)
    return float(min(policy.base_s * 2 ** (retry - 1), policy.max_s))


Sampler = Callable[[str], Awaitable[str]]
"""``await sample(prompt)``: one sampled text, or ``GenerationError``."""


class ChatModel:
    """A model behind an OpenAI-compatible server at ``url`` (its base, such as
    ``http://127.0.0.1:8000/v1``), named ``name`` in requests.

    ``completions=True`` uses ``/completions`` (a base model continuing the prompt) instead of
    ``/chat/completions`` (the prompt as one user message, after ``system`` if given). At most
    ``concurrency`` requests are in flight; each waits at most ``timeout`` seconds.
    """

    def __init__(
        self,
        url: str,
        name: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        temperature: float = 0.8,
        max_tokens: int = 512,
        concurrency: int = 16,
        completions: bool = False,
        system: str | None = None,
        timeout: float | None = 300.0,
        retry: RetryPolicy | None = None,
        transport: Any = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"url must be an http(s) URL, got {url!r}")
        if not isinstance(name, str) or not name:
            raise ConfigError("name must name the model the server serves")
        if not isinstance(temperature, int | float) or temperature < 0:
            raise ConfigError(f"temperature must be a number >= 0, got {temperature!r}")
        self.url = url.rstrip("/")
        self.name = name
        self.api_key_env = api_key_env
        self.temperature = float(temperature)
        self.max_tokens = positive_int(max_tokens, "max_tokens")
        self.concurrency = positive_int(concurrency, "concurrency")
        self.completions = bool(completions)
        self.system = system
        self.timeout = optional_seconds(timeout, "timeout")
        self.retry = retry or RetryPolicy()
        if self.retry.attempts < 1:
            raise ConfigError(f"retry.attempts must be at least 1, got {self.retry.attempts}")
        self._transport = transport

    def describe(self) -> dict[str, Any]:
        """What a run store keeps of the model: no key."""
        return {
            "url": self.url,
            "model": self.name,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "completions": self.completions,
            "system": self.system,
        }

    def _request(self, prompt: str) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.name,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.completions:
            body["prompt"] = prompt
            return f"{self.url}/completions", body
        messages = [{"role": "system", "content": self.system}] if self.system else []
        body["messages"] = [*messages, {"role": "user", "content": prompt}]
        return f"{self.url}/chat/completions", body

    def _text(self, payload: Any) -> str:
        """The sampled text of a reply; ``GenerationError`` for a body of the wrong shape."""
        try:
            choice = payload["choices"][0]
            text = choice["text"] if self.completions else choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise GenerationError(f"the server's reply has no choice text ({exc!r})") from exc
        if text is None:
            return ""
        if not isinstance(text, str):
            raise GenerationError(f"the server's choice text is a {type(text).__name__}")
        return text

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Sampler]:
        """Open a connection pool for a run; yields ``sample(prompt) -> text``."""
        import httpx

        gate = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency)
        async with httpx.AsyncClient(
            transport=self._transport, timeout=self.timeout, limits=limits
        ) as client:

            async def sample(prompt: str) -> str:
                url, body = self._request(prompt)
                key = os.environ.get(self.api_key_env) if self.api_key_env else None
                headers = {"Authorization": f"Bearer {key}"} if key else {}
                cause = ""
                for attempt in range(1, self.retry.attempts + 1):
                    async with gate:
                        try:
                            reply = await client.post(url, json=body, headers=headers)
                        except httpx.TransportError as exc:  # connect, read, timeouts
                            cause, wait = f"{type(exc).__name__}: {exc}", None
                        else:
                            if reply.status_code == 200:
                                try:
                                    payload = reply.json()
                                except ValueError as exc:
                                    raise GenerationError("the server's reply is not JSON") from exc
                                return self._text(payload)
                            cause = f"HTTP {reply.status_code}: {reply.text[:200]}"
                            if not retryable(reply.status_code):
                                raise GenerationError(cause)
                            wait = reply.headers.get("retry-after")
                    if attempt < self.retry.attempts:
                        await asyncio.sleep(retry_delay(self.retry, attempt, wait))
                raise GenerationError(f"{cause} (after {self.retry.attempts} tries)")

            yield sample
