"""A real causal LM behind a minimal OpenAI-compatible server on 127.0.0.1, for the model-eval
tests: nothing is downloaded.

The model is a ``transformers`` Llama with random weights (two layers, hidden size 32, seeded
with ``torch.manual_seed``, so the same on every run); the tokenizer a byte-level ``tokenizers``
BPE with no merges (every byte one token, so any prompt encodes), wrapped in
``PreTrainedTokenizerFast`` with a chat template, so ``apply_chat_template`` builds the chat
route's prompt. ``POST /v1/chat/completions`` and ``POST /v1/completions`` call
``model.generate`` with ``max_new_tokens`` from the request's ``max_tokens`` and sampling when
its ``temperature`` is above 0; the reply has the OpenAI shape (``choices[0].message.content``
or ``choices[0].text``, ``finish_reason``, ``usage``). Requests are served one at a time, under a
lock; ``TinyLM.replies`` records every text served, in order.

Random weights write random bytes: every answer is wrong, which is what the tests check.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIALS = ("<s>", "</s>", "<pad>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer built here: one token a byte, then ``<s>``, ``</s>``, ``<pad>``."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({s: len(alphabet) + i for i, s in enumerate(SPECIALS)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def model(vocab_size: int, seed: int = 0) -> LlamaForCausalLM:
    """A two-layer Llama with random weights, the same for the same ``seed``."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=vocab_size - 3,
        eos_token_id=vocab_size - 2,
        pad_token_id=vocab_size - 1,
    )
    return LlamaForCausalLM(config).eval()


@dataclass
class TinyLM:
    """The model, its tokenizer, and what it served: ``replies`` (each text, in order) and
    ``bodies`` (each request's JSON)."""

    seed: int = 0
    tok: PreTrainedTokenizerFast = field(default_factory=tokenizer)
    replies: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.lm = model(len(self.tok), self.seed)

    def complete(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        """The OpenAI-shaped reply to ``body``: one choice from ``model.generate``."""
        if chat:
            prompt = self.tok.apply_chat_template(
                body["messages"], add_generation_prompt=True, tokenize=False
            )
        else:
            prompt = self.tok.bos_token + body["prompt"]
        ids = self.tok(prompt, return_tensors="pt", add_special_tokens=False)
        temperature = float(body.get("temperature", 1.0))
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {}
        with self.lock, torch.inference_mode():
            out = self.lm.generate(
                **ids,
                max_new_tokens=int(body.get("max_tokens", 16)),
                pad_token_id=self.tok.pad_token_id,
                top_k=None,
                top_p=None,
                **({"do_sample": False} | sampling),
            )
            new = out[0, ids["input_ids"].shape[1] :]
            text = self.tok.decode(new, skip_special_tokens=True)
            self.bodies.append(body)
            self.replies.append(text)
        stopped = bool(len(new)) and int(new[-1]) == self.tok.eos_token_id
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop" if stopped else "length"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        n_prompt = int(ids["input_ids"].shape[1])
        return {
            "id": f"cmpl-{len(self.replies)}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model", "tiny"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": len(new),
                "total_tokens": n_prompt + len(new),
            },
        }


def _handler(lm: TinyLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/v1/chat/completions":
                self._send(200, lm.complete(body, chat=True))
            elif self.path == "/v1/completions":
                self._send(200, lm.complete(body, chat=False))
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

    return Handler


@contextmanager
def serve(seed: int = 0) -> Iterator[tuple[str, TinyLM]]:
    """Serve a ``TinyLM`` on a free port; yields the base URL (``.../v1``) and the model."""
    lm = TinyLM(seed)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(lm))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", lm
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
