"""What a Dockerfile builds, as steps a daemonless build runs (``deepgym.images.build``).

Pure: ``recipe(instructions)`` turns ``deepgym.images.dockerfile.parse``'s instructions into a
``Recipe``: the base image, the steps that make layers, and the image's config. The subset,
precisely; any other instruction or form raises ``ConfigError`` naming its line and keyword:

- one ``FROM`` (no second stage), any image (``deepgym.images.build`` resolves it);
- ``RUN``, shell form (``/bin/sh -c``) or exec form (a JSON list): run in the image's root,
  with the network, as the current ``USER``, in the current ``WORKDIR``, with the ``ENV``
  variables so far; no ``--mount`` or other option, no heredoc;
- ``COPY`` and ``ADD`` of build-context files (``--chmod``, ``--chown``; not ``--from``, not a
  URL, not an archive ``ADD`` would unpack);
- ``WORKDIR`` (made in a layer of its own when missing), ``ENV``, ``ARG``, ``USER``, ``CMD``,
  ``ENTRYPOINT``, ``LABEL``, ``EXPOSE``, ``STOPSIGNAL``: the config;
- ``MAINTAINER``, ``HEALTHCHECK`` and ``VOLUME``: recorded nowhere (no effect on a sandbox).

``ONBUILD`` and ``SHELL`` are refused (they change what later lines mean).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

from deepgym.exceptions import ConfigError
from deepgym.images import dockerfile as df
from deepgym.text import clip

__all__ = ["CopyStep", "MkdirStep", "Recipe", "RunStep", "Step", "recipe"]

_NO_EFFECT = frozenset({"MAINTAINER", "HEALTHCHECK", "VOLUME"})


@dataclass(frozen=True)
class RunStep:
    """A command run in the image's root at build time."""

    line: int
    argv: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...]
    user: str


@dataclass(frozen=True)
class CopyStep:
    """Build-context files copied into the image."""

    line: int
    copy: df.Copy


@dataclass(frozen=True)
class MkdirStep:
    """A ``WORKDIR`` made in the image."""

    line: int
    path: str


Step = RunStep | CopyStep | MkdirStep


@dataclass
class Recipe:
    """A Dockerfile as a build: its base, its steps in order, and the image config they leave
    (the keys of an OCI image config's ``config``)."""

    base: str
    steps: list[Step] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = ""
    user: str = ""
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)
    stop_signal: str = ""

    def config(self) -> dict[str, object]:
        """The OCI image config's ``config`` object."""
        out: dict[str, object] = {"Env": [f"{k}={v}" for k, v in self.env.items()]}
        if self.workdir:
            out["WorkingDir"] = self.workdir
        if self.user:
            out["User"] = self.user
        if self.cmd is not None:
            out["Cmd"] = self.cmd
        if self.entrypoint is not None:
            out["Entrypoint"] = self.entrypoint
        if self.labels:
            out["Labels"] = self.labels
        if self.exposed:
            out["ExposedPorts"] = {p if "/" in p else f"{p}/tcp": {} for p in self.exposed}
        if self.stop_signal:
            out["StopSignal"] = self.stop_signal
        return out


def _command(args: str, where: str) -> list[str]:
    """``CMD`` / ``ENTRYPOINT`` / ``RUN`` words: a JSON list as it is, else ``/bin/sh -c``."""
    if args.startswith("["):
        try:
            words = json.loads(args)
        except ValueError:
            raise ConfigError(f"{where}: an unreadable JSON list") from None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ConfigError(f"{where}: a JSON list of strings is needed")
        return words
    return ["/bin/sh", "-c", args]


def recipe(instructions: list[df.Instruction]) -> Recipe:
    """The build of ``instructions`` (``deepgym.images.dockerfile.parse``); ``ConfigError``
    naming the line and keyword of the first one outside the subset."""
    variables: dict[str, str] = {"PATH": df.DOCKER_PATH}
    out: Recipe | None = None
    for ins in instructions:
        where = f"line {ins.line}: {ins.keyword} {clip(ins.args, 60)}"
        key = ins.keyword
        if key == "ARG":
            for name, value in df.pairs(ins.args, ins.line):
                variables.setdefault(name, df.substitute(value, variables))
            continue
        if key == "FROM":
            if out is not None:
                raise ConfigError(f"{where}: a second FROM (multi-stage builds are not built)")
            words = [w for w in ins.args.split() if not w.startswith("--")]
            if not words or (len(words) > 1 and words[1].upper() != "AS"):
                raise ConfigError(f"{where}: names no image")
            out = Recipe(base=df.substitute(words[0], variables))
            out.env["PATH"] = df.DOCKER_PATH
            continue
        if out is None:
            raise ConfigError(f"{where}: comes before FROM")
        _apply(out, ins, where, variables)
    if out is None:
        raise ConfigError("no FROM line: not a Dockerfile of an image")
    return out


def _apply(out: Recipe, ins: df.Instruction, where: str, variables: dict[str, str]) -> None:
    key, cwd = ins.keyword, out.workdir or "/"
    if key == "ENV":
        for name, value in df.pairs(ins.args, ins.line):
            out.env[name] = variables[name] = df.substitute(value, variables)
    elif key == "WORKDIR":
        out.workdir = posixpath.normpath(posixpath.join(cwd, df.substitute(ins.args, variables)))
        out.steps.append(MkdirStep(ins.line, out.workdir))
    elif key == "USER":
        out.user = df.substitute(ins.args.strip(), variables)
    elif key in ("COPY", "ADD"):
        out.steps.append(CopyStep(ins.line, df.copy_of(ins, where, cwd, variables)))
    elif key == "RUN":
        if ins.args.startswith("--"):
            raise ConfigError(f"{where}: RUN options (--mount, --network) are not built")
        if df.HEREDOC.search(ins.args):
            raise ConfigError(f"{where}: a heredoc is not built")
        env = tuple(out.env.items())
        argv = tuple(_command(ins.args, where))
        out.steps.append(RunStep(ins.line, argv, cwd, env, out.user or "root"))
    elif key == "CMD":
        out.cmd = _command(ins.args, where)
    elif key == "ENTRYPOINT":
        out.entrypoint = _command(ins.args, where)
    elif key == "LABEL":
        out.labels.update(df.pairs(ins.args, ins.line))
    elif key == "EXPOSE":
        out.exposed += df.substitute(ins.args, variables).split()
    elif key == "STOPSIGNAL":
        out.stop_signal = ins.args.strip()
    elif key not in _NO_EFFECT:
        raise ConfigError(f"{where}: {key} is outside the Dockerfile subset deepgym builds")
