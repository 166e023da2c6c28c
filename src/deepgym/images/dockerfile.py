"""Reading a Dockerfile: its instructions, Docker's variable substitution, the ``ENV`` /
``ARG`` / ``LABEL`` pairs, and what a ``COPY`` or ``ADD`` copies.

Pure: nothing here reads a file or starts a process. Two readers stand on it: ``recipe`` (what
a daemonless image build runs) and Harbor's import (``deepgym.envs.harbor.plan``: whether the
host sandbox stands in for the image). A line this module cannot read is one ``ConfigError``
naming it.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass

from deepgym.exceptions import ConfigError

__all__ = [
    "DOCKER_PATH",
    "HEREDOC",
    "Copy",
    "Instruction",
    "copy_of",
    "pairs",
    "parse",
    "substitute",
]

DOCKER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The ``PATH`` an image build starts with (Docker's)."""
HEREDOC = re.compile(r"(?<!<)<<-?\s*[\"']?[A-Za-z_]\w*[\"']?")
"""A heredoc in a ``RUN`` or ``COPY`` line (neither reader takes one)."""
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")
_VAR = re.compile(r"\\\$|\$\{(\w+)(?::([-+])([^}]*))?\}|\$(\w+)")


@dataclass(frozen=True)
class Instruction:
    """One instruction: its first line's number, its keyword (upper case), the rest as written
    (continuation lines joined)."""

    line: int
    keyword: str
    args: str


@dataclass(frozen=True)
class Copy:
    """Files of the build context copied into the image."""

    line: int
    sources: tuple[str, ...]
    """Paths in the build context (normalised; glob patterns kept)."""
    dest: str
    """The absolute destination in the image."""
    into: bool
    """Whether ``dest`` is a folder the sources go into (it ends with ``/``, or names ``.``)."""
    chmod: int | None = None
    chown: str | None = None
    """``--chown=user[:group]`` as written (an image build applies it; a session ignores it)."""


def parse(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile: comments dropped, continuation lines joined (the
    escape character is ``\\``, or the one a ``# escape=`` directive names)."""
    escape = "\\"
    lines = text.splitlines()
    for raw in lines:  # parser directives come first, before any other line
        m = re.match(r"\s*#\s*(\w+)\s*=\s*(\S+)\s*$", raw)
        if m is None:
            break
        if m[1].lower() == "escape":
            escape = m[2]
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        body = raw.rstrip()
        if body.endswith(escape):
            pending.append(body[: -len(escape)])
            continue
        pending.append(body)
        out.append(_instruction(start, " ".join(p.strip() for p in pending if p.strip())))
        pending = []
    if pending:
        out.append(_instruction(start, " ".join(p.strip() for p in pending if p.strip())))
    return out


def _instruction(line: int, text: str) -> Instruction:
    keyword, _, args = text.partition(" ")
    return Instruction(line, keyword.upper(), args.strip())


def substitute(text: str, variables: dict[str, str]) -> str:
    """Docker's variable substitution: unset variables are empty, ``\\$`` is a dollar."""

    def one(m: re.Match[str]) -> str:
        if m[0] == "\\$":
            return "$"
        name = m[1] or m[4]
        value = variables.get(name, "")
        if m[2] == "-":
            return value or m[3]
        if m[2] == "+":
            return m[3] if value else ""
        return value

    return _VAR.sub(one, text)


def pairs(args: str, line: int) -> list[tuple[str, str]]:
    """``ENV`` / ``ARG`` / ``LABEL`` pairs: ``k=v k2="v 2"``, or the legacy ``k value``."""
    try:
        words = shlex.split(args)
    except ValueError as exc:
        raise ConfigError(f"line {line}: cannot read {args!r} ({exc})") from None
    if not words:
        raise ConfigError(f"line {line}: names no variable")
    if "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))] if len(words) > 1 else [(words[0], "")]
    return [(w.partition("=")[0], w.partition("=")[2]) for w in words]


def copy_of(ins: Instruction, where: str, cwd: str, variables: dict[str, str]) -> Copy:
    """A ``COPY``/``ADD`` of context files, its destination resolved against ``cwd``;
    ``ConfigError`` (``where``) for a copy from a stage, a URL, an archive or outside."""
    words: list[str]
    if ins.args.startswith("["):
        try:
            words = [str(w) for w in json.loads(ins.args)]
        except ValueError:
            raise ConfigError(f"{where}: an unreadable JSON list") from None
    else:
        words = ins.args.split()
    flags = [w for w in words if w.startswith("--")]
    paths = [substitute(w, variables) for w in words if not w.startswith("--")]
    chmod = None
    chown = None
    for flag in flags:
        name, _, value = flag.partition("=")
        if name == "--from":
            raise ConfigError(f"{where}: copies from another stage or image")
        if name == "--chmod":
            if not re.fullmatch(r"[0-7]{3,4}", value):
                raise ConfigError(f"{where}: --chmod={value} (only octal modes are read)")
            chmod = int(value, 8)
        if name == "--chown":
            chown = value
    if len(paths) < 2 or HEREDOC.search(ins.args):
        raise ConfigError(f"{where}: not a copy of context files (a source and a destination)")
    *sources, dest = paths
    for src in sources:
        if "://" in src or src.startswith("git@"):
            raise ConfigError(f"{where}: fetches {src}")
        if ins.keyword == "ADD" and src.lower().endswith(_ARCHIVES):
            raise ConfigError(f"{where}: ADD unpacks the archive {src}")
    normal = tuple(posixpath.normpath(s.lstrip("/") or ".") for s in sources)
    if any(s == ".." or s.startswith("../") for s in normal):
        raise ConfigError(f"{where}: copies from outside the build context")
    into = dest.endswith("/") or posixpath.basename(dest) in (".", "")
    return Copy(ins.line, normal, posixpath.normpath(posixpath.join(cwd, dest)), into, chmod, chown)
