"""A scripted OpenAI-protocol server on 127.0.0.1 for the model-eval tests.

It answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` (a ``text:`` action as
server-sent events when the request asks ``"stream": true``). What it answers for a
prompt is the next action of that prompt's script (cycling), else of the default script:

- ``text:<s>``: 200 with ``s`` as the sample's text (``text:`` alone: the empty text);
- ``null``: 200 with a null content; ``garbage``: 200 with a body of the wrong shape;
- ``slow:<seconds>:<s>``: ``text:<s>`` after a sleep;
- ``429`` or ``500`` (or any status): that status, with ``Retry-After: 0`` for a 429.

Hostile replies, generated as they are sent (the server itself stays small):

- ``huge:<n>``: 200 with a reply whose text is ``n`` characters, its length declared;
- ``endless:<status>``: that status, a chunked body that never ends (until the client leaves,
  or ``ENDLESS_BYTES`` as a safety net);
- ``trickle:<seconds>:<s>``: ``text:<s>``, one byte of the body every ``seconds``;
- ``gzip:<s>``: ``text:<s>``, compressed (``Content-Encoding: gzip``) whatever was asked;
- ``surrogate``: 200 with a text that is a lone surrogate (``"\\ud800"``).
- ``deep``: 200 with a JSON body nested deeper than a parser's stack (``[[[[...``).

``requests`` counts the requests per prompt, ``in_flight_max`` the most handled at once.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ENDLESS_BYTES = 128 * 2**20
"""An endless body stops here anyway, so a client that reads it all still ends."""
CHUNK = 64 * 2**10


class Script:
    """The server's state: scripts, request counts, concurrency."""

    def __init__(self, scripts: Mapping[str, Sequence[str]], default: Sequence[str]) -> None:
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.default = list(default)
        self.requests: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.in_flight_max = 0
        self.lock = threading.Lock()

    def next_action(self, prompt: str) -> str:
        with self.lock:
            actions = self.scripts.get(prompt, self.default)
            action = actions[self.requests[prompt] % len(actions)]
            self.requests[prompt] += 1
            self.in_flight += 1
            self.in_flight_max = max(self.in_flight_max, self.in_flight)
        return action

    def done(self) -> None:
        with self.lock:
            self.in_flight -= 1

    @property
    def total(self) -> int:
        return sum(self.requests.values())


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any, headers: Mapping[str, str] = {}) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            chat = self.path.endswith("/chat/completions")
            if not chat and not self.path.endswith("/completions"):
                self._send(404, {"error": "no such endpoint"})
                return
            prompt = body["messages"][-1]["content"] if chat else body["prompt"]
            with script.lock:
                script.bodies.append(body)
                script.headers.append(dict(self.headers))
            action = script.next_action(prompt)
            try:
                if body.get("stream") and action.startswith("text:"):
                    self._stream(action[len("text:") :], chat)
                    return
                self._answer(action, chat)
            finally:
                script.done()

        def _head(self, status: int, length: int | None, headers: Mapping[str, str] = {}) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if length is None:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(length))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()

        def _hostile(self, action: str, chat: bool) -> bool:
            """Send a hostile reply for ``action``; False if it is none."""
            kind, _, arg = action.partition(":")
            head, tail = _framing(chat)
            if kind == "huge":
                n = int(arg)
                self._head(200, len(head) + n + len(tail))
                self.wfile.write(head)
                for start in range(0, n, CHUNK):
                    self.wfile.write(b"x" * min(CHUNK, n - start))
                self.wfile.write(tail)
            elif kind == "endless":
                self._head(int(arg), None)
                chunk = b"x" * CHUNK
                self.wfile.write(b"%x\r\n%s\r\n" % (len(head), head))
                for _ in range(ENDLESS_BYTES // CHUNK):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            elif kind == "trickle":
                seconds, text = arg.split(":", 1)
                data = _reply(text, chat)
                self._head(200, len(data))
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(float(seconds))
            elif kind == "gzip":
                data = gzip.compress(_reply(arg, chat))
                self._head(200, len(data), {"Content-Encoding": "gzip"})
                self.wfile.write(data)
            elif kind == "deep":
                data = b"[" * 200_000
                self._head(200, len(data))
                self.wfile.write(data)
            elif kind == "surrogate":
                data = head + b"\\ud800" + tail
                self._head(200, len(data))
                self.wfile.write(data)
            else:
                return False
            return True

        def _stream(self, text: str, chat: bool) -> None:
            """``text`` as server-sent events (``"stream": true``): one chunk with the text,
            one with the finish reason, then ``[DONE]``."""
            reply = json.loads(_reply(text, chat))
            choice = reply["choices"][0]
            delta = {"delta": {"role": "assistant", "content": text}} if chat else {"text": text}
            kind = "chat.completion.chunk" if chat else "text_completion"
            chunks = [
                {
                    **reply,
                    "object": kind,
                    "choices": [{"index": 0, **delta, "finish_reason": None}],
                },
                {
                    **reply,
                    "object": kind,
                    "choices": [
                        {"index": 0, "delta": {}, **{"finish_reason": choice["finish_reason"]}}
                    ]
                    if chat
                    else [{"index": 0, "text": "", "finish_reason": choice["finish_reason"]}],
                },
            ]
            events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
            data = "".join(events).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, action: str, chat: bool) -> None:
            if self._hostile(action, chat):
                return
            if action.startswith("slow:"):
                _, seconds, rest = action.split(":", 2)
                time.sleep(float(seconds))
                action = "text:" + rest
            if action.startswith("text:") or action == "null":
                text = None if action == "null" else action[len("text:") :]
                self._send(200, json.loads(_reply(text, chat)))
            elif action == "garbage":
                self._send(200, {"nothing": []})
            else:
                status = int(action)
                self._send(status, {"error": action}, {"Retry-After": "0"} if status == 429 else {})

    return Handler


def _reply(text: str | None, chat: bool) -> bytes:
    """An OpenAI reply with every field the protocol's clients require (NeMo Gym's validate it)."""
    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
    reply = {
        "id": "scripted",
        "object": "chat.completion" if chat else "text_completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop", **choice}],
    }
    return json.dumps(reply).encode()


def _framing(chat: bool) -> tuple[bytes, bytes]:
    """A reply's bytes before and after its text (the text's quotes included)."""
    head, tail = _reply("@", chat).split(b"@")
    return head, tail


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 resets connections under 16 in flight

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (the resume tests) is no error of the server's."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve(
    scripts: Mapping[str, Sequence[str]] | None = None, default: Sequence[str] = ("text:pass",)
) -> Iterator[tuple[str, Script]]:
    """Serve ``scripts`` on a free port; yields the base URL (``.../v1``) and the state."""
    script = Script(scripts or {}, default)
    server = _Server(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
