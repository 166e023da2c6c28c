"""An agent backed by any OpenAI-compatible chat endpoint (vLLM, SGLang and the like serve one).

``ChatAgent(url, model)`` is an ``Agent`` for ``dg.run_episode`` and ``deepgym episode ENV
--model-url URL --model NAME``. The conversation starts with a system message that names the
tools and a user message with the task; each turn, the model's reply becomes the next action:

- a tool call: ``bash`` (``{"command": ...}``), ``write_file`` (``{"path": ..., "content":
  ...}``) or ``done`` (``{}``); the first call of a reply is the action, and its observation goes
  back as a ``tool`` message with the call's id;
- otherwise the last fenced ``bash``/``sh`` block of the reply's text, whose observation goes back
  as a ``user`` message;
- a reply with neither is ``done`` (the model has nothing more to do).

The episode's budget (turns, seconds) is ``run_episode``'s. Each turn is one request of the
model client ``deepgym.eval.model.ChatModel`` (the ``server`` extra's httpx): its deadline per
request, its reply cap and its retry policy; the API key is read from the environment variable
``api_key_env`` names, never kept. A request that fails raises ``TransportError`` (the
endpoint's failure, never the agent's 0), and an episode it ends has no verdict.
"""

from __future__ import annotations

import json
from typing import Any

from deepgym.completions import shell_blocks
from deepgym.eval.model import ChatModel
from deepgym.exceptions import GenerationError, TransportError
from deepgym.session import Action, Observation, output_text

__all__ = ["SYSTEM_PROMPT", "TOOLS", "ChatAgent", "parse_reply"]

SYSTEM_PROMPT = (
    "You are working in a Linux shell, in a work dir with the task's files. Act one step at a "
    "time with the tools: bash (run a command), write_file (write a file) and done (when the "
    "task is finished). You see each command's exit code and output."
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the work dir; see its exit code and output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a file under the work dir.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "done",
            "description": "Finish: the work dir is scored as it is.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
MAX_OBSERVATION_CHARS = 8000
"""The most of a command's output sent back to the model (its tail)."""


def parse_reply(message: dict[str, Any]) -> tuple[Action, str | None]:
    """The action in a chat reply's message, and the id of the tool call it came from (None
    for a fenced block, or for ``done`` by default)."""
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        name = fn.get("name")
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        call_id = call.get("id")
        if name == "bash":
            return Action("bash", command=str(args.get("command", ""))), call_id
        if name == "write_file":
            path, content = str(args.get("path", "")), str(args.get("content", ""))
            return Action("write_file", path=path, content=content), call_id
        if name == "done":
            return Action("done"), call_id
    commands, _ = shell_blocks(message.get("content") or "")
    if commands:
        return Action("bash", command=commands[-1]), None
    return Action("done"), None


def _observation_text(obs: Observation) -> str:
    if obs.last is None:
        return obs.note or "(no output)"
    return output_text(obs.last, MAX_OBSERVATION_CHARS)


class ChatAgent:
    """An agent that asks ``model`` at the chat endpoint ``url`` (``.../v1``) for each action.

    ``api_key_env``: the environment variable whose value is sent as a bearer token, where set.
    ``temperature``, ``max_tokens``: sent with each request. ``timeout``: seconds for one request,
    connect to last byte. ``messages`` holds the conversation.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout: float = 120.0,
        system_prompt: str = SYSTEM_PROMPT,
    ) -> None:
        self.client = ChatModel(
            url,
            model,
            api_key_env=api_key_env,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout=timeout,
            concurrency=1,
        )
        self.system_prompt = system_prompt
        self.messages: list[dict[str, Any]] = []
        self._pending: str | None = None
        """The id of the tool call the last action came from (its observation answers it)."""

    async def __call__(self, obs: Observation) -> Action:
        """The next action: the observation goes to the model, its reply is parsed."""
        if obs.step == 0:
            self.messages = [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": obs.task},
            ]
            self._pending = None
        else:
            text = _observation_text(obs)
            if self._pending is not None:
                self.messages.append(
                    {"role": "tool", "tool_call_id": self._pending, "content": text}
                )
            else:
                self.messages.append({"role": "user", "content": text})
        try:
            message = await self.client.chat(self.messages, tools=TOOLS)
        except GenerationError as exc:
            where = f"{self.client.url}/chat/completions"
            raise TransportError(f"the chat endpoint {where} failed: {exc}") from exc
        action, call_id = parse_reply(message)
        kept: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            kept["tool_calls"] = message["tool_calls"]
        self.messages.append(kept)
        self._pending = call_id
        return action
