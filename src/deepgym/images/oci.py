"""The OCI image data model: media types, digests, platforms, descriptors, manifests and indexes,
the choice of an index's entry for a platform, an image's config, and blobs read verified.

Pure: nothing here opens a file or a socket. ``layout`` (images on disk), ``distribution``
(registries), ``store`` and ``build`` read and write images through this one model.

Invariants:

- A digest that leaves this module (a descriptor's, a manifest's) is ``sha256:`` and 64
  lower-case hex digits: it is also a file name (``blobs.blob_name``), so no image can name a
  path outside its blob folder. A size is a non-negative integer.
- **One error for a bad image.** Whatever the source (a registry, a ``docker save`` tarball, an
  OCI layout folder, the image store), an image that breaks the format is one ``ImageError`` line
  naming where and what: an index, manifest or config that is not what the spec says, a blob
  whose size or digest is not its descriptor's, an index with no entry for the platform. A bad
  image is never the answer's fault, so a run that needed it has no verdict.
  ``ConfigError`` is kept for what the caller asked for: a platform string that is not
  ``os/arch[/variant]``.
- **The platform rule** (``select_platform``; the OCI image spec's, as registries and
  containerd apply it): os and architecture must match, architecture aliases normalised
  (``x86_64`` is ``amd64``, ``aarch64`` is ``arm64``); ``arm64`` without a variant is
  ``arm64/v8``, on either side; a variant asked for matches that variant, or an entry that names
  none; with no variant asked (and not ``arm64``), any variant matches. An exact variant wins over
  an entry without one, then the index's order decides. Entries of os ``unknown`` (attestations)
  and entries without a readable platform are never chosen. Total: one descriptor, or
  ``ImageError`` listing the platforms the index has.
- Reading a blob is checked: ``VerifiedReader`` raises as soon as a stream passes its size, and
  when it ends with another size or digest; ``read_verified`` reads a small blob (at most
  ``MAX_JSON_BYTES``: an index, a manifest, a config) whole and checked.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform as _platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from deepgym.exceptions import ConfigError, ImageError

__all__ = [
    "BASE_LABEL",
    "DOCKER_LIST",
    "DOCKER_MANIFEST",
    "INDEX_TYPES",
    "MANIFEST_TYPES",
    "MAX_JSON_BYTES",
    "OCI_CONFIG",
    "OCI_INDEX",
    "OCI_LAYER",
    "OCI_LAYER_GZIP",
    "OCI_MANIFEST",
    "REF_ANNOTATION",
    "STAND_IN_LABEL",
    "Descriptor",
    "ImageConfig",
    "Index",
    "Manifest",
    "Platform",
    "VerifiedReader",
    "check_digest",
    "digest_of",
    "host_platform",
    "image_manifest",
    "is_digest",
    "parse_config",
    "parse_json",
    "parse_manifest",
    "read_verified",
    "select_platform",
]

BASE_LABEL = "org.deepgym.base"
"""A built image's config label: the ``FROM`` its Dockerfile names, where a stand-in was built
on instead (``images.build``'s ``bases``)."""
STAND_IN_LABEL = "org.deepgym.base.stand-in"
"""A built image's config label: the stand-in it was built on, by name and digest."""

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = f"{OCI_LAYER}+gzip"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
"""An image index: one manifest per platform (OCI's, and Docker's manifest list)."""
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
"""One platform's image: a config and its layers (OCI's, and Docker's v2 schema 2)."""
REF_ANNOTATION = "org.opencontainers.image.ref.name"
"""The annotation that names an image in an OCI layout's ``index.json``."""
MAX_JSON_BYTES = 4 * 1024 * 1024
"""The most bytes of an index, manifest or config (the distribution reference server's limit on a
manifest): one bigger is not an image's."""

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_PLATFORM = re.compile(r"([a-z0-9_]+)/([a-z0-9_-]+)(?:/([a-z0-9]+))?")
_ARCH_ALIASES = {"x86_64": "amd64", "x86-64": "amd64", "aarch64": "arm64"}
_HOST_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_HOST_ARCH |= {"armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}


# -- digests ----------------------------------------------------------------------------------


def is_digest(value: object) -> bool:
    """Whether ``value`` is ``sha256:`` and 64 lower-case hex digits (the only digests taken)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def check_digest(value: object, where: str) -> str:
    """``value`` when it is a digest (``is_digest``); else ``ImageError`` naming ``where``."""
    if not is_digest(value):
        raise ImageError(f"{where}: digest {value!r} is not sha256: and 64 lower-case hex digits")
    return str(value)


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- platforms --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    """An image's platform, as an index entry's ``platform`` object names it."""

    os: str = "linux"
    architecture: str = "amd64"
    variant: str | None = None

    def __str__(self) -> str:
        parts = [self.os, self.architecture] + ([self.variant] if self.variant else [])
        return "/".join(parts)

    @classmethod
    def parse(cls, text: str) -> Platform:
        """``linux/amd64``, ``linux/arm/v7``; architecture aliases normalised (``linux/x86_64``
        is ``linux/amd64``). ``ConfigError`` for a string of another form."""
        match = _PLATFORM.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ConfigError(f"platform {text!r}: expected os/arch[/variant], e.g. linux/amd64")
        os_name, arch, variant = match.groups()
        return cls(os_name, _ARCH_ALIASES.get(arch, arch), variant)

    def _arch(self) -> str:
        return _ARCH_ALIASES.get(self.architecture, self.architecture)

    def _variant(self) -> str | None:
        return self.variant or ("v8" if self._arch() == "arm64" else None)


def host_platform() -> Platform:
    """This host's platform (``linux/amd64`` on x86-64)."""
    machine = _platform.machine().lower()
    arch = _HOST_ARCH.get(machine, machine)
    return Platform("linux", arch, "v7" if machine == "armv7l" else None)


def _fits(entry: Platform, want: Platform) -> bool:
    if (entry.os, entry._arch()) != (want.os, want._arch()):
        return False
    wanted = want._variant()
    return wanted is None or entry.variant is None or entry._variant() == wanted


def select_platform(entries: Sequence[Descriptor], want: Platform, where: str) -> Descriptor:
    """The entry of an index for platform ``want`` (the rule is in the module doc);
    ``ImageError`` listing the platforms there are when none fits."""
    images = [e for e in entries if e.platform is not None and e.platform.os != "unknown"]
    fits = [e for e in images if e.platform is not None and _fits(e.platform, want)]
    if not fits:
        have = ", ".join(sorted({str(e.platform) for e in images})) or "none"
        raise ImageError(f"{where}: no manifest for {want} (it has: {have})")
    exact = [e for e in fits if e.platform is not None and e.platform._variant() == want._variant()]
    return (exact or fits)[0]


# -- descriptors, manifests, indexes ------------------------------------------------------------


@dataclass(frozen=True)
class Descriptor:
    """A content descriptor: what a blob is (``media_type``), its ``digest`` and its ``size``;
    an index entry's ``platform``; ``annotations`` (an OCI layout names its images there)."""

    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str] = field(default_factory=dict, compare=False)
    platform: Platform | None = None

    @property
    def hex(self) -> str:
        """The digest's 64 hex digits."""
        return self.digest.partition(":")[2]

    @classmethod
    def from_json(cls, obj: object, where: str) -> Descriptor:
        """A descriptor from its JSON form; ``ImageError`` naming ``where`` for a broken one."""
        if not isinstance(obj, dict):
            raise ImageError(f"{where}: a descriptor must be an object")
        media_type = _field(obj, "mediaType", str, where)
        size = _field(obj, "size", int, where)
        if size < 0:
            raise ImageError(f"{where}: negative size {size}")
        annotations = obj.get("annotations") or {}
        if not isinstance(annotations, dict):
            raise ImageError(f"{where}: annotations must be an object")
        return cls(
            media_type=media_type,
            digest=check_digest(obj.get("digest"), where),
            size=size,
            annotations={str(k): str(v) for k, v in annotations.items()},
            platform=_platform_of(obj.get("platform")),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form: ``mediaType``, ``digest``, ``size``, and ``annotations`` when any."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest}
        out["size"] = self.size
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def _field(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        kinds = {int: "an integer", str: "a string", list: "a list"}
        raise ImageError(f"{where}: field {key!r} missing or not {kinds.get(kind, kind.__name__)}")
    return value


def _platform_of(obj: object) -> Platform | None:
    """An entry's platform; None (an entry never chosen) where it is missing or unreadable."""
    if not isinstance(obj, dict):
        return None
    os_name, arch, variant = obj.get("os"), obj.get("architecture"), obj.get("variant")
    if not isinstance(os_name, str) or not isinstance(arch, str) or not os_name or not arch:
        return None
    return Platform(os_name, arch, variant if isinstance(variant, str) and variant else None)


@dataclass(frozen=True)
class Manifest:
    """One platform's image (OCI, or Docker v2 schema 2): its config and its layers, in the
    order they apply; ``digest`` and ``raw``, the bytes it was read from."""

    media_type: str
    digest: str
    config: Descriptor
    layers: tuple[Descriptor, ...]
    raw: bytes = field(repr=False, compare=False)

    def descriptor(self) -> Descriptor:
        """This manifest's own descriptor."""
        return Descriptor(self.media_type, self.digest, len(self.raw))


@dataclass(frozen=True)
class Index:
    """An image index (OCI, or a Docker manifest list): one manifest per platform."""

    media_type: str
    digest: str
    manifests: tuple[Descriptor, ...]
    raw: bytes = field(repr=False, compare=False)

    def descriptor(self) -> Descriptor:
        """This index's own descriptor."""
        return Descriptor(self.media_type, self.digest, len(self.raw))


def parse_json(raw: bytes, where: str) -> dict[str, Any]:
    """A JSON object from an image; ``ImageError`` for anything else."""
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ImageError(f"{where} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ImageError(f"{where} is not a JSON object")
    return doc


def parse_manifest(
    raw: bytes, media_type: str | None = None, where: str = "manifest"
) -> Manifest | Index:
    """A manifest or an index from its bytes. Its own ``mediaType`` wins over ``media_type``
    (a descriptor's, or a response's ``Content-Type``); with neither known, ``manifests`` makes
    an index and ``layers`` a manifest."""
    doc = parse_json(raw, where)
    if doc.get("schemaVersion") != 2:
        version = doc.get("schemaVersion")
        raise ImageError(f"{where}: schemaVersion {version!r} unsupported (2 only)")
    own = doc.get("mediaType")
    if own is not None and not isinstance(own, str):
        raise ImageError(f"{where}: mediaType {own!r} is not a string")
    kind = own or (media_type or "").split(";")[0].strip()
    if kind not in INDEX_TYPES | MANIFEST_TYPES:
        if own:
            raise ImageError(f"{where}: media type {own!r} unsupported")
        if "manifests" in doc:
            kind = OCI_INDEX
        elif "layers" in doc:
            kind = OCI_MANIFEST
        else:
            raise ImageError(f"{where}: media type {kind!r} unsupported")
    digest = digest_of(raw)
    if kind in INDEX_TYPES:
        entries = _field(doc, "manifests", list, where)
        found = (Descriptor.from_json(e, f"{where}: manifests[{i}]") for i, e in enumerate(entries))
        return Index(kind, digest, tuple(found), raw)
    config = Descriptor.from_json(doc.get("config"), f"{where}: config")
    layers = _field(doc, "layers", list, where)
    return Manifest(
        kind,
        digest,
        config,
        tuple(Descriptor.from_json(d, f"{where}: layers[{i}]") for i, d in enumerate(layers)),
        raw,
    )


def image_manifest(raw: bytes, media_type: str | None = None, where: str = "manifest") -> Manifest:
    """``parse_manifest``, refusing an index (``ImageError``)."""
    parsed = parse_manifest(raw, media_type, where)
    if isinstance(parsed, Index):
        raise ImageError(f"{where} is an image index, not a manifest")
    return parsed


# -- the config -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageConfig:
    """What an image's config says about running it (the rest is not used)."""

    env: tuple[str, ...] = ()
    working_dir: str = ""
    user: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    """The config's ``Labels`` whose values are strings, by name."""


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageError(f"{where} must be a list of strings")
    return tuple(value)


def parse_config(raw: bytes, where: str = "image config") -> ImageConfig:
    """The ``config`` part of an image config blob."""
    doc = parse_json(raw, where)
    conf = doc.get("config") or {}
    if not isinstance(conf, dict):
        raise ImageError(f"{where}: config must be an object")
    for key in ("WorkingDir", "User"):
        if not isinstance(conf.get(key) or "", str):
            raise ImageError(f"{where}: config.{key} must be a string")
    return ImageConfig(
        env=_strings(conf.get("Env"), f"{where}: config.Env"),
        working_dir=conf.get("WorkingDir") or "",
        user=conf.get("User") or "",
        entrypoint=_strings(conf.get("Entrypoint"), f"{where}: config.Entrypoint"),
        cmd=_strings(conf.get("Cmd"), f"{where}: config.Cmd"),
        labels=tuple(
            sorted((str(k), v) for k, v in (conf.get("Labels") or {}).items() if isinstance(v, str))
        )
        if isinstance(conf.get("Labels"), dict)
        else (),
    )


# -- blobs, read verified -----------------------------------------------------------------------


class VerifiedReader(io.RawIOBase):
    """A blob's bytes, checked as they are read: reading past ``desc.size``, or reaching the
    end with another size or digest, raises ``ImageError`` naming ``where``. A caller that keeps
    what it read must read to the end (``b""``) and discard what it built if that raises."""

    def __init__(self, raw: IO[bytes], desc: Descriptor, where: str) -> None:
        super().__init__()
        self._raw, self.desc, self._where = raw, desc, where
        self._hash = hashlib.sha256()
        self._seen = 0
        self._checked = False

    def readable(self) -> bool:  # noqa: D102
        return True

    def readinto(self, buffer: Any) -> int:  # noqa: D102
        view = memoryview(buffer).cast("B")
        want = min(len(view), self.desc.size - self._seen + 1)
        data = self._raw.read(want) if want > 0 else b""
        view[: len(data)] = data
        self._seen += len(data)
        self._hash.update(data)
        if self._seen > self.desc.size:
            raise ImageError(
                f"{self._where}: blob {self.desc.digest} is longer than its size: refused"
            )
        if not data and want:
            self._check()
        return len(data)

    def _check(self) -> None:
        if self._checked:
            return
        got = "sha256:" + self._hash.hexdigest()
        if self._seen != self.desc.size or got != self.desc.digest:
            raise ImageError(
                f"{self._where}: blob {self.desc.digest} has digest {got} "
                f"({self._seen} of {self.desc.size} bytes): refused"
            )
        self._checked = True

    def close(self) -> None:  # noqa: D102
        self._raw.close()
        super().close()


def read_verified(
    raw: IO[bytes], desc: Descriptor, where: str, limit: int = MAX_JSON_BYTES
) -> bytes:
    """All of a small blob, checked against ``desc``; one bigger than ``limit`` is refused."""
    if desc.size > limit:
        raise ImageError(f"{where}: blob {desc.digest} is {desc.size} bytes, over {limit}")
    with VerifiedReader(raw, desc, where) as reader:
        data = reader.read()
        reader.read()  # the end: checks size and digest even when size was exact
    return bytes(data or b"")
