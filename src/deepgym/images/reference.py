"""Image references (``debian:bookworm``, ``127.0.0.1:5000/team/img:tag@sha256:...``), parsed.

Docker's defaulting rules, so a name means here what it means to ``docker pull``:

- the first path component is a registry host when it holds a ``.`` or a ``:``, is
  ``localhost``, or has an upper-case letter; otherwise the name is on the default registry;
- the default registry is the ``default_registry`` argument, else ``$DEEPGYM_REGISTRY``, else
  ``docker.io`` (``index.docker.io`` is the same registry);
- on ``docker.io`` a one-component name is an official image: ``debian`` is ``library/debian``;
- a reference with neither tag nor digest means the tag ``latest``.

Invariants: parsing is pure (the environment is read only when no default is given) and total: any
string either parses or raises one ``ConfigError`` naming it; ``str(ref)`` parses back to ``ref``.
Only ``sha256`` digests are accepted: a digest is also a file name in the image store, so its form
is ``oci.is_digest``'s, the one digest rule.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from deepgym.exceptions import ConfigError
from deepgym.images.oci import is_digest
from deepgym.validation import is_loopback

__all__ = [
    "DEFAULT_REGISTRY",
    "REGISTRY_ENV",
    "Reference",
    "default_registry",
    "parse_reference",
]

DEFAULT_REGISTRY = "docker.io"
REGISTRY_ENV = "DEEPGYM_REGISTRY"
_DOCKER_HUB_API = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io"})

_HOST_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = re.compile(rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]{{1,5}})?")
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_MAX_NAME = 255


@dataclass(frozen=True)
class Reference:
    """One image: ``registry`` host[:port], ``repository`` path, and a ``tag``, a ``digest``
    (``sha256:<hex>``) or both (the digest then decides what is pulled)."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}"
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text

    @property
    def api_host(self) -> str:
        """The host the distribution API answers on (Docker Hub's differs from its name)."""
        return _DOCKER_HUB_API if self.registry in _DOCKER_HUB_ALIASES else self.registry

    @property
    def on_docker_hub(self) -> bool:
        """True for Docker Hub (``docker.io``, ``index.docker.io`` or its API host)."""
        return self.api_host == _DOCKER_HUB_API

    @property
    def target(self) -> str:
        """What the manifest URL names: the digest when there is one, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def is_loopback(self) -> bool:
        """True for a registry on this host (plain http is then the default)."""
        host = self.registry
        host = host[1 : host.index("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
        return is_loopback(host)


def default_registry(registry: str | None = None) -> str:
    """``registry``, else ``$DEEPGYM_REGISTRY``, else ``docker.io``; checked as a host[:port]."""
    where = "default_registry"
    if registry is None:
        registry, where = os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY, REGISTRY_ENV
    if "://" in registry:
        raise ConfigError(
            f"{where} {registry!r}: give host[:port], not a URL (plain http: insecure=True)"
        )
    registry = registry.rstrip("/")
    if not _HOST.fullmatch(registry):
        raise ConfigError(f"{where} {registry!r}: not a registry host[:port]")
    return "docker.io" if registry == "index.docker.io" else registry


def _is_host(component: str) -> bool:
    return (
        "." in component
        or ":" in component
        or component == "localhost"
        or component.lower() != component
    )


def _split_digest(text: str, original: str) -> tuple[str, str | None]:
    if "@" not in text:
        return text, None
    name, _, digest = text.partition("@")
    algorithm = digest.split(":", 1)[0]
    if algorithm != "sha256":
        raise ConfigError(
            f"image reference {original!r}: digest algorithm {algorithm!r} unsupported"
        )
    if not is_digest(digest):
        raise ConfigError(
            f"image reference {original!r}: bad digest (sha256: and 64 lower-case hex digits)"
        )
    return name, digest


def parse_reference(text: str, *, default_registry: str | None = None) -> Reference:
    """Parse an image reference with Docker's defaults; ``ConfigError`` names a bad one."""
    if not isinstance(text, str) or not text or text != text.strip():
        raise ConfigError(f"image reference {text!r}: empty or padded with spaces")
    name, digest = _split_digest(text, text)
    tag: str | None = None
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise ConfigError(f"image reference {text!r}: bad tag {tag!r}")
    first, sep, rest = name.partition("/")
    if sep and _is_host(first):
        if not _HOST.fullmatch(first):
            raise ConfigError(f"image reference {text!r}: bad registry host {first!r}")
        registry = "docker.io" if first == "index.docker.io" else first
        repository = rest
    else:
        registry = _registry_or_default(default_registry)
        repository = name
    if registry == DEFAULT_REGISTRY and "/" not in repository:
        repository = f"library/{repository}"
    _check_repository(repository, text)
    if tag is None and digest is None:
        tag = "latest"
    return Reference(registry, repository, tag, digest)


def _registry_or_default(registry: str | None) -> str:
    # parse_reference's keyword shadows default_registry() in its body
    return default_registry(registry)


def _check_repository(repository: str, original: str) -> None:
    if not repository:
        raise ConfigError(f"image reference {original!r}: no repository name")
    for component in repository.split("/"):
        if not _COMPONENT.fullmatch(component):
            if component.lower() != component:
                raise ConfigError(f"image reference {original!r}: repository must be lower-case")
            raise ConfigError(f"image reference {original!r}: bad path component {component!r}")
    if len(repository) > _MAX_NAME:
        raise ConfigError(f"image reference {original!r}: name longer than {_MAX_NAME} characters")
