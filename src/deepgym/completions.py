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
    "first_code",
    "multipl_e_code",
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


def first_code(text: str) -> str | None:
    """The first complete fenced code block of ``text`` (a reply whose later blocks show how
    to use its first), else the body of an unclosed fence; None where there is neither."""
    blocks, _, unclosed = _parse(text)
    if blocks:
        return blocks[0][1]
    return unclosed if unclosed is not None and unclosed.strip() else None


# -- MultiPL-E ---------------------------------------------------------------------------------
# A MultiPL-E problem's program is its prompt (ending in the function's signature), the body
# that completes it, then its tests (whose first line closes the function, where the language's
# stop tokens end at a brace). An answer is either that body (a base model's continuation), or
# a reply that writes the program out (a chat model's, often in a fenced block, with examples
# or a main of its own after the function): ``multipl_e_code`` makes either the code that goes
# before the tests.

MULTIPL_E_CLOSED_BY_TESTS = frozenset({"cpp", "csharp", "java", "rust", "scala", "bash", "swift"})
"""Languages whose tests begin by closing the function (``}``): a written-out answer is cut at
the first stop token after its signature, as a continuation is (its main, its examples, go)."""


MULTIPL_E_IMPORTS = {
    "cpp": re.compile(r"^\s*#\s*include\b"),
    "csharp": re.compile(r"^\s*using\s+[\w.]+\s*;"),
    "java": re.compile(r"^\s*import\s+[\w.*]+\s*;"),
    "scala": re.compile(r"^\s*import\s+\S"),
    "d": re.compile(r"^\s*import\s+[\w.]+\s*;"),
    "rust": re.compile(r"^\s*use\s+[\w:{}, *]+;"),
}
"""The prompt's import lines, by language, that a written-out answer gets where it left them
out (the tests use them: C#'s ``Debug``, C++'s ``assert``): a repeat of one is harmless in
each of these languages."""


MULTIPL_E_MAINS = {
    "cpp": re.compile(r"^[ \t]*int\s+main\s*\(", re.M),
    "csharp": re.compile(r"^[ \t]*(?:public\s+|private\s+)?static\s+\w+\s+Main\s*\(", re.M),
    "java": re.compile(r"^[ \t]*(?:public\s+)?static\s+void\s+main\s*\(", re.M),
    "rust": re.compile(r"^[ \t]*(?:pub\s+)?fn\s+main\s*\(", re.M),
    "scala": re.compile(r"^[ \t]*(?:override\s+)?def\s+main\s*\(", re.M),
}
"""A written-out answer's own entry point, in the languages whose whole program is kept
(``_whole_program``): the tests bring theirs. Rust's and Scala's tests, too, close the function
first, then bring their ``main``."""
MULTIPL_E_OPENERS = {
    "cpp": "void multipl_e_closed_by_the_tests() {\n",
    "csharp": "    static void MultiplEClosedByTheTests() {\n",
    "java": "    static void multiplEClosedByTheTests() {\n",
    "rust": "#[allow(dead_code)]\nfn multipl_e_closed_by_the_tests() {\n",
    "scala": "    def multiplEClosedByTheTests(): Unit = {\n",
}
"""An empty function the tests' first line (``}``) closes, after a whole program."""


def _block_end(code: str, start: int) -> int | None:
    """Where the brace block that opens at or after ``start`` ends (past its ``}``), skipping
    strings, characters and comments; None where it never closes."""
    depth, i, n = 0, start, len(code)
    while i < n:
        ch = code[i]
        if code.startswith("//", i):
            i = code.find("\n", i)
            i = n if i < 0 else i
        elif code.startswith("/*", i):
            i = code.find("*/", i + 2)
            i = n if i < 0 else i + 2
            continue
        elif ch == '"':
            i += 1
            while i < n and code[i] != ch:
                i += 2 if code[i] == "\\" else 1
        elif ch == "'":  # a character, where it closes on its line; else Rust's lifetime
            j = i + 1
            while j < n and code[j] not in "'\n":
                j += 2 if code[j] == "\\" else 1
            i = j if j < n and code[j] == "'" else i
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _whole_program(code: str, language: str) -> str | None:
    """A written-out answer kept whole, for tests that close the function and bring their own
    entry point: its own ``main`` taken out, its class left open (C#, Java, Scala's object:
    the tests close it), and an empty function opened for the tests' first ``}`` to close. Its
    helpers stay wherever they are. None where its braces do not balance."""
    found = MULTIPL_E_MAINS[language].search(code)
    if found is not None:
        end = _block_end(code, found.start())
        if end is None:
            return None
        code = code[: found.start()] + code[end:]
    if language in ("csharp", "java", "scala"):  # the tests close the class (Scala's object)
        last = code.rstrip().rfind("}")
        if last < 0 or not re.search(r"\b(?:class|object)\s", code):
            return None
        code = code[:last]
    return code.rstrip() + "\n\n" + MULTIPL_E_OPENERS[language]


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _after_signature(code: str, signature: str) -> int | None:
    """Where the prompt's ``signature`` line ends in ``code`` (whitespace aside), or None."""
    want = _squeeze(signature)
    if not want:
        return None
    at = 0
    for line in code.splitlines(keepends=True):
        if _squeeze(line).startswith(want):
            seen = 0
            for i, ch in enumerate(line):  # walk to the end of the signature's characters
                if not ch.isspace():
                    seen += 1
                if seen == len(want):
                    return at + i + 1
        at += len(line)
    return None


