"""The distribution API's pure decisions: manifests read, a platform chosen, a challenge parsed.

Nothing here does I/O; ``deepgym.images.registry`` calls these and only moves bytes.

Invariants:

- every digest that leaves ``parse_manifest`` is ``sha256:`` and 64 lower-case hex digits (it
  becomes a file name under ``blobs/sha256/``: a registry cannot name a path outside it), and every
  size is a non-negative integer;
- a manifest that breaks the format is an ``ImageError`` naming what broke (the registry's fault,
  never the caller's input); a platform string that breaks the format is a ``ConfigError``;
- ``choose_platform`` is total over an index: it returns one descriptor or raises ``ImageError``
  listing the platforms the index has.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images.reference import check_digest

__all__ = [
    "ACCEPT",
    "DOCKER_LIST",
    "DOCKER_MANIFEST",
    "INDEX_TYPES",
    "MAX_MANIFEST_BYTES",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "Challenge",
    "Descriptor",
    "ImageManifest",
    "Index",
    "choose_platform",
    "parse_challenge",
    "parse_manifest",
    "parse_platform",
]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
IMAGE_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
ACCEPT = ", ".join([OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST])
"""The ``Accept`` header of a manifest request: both formats, lists and single images."""

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
"""The distribution reference server's own limit on a manifest's size."""

_ARCH_ALIASES = {"x86_64": "amd64", "x86-64": "amd64", "aarch64": "arm64"}
_PLATFORM = re.compile(r"([a-z0-9_]+)/([a-z0-9_-]+)(?:/([a-z0-9]+))?")


@dataclass(frozen=True)
class Descriptor:
    """A pointer to a blob or manifest: its media type, ``sha256:`` digest and size in bytes;
    ``platform`` (``os/arch[/variant]``) for an index's entries."""

    media_type: str
    digest: str
    size: int
    platform: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The OCI descriptor object (``mediaType``, ``digest``, ``size``)."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class ImageManifest:
    """One platform's image: a config blob and its layers, in the order they apply."""

    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]


@dataclass(frozen=True)
class Index:
    """An OCI index or a Docker manifest list: one manifest per platform."""

    media_type: str
    manifests: tuple[Descriptor, ...]


@dataclass(frozen=True)
class Challenge:
    """A ``WWW-Authenticate`` challenge: ``scheme`` lower-cased (``bearer``, ``basic``) and its
    parameters (``realm``, ``service``, ``scope``)."""

    scheme: str
    params: dict[str, str]


def parse_platform(platform: str) -> tuple[str, str, str | None]:
    """``"linux/arm64/v8"`` -> ``("linux", "arm64", "v8")``; architecture aliases normalised."""
    match = _PLATFORM.fullmatch(platform) if isinstance(platform, str) else None
    if match is None:
        raise ConfigError(f"platform {platform!r}: expected os/arch[/variant], e.g. linux/amd64")
    os_name, arch, variant = match.groups()
    return os_name, _ARCH_ALIASES.get(arch, arch), variant


def _variant(arch: str, variant: str | None) -> str | None:
    return variant or ("v8" if arch == "arm64" else None)


def choose_platform(index: Index, platform: str) -> Descriptor:
    """The entry of ``index`` for ``platform``: same os and architecture, and the same variant
    when one is asked for (arm64 means v8 when unsaid); the first such entry wins."""
    want_os, want_arch, want_variant = parse_platform(platform)
    for entry in index.manifests:
        if entry.platform is None:
            continue
        got_os, got_arch, got_variant = parse_platform(entry.platform)
        if (got_os, got_arch) != (want_os, want_arch):
            continue
        if want_variant is None or _variant(got_arch, got_variant) == _variant(
            want_arch, want_variant
        ):
            return entry
    have = sorted({e.platform for e in index.manifests if e.platform}) or ["none"]
    raise ImageError(
        f"no manifest for platform {platform!r} in the index (it has {', '.join(have)})"
    )


def _field(obj: Any, key: str, kind: type, what: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        kinds = {int: "an integer", str: "a string", list: "a list"}
        raise ImageError(f"{what}: field {key!r} missing or not {kinds.get(kind, kind.__name__)}")
    return value


def _descriptor(obj: Any, what: str) -> Descriptor:
    media_type = _field(obj, "mediaType", str, what)
    digest = _field(obj, "digest", str, what)
    size = _field(obj, "size", int, what)
    try:
        check_digest(digest, what=f"{what}: digest")
    except ConfigError as exc:
        raise ImageError(str(exc)) from None
    if size < 0:
        raise ImageError(f"{what}: negative size {size}")
    platform = None
    if isinstance(obj.get("platform"), dict):
        plat = obj["platform"]
        os_name, arch = plat.get("os"), plat.get("architecture")
        if isinstance(os_name, str) and isinstance(arch, str):
            variant = plat.get("variant")
            platform = f"{os_name}/{arch}" + (f"/{variant}" if isinstance(variant, str) else "")
            try:
                parse_platform(platform)
            except ConfigError:
                platform = None  # an entry of an odd platform is never chosen
    return Descriptor(media_type, digest, size, platform)


def parse_manifest(data: bytes, content_type: str | None = None) -> ImageManifest | Index:
    """Read a manifest or an index; its own ``mediaType`` wins over the response's type."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImageError(f"manifest is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ImageError("manifest is not a JSON object")
    if obj.get("schemaVersion") != 2:
        raise ImageError(
            f"manifest schemaVersion {obj.get('schemaVersion')!r} unsupported (2 only)"
        )
    media_type = obj.get("mediaType") or (content_type or "").split(";")[0].strip()
    if media_type not in INDEX_TYPES | IMAGE_TYPES:
        if "manifests" in obj:
            media_type = OCI_INDEX
        elif "layers" in obj:
            media_type = OCI_MANIFEST
        else:
            raise ImageError(f"manifest media type {media_type!r} unsupported")
    if media_type in INDEX_TYPES:
        entries = _field(obj, "manifests", list, "index")
        return Index(
            media_type, tuple(_descriptor(e, f"index entry {i}") for i, e in enumerate(entries))
        )
    config = _descriptor(obj.get("config"), "manifest config")
    layers = _field(obj, "layers", list, "manifest")
    return ImageManifest(
        media_type, config, tuple(_descriptor(e, f"layer {i}") for i, e in enumerate(layers))
    )


_PARAM = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*,?')


def parse_challenge(header: str) -> Challenge | None:
    """``Bearer realm="...",service="...",scope="..."`` -> ``Challenge``; None when unreadable."""
    scheme, _, rest = header.strip().partition(" ")
    if not scheme or "=" in scheme:
        return None
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        match = _PARAM.match(rest, pos)
        if match is None or match.end() == pos:
            break
        quoted, bare = match.group(2), match.group(3)
        params[match.group(1).lower()] = (
            re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare or ""
        )
        pos = match.end()
    return Challenge(scheme.lower(), params)
