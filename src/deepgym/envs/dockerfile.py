"""What a Harbor task's ``environment/Dockerfile`` builds, and whether the host sandbox gives it.

Pure: ``parse`` reads a Dockerfile's text into instructions; ``plan`` decides whether the image
they build is one the host sandbox stands in for and, if it is, returns what a session starts
from (``Plan``: the work dir, the files copied into it, the environment variables, the commands
run in it). Nothing here reads a file or starts a process: ``deepgym.envs.harbor`` does that.

Host-runnable, precisely. Every instruction is one of these, or ``plan`` raises ``ConfigError``
naming the line and why the task needs a container image:

- one ``FROM``, of a plain OS or Python base (``HOST_BASES``, any tag): the sandbox's own system
  (bash, coreutils, git, make, cc, python3) stands in for it. Any other image, a second stage, or
  ``scratch`` needs the image;
- ``WORKDIR``: the last one is the work dir (``DEFAULT_WORKDIR``, Harbor's convention, when the
  Dockerfile sets none);
- ``COPY`` and ``ADD`` of files of the build context (``environment/``) into the work dir. Not
  ``--from`` another stage or image, not a URL, not an archive that ``ADD`` would unpack, not a
  destination outside the work dir (the rest of the image is the host's, read-only);
- ``ENV`` and ``ARG``: variables, with Docker's ``$VAR``, ``${VAR}``, ``${VAR:-word}`` and
  ``${VAR:+word}`` substituted;
- ``RUN`` commands that install or fetch nothing (no word of ``INSTALLERS``, none of
  ``FETCHES``): they run at session start, in order, after every file is copied, each in the
  ``WORKDIR`` it was written under (which must lie in the work dir);
- ``CMD``, ``ENTRYPOINT``, ``USER``, ``SHELL``, ``LABEL``, ``EXPOSE``, ``VOLUME``,
  ``HEALTHCHECK``, ``STOPSIGNAL``, ``MAINTAINER`` and ``ONBUILD``: no effect here (the agent's
  shell is bash, as an unprivileged user, and nothing runs as a service).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from deepgym.exceptions import ConfigError

__all__ = [
    "DEFAULT_WORKDIR",
    "DOCKER_PATH",
    "FETCHES",
    "HEREDOC",
    "HOST_BASES",
    "INSTALLERS",
    "Copy",
    "Instruction",
    "Plan",
    "Run",
    "copy_of",
    "inside",
    "pairs",
    "parse",
    "plan",
    "repository",
    "short",
    "substitute",
]

HOST_BASES = frozenset({"ubuntu", "debian", "python", "buildpack-deps"})
"""Base images the host's system stands in for (Docker Hub's official images, any tag)."""
DEFAULT_WORKDIR = "/app"
"""The work dir of a task whose Dockerfile sets no ``WORKDIR`` (or that has no Dockerfile)."""
INSTALLERS = frozenset(
    {
        "add-apt-repository", "apk", "apt", "apt-get", "aptitude", "brew", "bun", "bundle",
        "cargo", "composer", "conda", "cpan", "cpanm", "curl", "dnf", "dpkg", "easy_install",
        "gem", "mamba", "micromamba", "microdnf", "nix-env", "npm", "npx", "pacman", "pdm",
        "pip", "pip3", "pipx", "pnpm", "poetry", "rpm", "rustup", "snap", "uv", "uvx", "wget",
        "yarn", "yum", "zypper",
    }
)  # fmt: skip
"""A ``RUN`` that names one of these installs or downloads software: it needs the image."""
FETCHES = {
    "git": frozenset({"clone", "fetch", "pull", "submodule"}),
    "go": frozenset({"get", "install"}),
    "make": frozenset({"install"}),
    "setup.py": frozenset({"install"}),
}
"""Commands that are local but for these subcommands, which install or fetch."""
IGNORED = frozenset(
    {
        "CMD", "ENTRYPOINT", "EXPOSE", "HEALTHCHECK", "LABEL", "MAINTAINER", "ONBUILD", "SHELL",
        "STOPSIGNAL", "USER", "VOLUME",
    }
)  # fmt: skip
"""Instructions with no effect on a session here."""
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst")
_VAR = re.compile(r"\\\$|\$\{(\w+)(?::([-+])([^}]*))?\}|\$(\w+)")
HEREDOC = re.compile(r"(?<!<)<<-?\s*[\"']?[A-Za-z_]\w*[\"']?")
_WORD_BREAK = re.compile(r"[\s;&|()<>`'\"]+")
DOCKER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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


@dataclass(frozen=True)
class Run:
    """A command run at build time, in ``cwd`` (absolute, in the image)."""

    line: int
    cwd: str
    command: str


@dataclass
class Plan:
    """What a host-runnable Dockerfile builds: the session starts from this."""

    base: str
    workdir: str
    copies: list[Copy] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)


def inside(path: str, folder: str) -> bool:
    """Whether the absolute ``path`` is ``folder`` or lies under it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


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