def _cut(text: str, stops: Sequence[str]) -> str:
    """``text`` up to its first stop token (MultiPL-E's rule)."""
    ends = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return text[: min(ends)] if ends else text


_GO_PACKAGE = re.compile(r"^\s*package\s+(\w+)\s*$", re.M)
_GO_IMPORTS = re.compile(
    r"^\s*import\s*(?:\((?P<block>.*?)\)|(?P<one>[\w.]*\s*\"[^\"]+\"))", re.M | re.S
)


def _go_imports(code: str) -> list[str]:
    found = []
    for m in _GO_IMPORTS.finditer(code):
        lines = m["block"].splitlines() if m["block"] is not None else [m["one"]]
        found += [line.split("//")[0].strip() for line in lines]
    return [imp for imp in found if imp]


def _go_file(code: str, prompt: str) -> str:
    """One Go file of ``code`` and the prompt's imports (the tests' ``testing`` and ``fmt``):
    one package clause, one import block, each import once."""
    package = _GO_PACKAGE.search(code) or _GO_PACKAGE.search(prompt)
    imports = list(dict.fromkeys([*_go_imports(prompt), *_go_imports(code)]))
    body = _GO_IMPORTS.sub("", _GO_PACKAGE.sub("", code))
    head = f"package {package[1] if package else 'main'}\n\nimport (\n"
    return head + "".join(f"    {imp}\n" for imp in imports) + ")\n" + body


def multipl_e_code(answer: str, prompt: str, stop_tokens: Sequence[str], language: str) -> str:
    """The code that goes before a MultiPL-E problem's tests, from ``answer``: a continuation
    of ``prompt`` (the prompt, then the answer up to its first stop token), or a reply that
    writes the program out (its first fenced block, or its text where it holds the prompt's
    signature): in C++, C#, Java, Rust and Scala kept whole but for its own main (its helpers
    wherever they are: ``_whole_program``), elsewhere cut after the function where the tests
    close it, its own main left out, made one file with the prompt's imports (Go); ``language``
    is deepgym's."""
    signature = next((ln for ln in reversed(prompt.splitlines()) if ln.strip()), "")
    fenced = first_code(answer)
    code = fenced if fenced is not None else answer
    end = _after_signature(code, signature)
    continuation = fenced is None and end is None
    whole = (
        None if continuation or language not in MULTIPL_E_MAINS else _whole_program(code, language)
    )
    if continuation:
        code = prompt + _cut(answer, stop_tokens)
    elif whole is not None:
        code = whole
    elif language in MULTIPL_E_CLOSED_BY_TESTS and end is not None:
        code = code[:end] + _cut(code[end:], [s for s in stop_tokens if s != "\n\n"])
    elif language == "d":  # the tests bring an empty main of their own
        main = code.find("void main", end or 0)
        code = code if main < 0 else code[:main]
    if not continuation and language in MULTIPL_E_IMPORTS:  # the tests need them too
        have = {line.strip() for line in code.splitlines()}
        wanted = [ln for ln in prompt.splitlines() if MULTIPL_E_IMPORTS[language].match(ln)]
        code = "".join(f"{ln}\n" for ln in wanted if ln.strip() not in have) + code
    if language == "go_test":
        code = _go_file(code, prompt)
    elif language == "php":
        code = code.rstrip()
        code = code[:-2] if code.endswith("?>") else code
    elif language == "java":  # the program's class is Main (deepgym's Java: java -jar)
        code = re.sub(r"\bclass\s+Problem\b", "class Main", code)
    return code.rstrip("\n") + "\n"


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
