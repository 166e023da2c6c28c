"""What the answer of a completion is: its text, and the code to run from that text.

Invariants (property-tested with the reward functions):

- The answer is the last fenced code block of the completion's last assistant turn (a string,
  one message, or a conversation whose content is a string or a list of parts); the whole text
  if there is no block; what follows an unclosed fence if the text was cut off inside one.
- A completion of the wrong shape raises ``ConfigError`` (the reward functions turn that into a
  sample without a verdict, never a 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from deepgym.exceptions import ConfigError

__all__ = [
    "DONE",
    "SHELL_LANGUAGES",
    "answer_of",
    "completion_text",
    "extract_code",
    "extract_code_kind",
    "prompt_text",
    "shell_blocks",
    "turn_command",
]

_FENCE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and set(s) == {fence[0]}


def _parse(text: str) -> tuple[list[tuple[str, str]], str, str | None]:
    """``text``'s complete fenced code blocks as (info string, body), the text outside them, and
    the body of an unclosed final fence (None if there is none)."""
    blocks: list[tuple[str, str]] = []
    outside: list[str] = []
    fence: str | None = None
    info = ""
    body: list[str] = []
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if fence is None:
            m = _FENCE.match(bare)
            if m and not (m["fence"][0] == "`" and "`" in m["info"]):
                fence, info, body = m["fence"], m["info"].strip(), []
            else:
                outside.append(line)
        elif _closes(bare, fence):
            blocks.append((info, "".join(body)))
            fence = None
        else:
            body.append(line)
    return blocks, "".join(outside), "".join(body) if fence is not None else None


def extract_code(text: str) -> str:
    """The last complete fenced code block of ``text``; else the body of an unclosed final fence
    (a cut-off answer); else ``text`` itself."""
    blocks, _, unclosed = _parse(text)
    if blocks:
        return blocks[-1][1]
    if unclosed is not None and unclosed.strip():
        return unclosed
    return text


def extract_code_kind(text: str) -> tuple[str, str]:
    """``extract_code``'s answer and where it came from: ``fenced`` (a complete block),
    ``incomplete_fenced`` (an unclosed final fence), ``heuristic`` (the whole text) or
    ``empty`` (nothing but whitespace)."""
    blocks, _, unclosed = _parse(text)
    if blocks:
        return blocks[-1][1], "fenced"
    if unclosed is not None and unclosed.strip():
        return unclosed, "incomplete_fenced"
    return text, "heuristic" if text.strip() else "empty"


SHELL_LANGUAGES = frozenset({"bash", "sh", "shell"})


def shell_blocks(text: str) -> tuple[list[str], str]:
    """The bodies of ``text``'s complete fenced blocks marked ``bash``, ``sh`` or ``shell`` (an
    agent's commands, stripped), and the text outside every fenced block."""
    blocks, outside, _ = _parse(text)
    commands = [
        body.strip() for info, body in blocks if info and info.split()[0].lower() in SHELL_LANGUAGES
    ]
    return commands, outside


DONE = "DONE"
"""A model's turn that says this (outside a code block) ends the agent's phase."""


def turn_command(text: str) -> str | None:
    """A model's turn as an agent's action: the body of its last fenced ``bash`` block, or None
    when the turn ends the agent's phase (no such block, or ``DONE`` outside every block)."""
    commands, outside = shell_blocks(text)
    return None if not commands or DONE in outside else commands[-1]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") == "text":
                parts.append(str(part.get("text") or ""))
        return "".join(parts)
    raise ConfigError(f"message content must be a str or a list of parts, got {type(content)}")


def completion_text(completion: Any) -> str:
    """The text of a completion's last assistant turn.

    A completion is a string, one message dict, or a conversation (a list of message dicts,
    each ``content`` a string or a list of parts such as ``{"type": "text", "text": ...}``). In a
    conversation whose messages carry roles, the last ``assistant`` message is the answer (none:
    the empty answer); without roles, the last message is.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        messages = list(completion)
        if not all(isinstance(m, Mapping) for m in messages):
            raise ConfigError("a conversation must be a list of message dicts")
        if any("role" in m for m in messages):
            messages = [m for m in messages if m.get("role") == "assistant"]
        return _content_text(messages[-1].get("content")) if messages else ""
    raise ConfigError(
        f"a completion must be a str, a message or a conversation, got {type(completion).__name__}"
    )


def answer_of(completion: Any, prefix: str = "") -> str:
    """The code to run for ``completion``: its last fenced block, or ``prefix`` + its whole text
    when it has no block (a base model continuing a prompt such as HumanEval's)."""
    text = completion_text(completion)
    code = extract_code(text)
    return prefix + text if code is text else code


def prompt_text(prompt: Any) -> str:
    """The text of a prompt (a string or a conversation): what ``prepend_prompt`` puts first."""
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return completion_text(
        [m for m in prompt if isinstance(m, Mapping)] if isinstance(prompt, Sequence) else prompt
    )
