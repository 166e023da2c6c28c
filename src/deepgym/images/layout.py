"""Reading an image from disk: an OCI image layout directory, or a ``docker save`` tarball
(the legacy ``manifest.json`` form, or the OCI layout that newer Docker writes inside the tar).

Invariants:

- Every blob read through this module is checked against its descriptor: its size and its
  ``sha256`` digest. Small JSON blobs (index, manifest, config) are checked before they are
  parsed; a layer is checked as it streams (``VerifiedReader`` raises when the stream ends with
  the wrong digest, or runs past its size), so a caller that applies a layer must read it to the
  end and discard what it built if that raises.
- A digest is also a file name (``blobs/sha256/<hex>``): only ``sha256:`` and 64 lower-case hex
  digits are accepted, so no digest can name a path outside the blob directory.
- Choosing a manifest from an image index is pure (``select_manifest``): by platform, skipping
  entries that are not images (``unknown/unknown`` attestations).

Threat model: the image is untrusted data. Nothing here writes; a bad image is refused with one
``ConfigError`` line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform as _platform
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from deepgym.exceptions import ConfigError

__all__ = [
    "INDEX_TYPES",
    "MANIFEST_TYPES",
    "REF_ANNOTATION",
    "Descriptor",
    "ImageConfig",
    "ImageSource",
    "Manifest",
    "Platform",
    "VerifiedReader",
    "check_digest",
    "host_platform",
    "open_image",
    "parse_config",
    "parse_manifest",
    "read_verified",
    "select_manifest",
]

REF_ANNOTATION = "org.opencontainers.image.ref.name"
_CONTAINERD_NAME = "io.containerd.image.name"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
_JSON_LIMIT = 4 << 20  # an index, manifest or config bigger than this is not an image's
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
_ARCH |= {"armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}


def check_digest(digest: object, where: str) -> str:
    """``digest`` when it is ``sha256:`` and 64 lower-case hex digits; else a ``ConfigError``."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise ConfigError(f"{where}: {digest!r} is not a sha256 digest (sha256:<64 hex digits>)")
    return digest


@dataclass(frozen=True)
class Platform:
    """An image's platform, as an index's ``platform`` object names it."""

    os: str = "linux"
    architecture: str = "amd64"
    variant: str | None = None

    def __str__(self) -> str:
        parts = [self.os, self.architecture] + ([self.variant] if self.variant else [])
        return "/".join(parts)

    @classmethod
    def parse(cls, text: str) -> Platform:
        """``linux/amd64`` or ``linux/arm/v7``."""
        parts = text.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise ConfigError(f"platform {text!r} is not os/architecture[/variant]")
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


def host_platform() -> Platform:
    """This host's platform (``linux/amd64`` on x86-64)."""
    machine = _platform.machine().lower()
    arch = _ARCH.get(machine, machine)
    return Platform("linux", arch, "v7" if machine == "armv7l" else None)


