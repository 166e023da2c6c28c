"""Reading an image from disk: an OCI image layout directory, or a ``docker save`` tarball
(the legacy ``manifest.json`` form, or the OCI layout that newer Docker writes inside the tar).

The image's data model (descriptors, manifests, platforms, checked reads) is ``oci``'s; this
module finds the image's blobs in a folder or a tar and chooses the image the caller names.

Invariants:

- Every blob read through this module is checked against its descriptor: its size and its
  ``sha256`` digest. Small JSON blobs (index, manifest, config) are checked before they are
  parsed; a layer is checked as it streams (``oci.VerifiedReader``), so a caller that applies a
  layer must read it to the end and discard what it built if that raises.
- A blob's member name is ``blobs/`` + ``blobs.blob_name(digest)``, which checks the digest: no
  digest names a file outside the blob directory.
- A layout's ``index.json`` is followed by name (a ref annotation), else to its only image,
  else by platform (``oci.select_platform``); an image index, by platform.

Threat model: the image is untrusted data. Nothing here writes. A broken image is one
``ImageError`` line naming the file and the field (``oci``: the same error as from a
registry); a name or a path the caller gave that the image or the disk lacks is ``ConfigError``.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from typing import IO, Any

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images.blobs import blob_name
from deepgym.images.oci import (
    MAX_JSON_BYTES,
    OCI_CONFIG,
    OCI_LAYER,
    OCI_MANIFEST,
    REF_ANNOTATION,
    Descriptor,
    Index,
    Manifest,
    Platform,
    VerifiedReader,
    digest_of,
    host_platform,
    image_manifest,
    parse_config,
    parse_json,
    parse_manifest,
    read_verified,
    select_platform,
)

__all__ = ["ImageSource", "open_image"]

_CONTAINERD_NAME = "io.containerd.image.name"


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
            raise ImageError(f"{self.where} is not a readable tarball: {exc}") from exc
        self._members = members

    def has(self, name: str) -> bool:
        return name in self._members

    def open_member(self, name: str) -> IO[bytes]:
        if self._dir is not None:
            path = self._dir / name
            if not path.is_file() or path.is_symlink():
                raise ImageError(f"{self.where}: no file {name}")
            return path.open("rb")
        if self._tar is None:
            raise ImageError(f"{self.where}: no file {name}")
        member = None
        for candidate in (name, "./" + name):
            try:
                member = self._tar.getmember(candidate)
                break
            except KeyError:
                continue
        if member is None:
            raise ImageError(f"{self.where}: no member {name}")
        handle = self._tar.extractfile(member) if member.isreg() else None
        if handle is None:
            raise ImageError(f"{self.where}: {name} is not a regular file")
        return handle

    def open(self, desc: Descriptor) -> IO[bytes]:
        if desc.digest in self.extra:
            return io.BytesIO(self.extra[desc.digest])
        if desc.digest in self.names:
            return self.open_member(self.names[desc.digest])
        return self.open_member("blobs/" + blob_name(desc.digest))

    def read(self, desc: Descriptor) -> bytes:
        return read_verified(self.open(desc), desc, self.where)

    def read_member(self, name: str) -> bytes:
        with self.open_member(name) as handle:
            data = handle.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise ImageError(f"{self.where}: {name} is over {MAX_JSON_BYTES} bytes")
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
        raise ImageError(f"{where}: index.json lists no manifests")
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
        return select_platform(descs, want, where)
    names = sorted({d.annotations.get(REF_ANNOTATION, d.digest) for d in descs})
    raise ConfigError(f"{where} holds several images; name one of: {', '.join(names)}")


def _follow(blobs: _Blobs, desc: Descriptor, want: Platform) -> Manifest:
    """The manifest ``desc`` names, through image indexes (at most 4 deep)."""
    for _ in range(4):
        where = f"{blobs.where}: {desc.digest}"
        parsed = parse_manifest(blobs.read(desc), desc.media_type, where)
        if isinstance(parsed, Index):
            desc = select_platform(parsed.manifests, want, f"{blobs.where}: index {desc.digest}")
            continue
        return parsed
    raise ImageError(f"{blobs.where}: image indexes nested too deep at {desc.digest}")


def _read_oci(blobs: _Blobs, ref: str | None, want: Platform) -> ImageSource:
    layout = parse_json(blobs.read_member("oci-layout"), f"{blobs.where}: oci-layout")
    if layout.get("imageLayoutVersion") != "1.0.0":
        raise ImageError(f"{blobs.where}: unsupported oci-layout {layout!r}")
    index = parse_json(blobs.read_member("index.json"), f"{blobs.where}: index.json")
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
    config = Descriptor(OCI_CONFIG, digest_of(config_raw), len(config_raw))
    named = re.search(r"[0-9a-f]{64}", config_name)
    if named and named.group() != config.hex:
        raise ImageError(f"{where}: config {config_name} has digest {config.digest}: refused")
    rootfs = parse_json(config_raw, f"{where}: config").get("rootfs")
    diff_ids = (rootfs.get("diff_ids") if isinstance(rootfs, dict) else None) or []
    layers = []
    for i, name in enumerate(_strings(entry.get("Layers"), f"{where}: Layers")):
        with blobs.open_member(name) as handle:
            digest, size, gz = _hash_all(handle)
        expected = diff_ids[i] if i < len(diff_ids) else None
        if not gz and expected != digest:
            raise ImageError(f"{where}: layer {name} has digest {digest}, not {expected}: refused")
        layers.append(Descriptor(OCI_LAYER + ("+gzip" if gz else ""), digest, size))
        blobs.names[digest] = name
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config.to_json(),
        "layers": [d.to_json() for d in layers],
    }
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    manifest = image_manifest(raw, OCI_MANIFEST, where)
    blobs.extra[manifest.digest] = raw
    blobs.extra[config.digest] = config_raw
    own = _strings(entry.get("RepoTags"), f"{where}: RepoTags")
    return ImageSource(blobs, manifest, config_raw, own[0] if own else None)


def _strings(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageError(f"{where} must be a list of strings")
    return value


def _json_list(raw: bytes, where: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ImageError(f"{where} is not JSON: {exc}") from None
    if not isinstance(doc, list) or not doc or not all(isinstance(e, dict) for e in doc):
        raise ImageError(f"{where} must be a non-empty list of objects")
    return doc


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
        raise ImageError(f"{blobs.where} has neither oci-layout nor manifest.json")
    except BaseException:
        blobs.close()
        raise
