"""Sampling answers from a model behind any OpenAI-compatible server (vLLM, SGLang, llama.cpp,
Ollama, TGI, OpenAI itself): ``/chat/completions`` or ``/completions``, one sample a request.

Threat model: the server is not trusted to behave. It may answer with a body of any size, never
finish one, send it a byte at a time, compress it into a bomb, or put text in it that nothing
downstream accepts. Each of these costs one sample, bounded in time and memory, never the run.

Failure rules (each failure a ``GenerationError`` whose ``cause`` is a key of
``GENERATION_CAUSES``):

- A request has one deadline: ``timeout`` seconds cover the whole of it, from the connect to the
  reply's last byte (one ``asyncio.timeout``; no per-read timer that a trickling server keeps
  alive). Past it, the sample fails (``deadline``) and is not asked again: the timeout is how
  long a sample may take, and a server that took longer once would take as long again.
- The reply is read as a stream, at most ``max_reply_bytes`` of it (``MAX_REPLY_BYTES`` by
  default); a declared ``Content-Length`` over the cap is refused before reading. A longer reply
  fails the sample (``reply_too_large``) and is not asked again. Only the identity encoding is
  asked for: a compressed reply (a few KiB can unpack to gigabytes) is refused unread
  (``malformed_reply``). Of an error reply, only the first ``ERROR_BODY_BYTES`` are read.
- A 408, 429 or 5xx, or a connection that fails or breaks, is retried under the one retry policy
  of deepgym's clients (``deepgym.retry``: capped exponential backoff, a server's
  ``Retry-After`` honoured up to the cap), at most ``RetryPolicy.attempts`` tries in all
  (``http_error``, ``connection`` after the last).
  Any other status, a body of the wrong shape (``malformed_reply``) or a text that is not a
  valid answer (``invalid_text``: a lone surrogate, too long) is not retried. So one sample
  costs at most ``attempts`` requests, each at most ``timeout`` seconds and ``max_reply_bytes``
  bytes, plus the backoff waits.
- A sample that fails has no verdict (the model server failed, not the answer), never a 0. A
  reply whose content is empty or null is a real sample, the empty answer, judged like any other.
- httpx is imported lazily (the ``server`` extra), so ``import deepgym`` does not load it; a
  ``transport=`` seam (an ``httpx.AsyncBaseTransport``) lets tests script the server.
- The API key is read from the environment variable ``api_key_env`` names, when the request is
  sent; it is never stored on the object or written to the run store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from deepgym.exceptions import ConfigError, GenerationError
from deepgym.retry import RetryPolicy, retry_delay, retryable_status
from deepgym.text import install_extra, one_line
from deepgym.validation import MAX_TEXT_CHARS, number, optional_seconds, positive_int, text

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ERROR_BODY_BYTES",
    "GENERATION_CAUSES",
    "MAX_REPLY_BYTES",
    "ChatModel",
]

MAX_REPLY_BYTES = 4 * 2**20
"""A reply's body at most, by default: 4 MiB, some 30 times the JSON of a 32k-token completion
(about 4 bytes a token)."""
MAX_TEMPERATURE = 100.0
"""A sampling temperature at most (servers take 0 to 2, some more; past this it is a typo)."""
ERROR_BODY_BYTES = 2**10
"""What is read of an error reply's body, for its message."""

GENERATION_CAUSES: dict[str, str] = {
    "connection": "the server could not be reached, or the connection broke (after the retries)",
    "http_error": "an error status: a 429 or 5xx after the retries, any other at once",
    "deadline": "the request ran past its timeout (connect to last byte)",
    "reply_too_large": "the reply is over max_reply_bytes",
    "malformed_reply": "the reply is not JSON, has no choice text, or is compressed",
    "invalid_text": "the text is no valid answer (not unicode, or too long)",
    "answer_refused": "the text was refused as an answer before it was scored",
}
"""Why a sample was not generated: ``GenerationError.cause``, and the keys of
``ModelEval.generation_failures()``."""


Sampler = Callable[[str], Awaitable[str]]
"""``await sample(prompt)``: one sampled text, or ``GenerationError``."""