@dataclass(frozen=True)
class Descriptor:
    """A content descriptor: what a blob is, its digest and its size."""

    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str] = field(default_factory=dict, compare=False)
    platform: Platform | None = None

    @property
    def hex(self) -> str:
        """The digest's 64 hex digits (a blob's file name)."""
        return self.digest.partition(":")[2]

    @classmethod
    def from_json(cls, obj: object, where: str) -> Descriptor:
        """A descriptor from its JSON form; ``where`` names it in errors."""
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: a descriptor must be an object")
        size = obj.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ConfigError(f"{where}: size {size!r} is not a non-negative integer")
        annotations = obj.get("annotations") or {}
        if not isinstance(annotations, dict):
            raise ConfigError(f"{where}: annotations must be an object")
        plat = obj.get("platform")
        return cls(
            media_type=str(obj.get("mediaType") or ""),
            digest=check_digest(obj.get("digest"), where),
            size=size,
            annotations={str(k): str(v) for k, v in annotations.items()},
            platform=_platform_of(plat, where) if plat is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON form (mediaType, digest, size, annotations when any)."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest}
        out["size"] = self.size
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def _platform_of(obj: object, where: str) -> Platform:
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: platform must be an object")
    variant = obj.get("variant")
    return Platform(str(obj.get("os", "")), str(obj.get("architecture", "")), variant or None)


@dataclass(frozen=True)
class ImageConfig:
    """What an image's config says about running it (the rest is not used)."""

    env: tuple[str, ...] = ()
    working_dir: str = ""
    user: str = ""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()


def _strings(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def parse_config(raw: bytes, where: str = "image config") -> ImageConfig:
    """The ``config`` part of an image config blob."""
    doc = _json(raw, where)
    conf = doc.get("config") or {}
    if not isinstance(conf, dict):
        raise ConfigError(f"{where}: config must be an object")
    for key in ("WorkingDir", "User"):
        if not isinstance(conf.get(key) or "", str):
            raise ConfigError(f"{where}: config.{key} must be a string")
    return ImageConfig(
        env=_strings(conf.get("Env"), f"{where}: config.Env"),
        working_dir=conf.get("WorkingDir") or "",
        user=conf.get("User") or "",
        entrypoint=_strings(conf.get("Entrypoint"), f"{where}: config.Entrypoint"),
        cmd=_strings(conf.get("Cmd"), f"{where}: config.Cmd"),
    )


@dataclass(frozen=True)
class Manifest:
    """An image manifest (OCI or Docker v2 schema 2): its config and its layers, in order."""

    digest: str
    media_type: str
    config: Descriptor
    layers: tuple[Descriptor, ...]
    raw: bytes = field(repr=False, compare=False)


def _json(raw: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{where} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{where} is not a JSON object")
    return doc


def parse_manifest(raw: bytes, desc: Descriptor) -> Manifest:
    """The manifest ``desc`` names (``raw`` already verified against it); an index is refused."""
    where = f"manifest {desc.digest}"
    doc = _json(raw, where)
    media_type = doc.get("mediaType") or desc.media_type or OCI_MANIFEST
    if media_type in INDEX_TYPES or "manifests" in doc:
        raise ConfigError(f"{where} is an image index, not a manifest")
    if doc.get("schemaVersion") != 2 or media_type not in MANIFEST_TYPES:
        raise ConfigError(f"{where}: unsupported manifest type {media_type!r} (schema 2 only)")
    layers = doc.get("layers")
    if not isinstance(layers, list):
        raise ConfigError(f"{where}: layers must be a list")
    return Manifest(
        digest=desc.digest,
        media_type=media_type,
        config=Descriptor.from_json(doc.get("config"), f"{where}: config"),
        layers=tuple(Descriptor.from_json(d, f"{where}: layer {i}") for i, d in enumerate(layers)),
        raw=raw,
    )


def select_manifest(index: Mapping[str, Any], want: Platform, where: str = "index") -> Descriptor:
    """The entry of an image index for platform ``want`` (os and architecture must match; a
    variant, when ``want`` names one, too; an exact variant wins over none)."""
    entries = index.get("manifests")
    if not isinstance(entries, list):
        raise ConfigError(f"{where}: manifests must be a list")
    found = [Descriptor.from_json(e, f"{where}: manifests[{i}]") for i, e in enumerate(entries)]
    images = [d for d in found if d.platform and d.platform.os != "unknown"]
    fits = [
        d
        for d in images
        if d.platform
        and (d.platform.os, d.platform.architecture) == (want.os, want.architecture)
        and (want.variant is None or d.platform.variant in (want.variant, None))
    ]
    fits.sort(key=lambda d: d.platform is None or d.platform.variant != want.variant)
    if not fits:
        have = ", ".join(sorted({str(d.platform) for d in images})) or "none"
        raise ConfigError(f"{where}: no manifest for {want} (it has: {have})")
    return fits[0]


class VerifiedReader(io.RawIOBase):
    """A blob's bytes, checked as they are read: reading past ``desc.size`` or reaching the
    end with another size or digest raises ``ConfigError``."""

    def __init__(self, raw: IO[bytes], desc: Descriptor, where: str) -> None:
        super().__init__()
        self._raw, self._desc, self._where = raw, desc, where
        self._hash = hashlib.sha256()
        self._seen = 0
        self._checked = False

    def readable(self) -> bool:  # noqa: D102
        return True

    def readinto(self, buffer: Any) -> int:  # noqa: D102
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._desc.size - self._seen + 1)
        data = self._raw.read(want) if want > 0 else b""
        view[: len(data)] = data
        self._seen += len(data)
        self._hash.update(data)
        if self._seen > self._desc.size:
            raise ConfigError(
                f"{self._where}: blob {self._desc.digest} is longer than its size: refused"
            )
        if not data and want:
            self._check()
        return len(data)

    def _check(self) -> None:
        if self._checked:
            return
        got = "sha256:" + self._hash.hexdigest()
        if self._seen != self._desc.size or got != self._desc.digest:
            raise ConfigError(
                f"{self._where}: blob {self._desc.digest} has digest {got} "
                f"({self._seen} of {self._desc.size} bytes): refused"
            )
        self._checked = True

    def close(self) -> None:  # noqa: D102
        self._raw.close()
        super().close()


def read_verified(raw: IO[bytes], desc: Descriptor, where: str, limit: int = _JSON_LIMIT) -> bytes:
    """All of a small blob, checked against ``desc``; one bigger than ``limit`` is refused."""
    if desc.size > limit:
        raise ConfigError(f"{where}: blob {desc.digest} is {desc.size} bytes, over {limit}")
    with VerifiedReader(raw, desc, where) as reader:
        data = reader.read()
        reader.read()  # the end: checks size and digest even when size was exact
    return bytes(data or b"")


class ImageSource:
    """One image read from disk: its manifest, its config, and its blobs (``open_blob``, which
    verifies as it streams). Close it (or use it as a context manager) to free the tarball."""

    def __init__(
        self, blobs: _Blobs, manifest: Manifest, config_raw: bytes, name: str | None = None
    ) -> None:
        self._blobs = blobs
        self.name = name  # the image's own name there (a ref annotation, a repo tag), if any
        self.manifest = manifest
        self.config_raw = config_raw
        self.config = parse_config(config_raw, f"config {manifest.config.digest}")

    def open_blob(self, desc: Descriptor) -> VerifiedReader:
        """A stream of the blob ``desc`` names, verified as it is read."""
        return VerifiedReader(self._blobs.open(desc), desc, self._blobs.where)

    def close(self) -> None:
        """Close the tarball the image was read from (nothing for a directory)."""
        self._blobs.close()

    def __enter__(self) -> ImageSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Blobs:
    """Blobs by digest in a directory (``blobs/sha256/<hex>``) or a tar's members."""

    def __init__(self, where: str, directory: Path | None = None) -> None:
        self.where = where
        self._dir = directory
        self._tar: tarfile.TarFile | None = None
        self._members: set[str] = set()
        self.extra: dict[str, bytes] = {}  # synthesised blobs (a legacy archive's manifest)
        self.names: dict[str, str] = {}  # digest -> member (a legacy archive's layers)

    def open_tar(self, path: Path) -> None:
        try:
            self._tar = tarfile.open(path, "r:*")  # noqa: SIM115 (closed by close())
            members = {m.name.removeprefix("./") for m in self._tar.getmembers()}
        except (OSError, tarfile.TarError) as exc:
            raise ConfigError(f"{self.where} is not a readable tarball: {exc}") from exc
        self._members = members

    def has(self, name: str) -> bool:
        return name in self._members

    def open_member(self, name: str) -> IO[bytes]:
        if self._dir is not None:
            path = self._dir / name
            if not path.is_file() or path.is_symlink():
                raise ConfigError(f"{self.where}: no file {name}")
            return path.open("rb")
        if self._tar is None:
            raise ConfigError(f"{self.where}: no file {name}")
        member = None
        for candidate in (name, "./" + name):
            try:
                member = self._tar.getmember(candidate)
                break
            except KeyError:
                continue
        if member is None:
            raise ConfigError(f"{self.where}: no member {name}")
        handle = self._tar.extractfile(member) if member.isreg() else None
        if handle is None:
            raise ConfigError(f"{self.where}: {name} is not a regular file")
        return handle

    def open(self, desc: Descriptor) -> IO[bytes]:
        if desc.digest in self.extra:
            return io.BytesIO(self.extra[desc.digest])
        if desc.digest in self.names:
            return self.open_member(self.names[desc.digest])
        return self.open_member(f"blobs/sha256/{check_digest(desc.digest, self.where)[7:]}")

    def read(self, desc: Descriptor) -> bytes:
        return read_verified(self.open(desc), desc, self.where)

    def read_member(self, name: str) -> bytes:
        with self.open_member(name) as handle:
            data = handle.read(_JSON_LIMIT + 1)
        if len(data) > _JSON_LIMIT:
            raise ConfigError(f"{self.where}: {name} is over {_JSON_LIMIT} bytes")
        return data

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()


def _matches(desc: Descriptor, ref: str) -> bool:
    names = {desc.annotations.get(REF_ANNOTATION), desc.annotations.get(_CONTAINERD_NAME)}
    return ref in names or any(n and n.endswith(":" + ref) for n in names)


def _pick_from_layout(
    index: dict[str, Any], ref: str | None, want: Platform, where: str
) -> Descriptor:
    """The entry of a layout's ``index.json``: by ref, the only one, or by platform."""
    entries = index.get("manifests")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: index.json lists no manifests")
    descs = [Descriptor.from_json(e, f"{where}: index.json") for e in entries]
    if ref is not None:
        named = [d for d in descs if _matches(d, ref)]
        if not named:
            known = sorted({d.annotations.get(REF_ANNOTATION, "") for d in descs} - {""})
            raise ConfigError(f"{where}: no image named {ref!r} (it has: {known or 'none'})")
        descs = named
    if len(descs) == 1:
        return descs[0]
    if all(d.platform for d in descs):
        return select_manifest({"manifests": [e for e in entries if _in(e, descs)]}, want, where)
    names = sorted({d.annotations.get(REF_ANNOTATION, d.digest) for d in descs})
    raise ConfigError(f"{where} holds several images; name one of: {', '.join(names)}")


def _in(entry: Any, descs: list[Descriptor]) -> bool:
    return isinstance(entry, dict) and any(entry.get("digest") == d.digest for d in descs)


def _follow(blobs: _Blobs, desc: Descriptor, want: Platform) -> Manifest:
    """The manifest ``desc`` names, through image indexes (at most 4 deep)."""
    for _ in range(4):
        raw = blobs.read(desc)
        doc = _json(raw, f"{blobs.where}: {desc.digest}")
        if desc.media_type in INDEX_TYPES or doc.get("mediaType") in INDEX_TYPES:
            desc = select_manifest(doc, want, f"{blobs.where}: index {desc.digest}")
            continue
        return parse_manifest(raw, desc)
    raise ConfigError(f"{blobs.where}: image indexes nested too deep at {desc.digest}")


def _read_oci(blobs: _Blobs, ref: str | None, want: Platform) -> ImageSource:
    layout = _json(blobs.read_member("oci-layout"), f"{blobs.where}: oci-layout")
    if layout.get("imageLayoutVersion") != "1.0.0":
        raise ConfigError(f"{blobs.where}: unsupported oci-layout {layout!r}")
    index = _json(blobs.read_member("index.json"), f"{blobs.where}: index.json")
    top = _pick_from_layout(index, ref, want, blobs.where)
    manifest = _follow(blobs, top, want)
    name = top.annotations.get(REF_ANNOTATION)
    return ImageSource(blobs, manifest, blobs.read(manifest.config), name)


def _read_legacy(blobs: _Blobs, ref: str | None) -> ImageSource:
    """A ``docker save`` archive's ``manifest.json``. The manifest is made here (OCI, each layer
    described by hashing it), so the same archive always gives the same digest; the config's
    ``rootfs.diff_ids`` check each uncompressed layer, and a config named by its digest (as
    Docker names it) is checked against that name."""
    where = f"{blobs.where}: manifest.json"
    entries = _json_list(blobs.read_member("manifest.json"), where)
    if ref is not None:
        tags = {ref, f"{ref}:latest", f"docker.io/library/{ref}"}
        entries = [e for e in entries if tags & set(_strings(e.get("RepoTags"), where))]
        if not entries:
            raise ConfigError(f"{where}: no image tagged {ref!r}")
    if len(entries) > 1:
        every = sorted(t for e in entries for t in _strings(e.get("RepoTags"), where))
        raise ConfigError(f"{where} holds several images; name one of: {', '.join(every)}")
    entry = entries[0]
    config_name = str(entry.get("Config"))
    config_raw = blobs.read_member(config_name)
    config = Descriptor(OCI_CONFIG, _sha256(config_raw), len(config_raw))
    named = re.search(r"[0-9a-f]{64}", config_name)
    if named and named.group() != config.hex:
        raise ConfigError(f"{where}: config {config_name} has digest {config.digest}: refused")
    diff_ids = _json(config_raw, f"{where}: config").get("rootfs", {}).get("diff_ids") or []
    layers = []
    for i, name in enumerate(_strings(entry.get("Layers"), f"{where}: Layers")):
        with blobs.open_member(name) as handle:
            digest, size, gz = _hash_all(handle)
        expected = diff_ids[i] if i < len(diff_ids) else None
        if not gz and expected != digest:
            raise ConfigError(f"{where}: layer {name} has digest {digest}, not {expected}: refused")
        layers.append(Descriptor(OCI_LAYER + ("+gzip" if gz else ""), digest, size))
        blobs.names[digest] = name
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config.to_json(),
        "layers": [d.to_json() for d in layers],
    }
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    desc = Descriptor(OCI_MANIFEST, _sha256(raw), len(raw))
    blobs.extra[desc.digest] = raw
    blobs.extra[config.digest] = config_raw
    own = _strings(entry.get("RepoTags"), f"{where}: RepoTags")
    return ImageSource(blobs, parse_manifest(raw, desc), config_raw, own[0] if own else None)


def _json_list(raw: bytes, where: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{where} is not JSON: {exc}") from exc
    if not isinstance(doc, list) or not doc or not all(isinstance(e, dict) for e in doc):
        raise ConfigError(f"{where} must be a non-empty list of objects")
    return doc


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _hash_all(handle: IO[bytes]) -> tuple[str, int, bool]:
    """The digest and size of a stream, and whether it is gzip-compressed."""
    digest, size = hashlib.sha256(), 0
    head = handle.read(1 << 20)
    gz = head.startswith(b"\x1f\x8b")
    while head:
        digest.update(head)
        size += len(head)
        head = handle.read(1 << 20)
    return "sha256:" + digest.hexdigest(), size, gz


def open_image(path: Path, ref: str | None = None, platform: Platform | None = None) -> ImageSource:
    """The image at ``path``: an OCI layout directory, or a tarball (``docker save``, legacy
    or OCI inside). ``ref`` chooses among several images; an index is followed to ``platform``
    (default: this host's)."""
    want = platform or host_platform()
    if path.is_dir():
        return _read_oci(_Blobs(f"image layout {path}", directory=path), ref, want)
    if not path.is_file():
        raise ConfigError(f"image {path}: no such file or directory")
    blobs = _Blobs(f"image archive {path}")
    try:
        blobs.open_tar(path)
        if blobs.has("oci-layout") and blobs.has("index.json"):
            return _read_oci(blobs, ref, want)
        if blobs.has("manifest.json"):
            return _read_legacy(blobs, ref)
        raise ConfigError(f"{blobs.where} has neither oci-layout nor manifest.json")
    except BaseException:
        blobs.close()
        raise