def repository(image: str) -> str:
    """An image reference's repository on Docker Hub (``docker.io/library/python:3`` ->
    ``python``); another registry's keeps its host (never a host base)."""
    name = image.lower().split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: name.rfind(":")]
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        name = name.removeprefix(prefix)
    return name.removeprefix("library/")


def _installs(command: str) -> str | None:
    """The word of ``command`` that installs or fetches software, or None."""
    words = [posixpath.basename(w) for w in _WORD_BREAK.split(command) if w]
    for word in words:
        if word in INSTALLERS:
            return word
    for word, verbs in FETCHES.items():
        if word in words:
            verb = next((w for w in words if w in verbs), None)
            if verb is not None:
                return f"{word} {verb}"
    return None


def short(text: str, limit: int = 60) -> str:
    """``text``, cut to ``limit`` characters with an ellipsis (for a message)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plan(instructions: list[Instruction]) -> Plan:
    """The session a Dockerfile's image stands for; ``ConfigError`` (its line and why) where
    only a container image gives what it builds."""
    variables: dict[str, str] = {"PATH": DOCKER_PATH}
    env: dict[str, str] = {}
    base: str | None = None
    cwd = "/"
    workdir: str | None = None
    copies: list[Copy] = []
    runs: list[Run] = []
    for ins in instructions:
        where = f"line {ins.line}: {ins.keyword} {short(ins.args)}"
        if ins.keyword == "FROM":
            if base is not None:
                raise ConfigError(f"{where}: a second stage (a multi-stage build)")
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image = substitute(words[0], variables) if words else ""
            if repository(image) not in HOST_BASES:
                bases = ", ".join(sorted(HOST_BASES))
                raise ConfigError(f"{where}: {image or '(none)'} is not a plain base ({bases})")
            base = image
        elif ins.keyword == "ARG":
            for key, value in pairs(ins.args, ins.line):
                variables.setdefault(key, substitute(value, variables))
        elif ins.keyword == "ENV":
            for key, value in pairs(ins.args, ins.line):
                env[key] = variables[key] = substitute(value, variables)
        elif ins.keyword == "WORKDIR":
            cwd = posixpath.normpath(posixpath.join(cwd, substitute(ins.args, variables)))
            workdir = cwd
        elif ins.keyword in ("COPY", "ADD"):
            copies.append(copy_of(ins, where, cwd, variables))
        elif ins.keyword == "RUN":
            runs.append(_run(ins, where, cwd))
        elif ins.keyword not in IGNORED:
            raise ConfigError(f"{where}: an instruction only a container build runs")
    if base is None:
        raise ConfigError("no FROM line: not a Dockerfile of an image")
    work = workdir or DEFAULT_WORKDIR
    if work == "/" or any(inside(work, d) for d in ("/logs", "/tests", "/solution", "/proc")):
        raise ConfigError(f"WORKDIR {work}: not a folder a session's work dir can stand for")
    for c in copies:
        if not inside(c.dest, work):
            raise ConfigError(f"line {c.line}: copies into {c.dest}, outside the work dir {work}")
    for r in runs:
        if not inside(r.cwd, work):
            raise ConfigError(f"line {r.line}: RUN in {r.cwd}, outside the work dir {work}")
    return Plan(base=base, workdir=work, copies=copies, env=env, runs=runs)


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


def _run(ins: Instruction, where: str, cwd: str) -> Run:
    args = ins.args
    if args.startswith("--"):
        raise ConfigError(f"{where}: a build-time mount or option")
    if args.startswith("["):
        try:
            command = shlex.join(str(w) for w in json.loads(args))
        except ValueError:
            raise ConfigError(f"{where}: an unreadable JSON list") from None
    else:
        command = args
    if HEREDOC.search(command):
        raise ConfigError(f"{where}: a heredoc")
    word = _installs(command)
    if word is not None:
        raise ConfigError(f"{where}: installs or fetches software ({word})")
    return Run(ins.line, cwd, command)
