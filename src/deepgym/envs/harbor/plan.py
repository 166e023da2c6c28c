"""What a Harbor task's ``environment/Dockerfile`` builds, and whether the host sandbox gives it.

Pure: ``plan`` decides whether the image a Dockerfile's instructions build (``parse``, of
``deepgym.images.dockerfile``, the one Dockerfile reader) is one the host sandbox stands in for
and, if it is, returns what a session starts from (``Plan``: the work dir, the files copied into
it, the environment variables, the commands run in it). Nothing here reads a file or starts a
process: ``import_task`` does that.

Host-runnable, precisely. Every instruction is one of these, or ``plan`` raises ``ConfigError``
naming the line and why the task needs a container image:

- one ``FROM``, of a plain OS or Python base (``host_base``: one of ``HOST_BASES`` on Docker Hub,
  any tag, the reference read by ``deepgym.images.reference.parse_reference``): the sandbox's own
  system (bash, coreutils, git, make, cc, python3) stands in for it. Any other image, a second
  stage, or ``scratch`` needs the image;
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
from deepgym.images.dockerfile import (
    DOCKER_PATH,
    HEREDOC,
    Copy,
    Instruction,
    copy_of,
    pairs,
    substitute,
)
from deepgym.images.reference import DEFAULT_REGISTRY, parse_reference
from deepgym.text import clip

__all__ = [
    "DEFAULT_WORKDIR",
    "FETCHES",
    "HOST_BASES",
    "INSTALLERS",
    "Plan",
    "Run",
    "host_base",
    "inside",
    "plan",
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
_WORD_BREAK = re.compile(r"[\s;&|()<>`'\"]+")


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


def host_base(image: str) -> bool:
    """Whether ``image`` names one of ``HOST_BASES``: Docker Hub's official image, any tag or
    digest (``python:3``, ``docker.io/library/python:3``), never another registry's."""
    try:
        ref = parse_reference(image, default_registry=DEFAULT_REGISTRY)
    except ConfigError:
        return False
    return ref.on_docker_hub and ref.repository.removeprefix("library/") in HOST_BASES


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
        where = f"line {ins.line}: {ins.keyword} {clip(ins.args, 60)}"
        if ins.keyword == "FROM":
            if base is not None:
                raise ConfigError(f"{where}: a second stage (a multi-stage build)")
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image = substitute(words[0], variables) if words else ""
            if not host_base(image):
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