class ChatModel:
    """A model behind an OpenAI-compatible server at ``url`` (its base, such as
    ``http://127.0.0.1:8000/v1``), named ``name`` in requests.

    ``completions=True`` uses ``/completions`` (a base model continuing the prompt) instead of
    ``/chat/completions`` (the prompt as one user message, after ``system`` if given). At most
    ``concurrency`` requests are in flight; each takes at most ``timeout`` seconds in all (None:
    no limit) and reads at most ``max_reply_bytes`` of its reply (at most ``MAX_TEXT_CHARS``,
    so that a reply within it is never too long for an answer).
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
        max_reply_bytes: int = MAX_REPLY_BYTES,
        retry: RetryPolicy | None = None,
        transport: Any = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"url must be an http(s) URL, got {url!r}")
        if not isinstance(name, str) or not name:
            raise ConfigError("name must name the model the server serves")
        self.url = url.rstrip("/")
        self.name = name
        self.api_key_env = api_key_env
        self.temperature = number(temperature, "temperature", 0.0, MAX_TEMPERATURE)
        self.max_tokens = positive_int(max_tokens, "max_tokens")
        self.concurrency = positive_int(concurrency, "concurrency")
        self.completions = bool(completions)
        self.system = system
        self.timeout = optional_seconds(timeout, "timeout")
        self.max_reply_bytes = positive_int(max_reply_bytes, "max_reply_bytes", MAX_TEXT_CHARS)
        self.retry = retry or RetryPolicy()
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
            "timeout": self.timeout,
            "max_reply_bytes": self.max_reply_bytes,
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

    def _headers(self) -> dict[str, str]:
        headers = {"Accept-Encoding": "identity"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _text(self, data: bytes) -> str:
        """The sampled text of a reply's body; ``GenerationError`` for a body of the wrong shape
        or a text no answer may be."""
        value = _choice(
            data,
            lambda choice: choice["text"] if self.completions else choice["message"]["content"],
        )
        if value is None:
            return ""
        if not isinstance(value, str):
            raise GenerationError(
                f"the server's choice text is a {type(value).__name__}", cause="malformed_reply"
            )
        try:
            return text(value, "the server's choice text")
        except ConfigError as exc:
            raise GenerationError(str(exc), cause="invalid_text") from exc

    async def _exchange(
        self, client: httpx.AsyncClient, url: str, body: dict[str, Any]
    ) -> tuple[int, bytes, str | None]:
        """One request under its deadline: the status, the body (an error's cut short) and the
        ``Retry-After``. ``GenerationError`` past the deadline, for a reply over the cap or a
        compressed one; httpx's ``TransportError`` for a connection that fails (retried)."""
        try:
            async with (
                asyncio.timeout(self.timeout),
                client.stream("POST", url, json=body, headers=self._headers()) as reply,
            ):
                if reply.status_code != 200:
                    head = await _read(reply, ERROR_BODY_BYTES, cut=True)
                    return reply.status_code, head, reply.headers.get("retry-after")
                encoding = reply.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise GenerationError(
                        f"the server's reply is compressed ({encoding}), though only the "
                        "identity encoding was asked for",
                        cause="malformed_reply",
                    )
                return 200, await _read(reply, self.max_reply_bytes), None
        except TimeoutError as exc:
            raise GenerationError(
                f"the request took more than timeout={self.timeout:g} s (connect to last byte)",
                cause="deadline",
            ) from exc

    def _client(self) -> httpx.AsyncClient:
        try:
            import httpx
        except ImportError as exc:
            raise ConfigError(
                f"a model at a URL needs httpx, of the server extra: {install_extra('server')}"
            ) from exc

        limits = httpx.Limits(max_connections=self.concurrency)
        # No httpx timer: the deadline of _exchange is the one clock of a request.
        return httpx.AsyncClient(transport=self._transport, timeout=None, limits=limits)

    async def _post(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, url: str, body: dict[str, Any]
    ) -> bytes:
        """One request's reply body, under the retry policy (see the module)."""
        import httpx

        cause, kind = "", "connection"
        for attempt in range(1, self.retry.attempts + 1):
            async with gate:
                try:
                    status, data, wait = await self._exchange(client, url, body)
                except httpx.TransportError as exc:  # connect, read, protocol
                    cause, kind, wait = f"{type(exc).__name__}: {exc}", "connection", None
                else:
                    if status == 200:
                        return data
                    said = one_line(data.decode("utf-8", "replace"), 200)
                    cause, kind = f"HTTP {status}: {said}", "http_error"
                    if not retryable_status(status):
                        raise GenerationError(cause, cause=kind)
            if attempt < self.retry.attempts:
                await asyncio.sleep(retry_delay(self.retry, attempt, wait))
        raise GenerationError(f"{cause} (after {self.retry.attempts} tries)", cause=kind)

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Sampler]:
        """Open a connection pool for a run; yields ``sample(prompt) -> text``."""
        gate = asyncio.Semaphore(self.concurrency)
        async with self._client() as client:

            async def sample(prompt: str) -> str:
                url, body = self._request(prompt)
                return self._text(await self._post(client, gate, url, body))

            yield sample

    async def chat(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """One chat completion of ``messages`` (offering ``tools``), under the same deadline,
        reply cap and retry policy as a sample: the reply's message (``content`` and any
        ``tool_calls``), or ``GenerationError``. For an agent's turn (``ChatAgent``)."""
        body: dict[str, Any] = {
            "model": self.name,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if tools:
            body["tools"] = tools
        async with self._client() as client:
            data = await self._post(
                client, asyncio.Semaphore(1), f"{self.url}/chat/completions", body
            )
        message = _choice(data, lambda choice: choice["message"])
        if not isinstance(message, dict):
            raise GenerationError("the server's reply has no message", cause="malformed_reply")
        return message


def _choice(data: bytes, pick: Callable[[Any], Any]) -> Any:
    """``pick(first choice)`` of a reply's body; ``GenerationError`` for a body of the wrong
    shape."""
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError) as exc:  # bad UTF-8; nested past the stack
        raise GenerationError(
            f"the server's reply is not JSON ({type(exc).__name__})", cause="malformed_reply"
        ) from exc
    try:
        return pick(payload["choices"][0])
    except (KeyError, IndexError, TypeError) as exc:
        raise GenerationError(
            f"the server's reply has no choice text ({exc!r})", cause="malformed_reply"
        ) from exc


async def _read(reply: httpx.Response, limit: int, *, cut: bool = False) -> bytes:
    """At most ``limit`` bytes of ``reply``'s body, as they arrive (undecoded). Past the limit:
    the first ``limit`` bytes with ``cut``, else ``GenerationError`` (``reply_too_large``), and
    at once if the reply declares a longer length."""
    too_large = GenerationError(
        f"the server's reply is over {limit} bytes (max_reply_bytes)", cause="reply_too_large"
    )
    declared = reply.headers.get("content-length", "").strip()
    if not cut and declared.isdigit() and int(declared) > limit:
        raise too_large
    data = bytearray()
    async for chunk in reply.aiter_raw():  # the caller's stream context closes the reply
        data += chunk
        if len(data) > limit:
            if cut:
                return bytes(data[:limit])
            raise too_large
    return bytes(data)
