"""The image store under ``$DEEPGYM_HOME/images``: images by digest, unpacked roots built once.

Layout on disk::

    images/oci/             an OCI image layout: blobs shared by every image, deduplicated
    images/oci/index.json   the refs: one entry per image, its name in the ref annotation
    images/roots/<hex>/     the unpacked root of the manifest sha256:<hex>
    images/tmp/             roots being built (and blobs' temporary files live beside them)
    images/locks/           lock files (``fcntl.flock``)

Invariants:

- A blob's file holds exactly the bytes of its digest (``blobs.BlobStore``: written to a
  temporary file, verified, then renamed into place). A layer is verified again as it is
  unpacked.
- A broken image in the store (a blob missing, or not its digest's bytes) is ``ImageError``, as
  from any other source (``oci``); a name or digest the store does not hold is ``ConfigError``.
- A root exists only complete: it is built in ``tmp/`` and renamed into ``roots/`` in one step,
  under a lock per digest, so two processes resolving one image unpack it once, and a crash
  leaves only a temporary directory, which the next resolve of that image (or ``prune``) removes.
- ``prune`` removes what no entry of ``index.json`` reaches, holding the store's lock exclusively;
  everything that writes blobs (imports, ``add_blobs_manifest``, and any writer of
  ``blobs_dir`` that holds ``writing()``) holds it shared, so prune never removes a blob that is
  about to be named. ``remove`` only drops a ref: ``prune`` frees the space.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import io
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, ImageError
from deepgym.home import deepgym_home
from deepgym.images.blobs import BlobStore
from deepgym.images.layout import ImageSource, open_image
from deepgym.images.oci import (
    BASE_LABEL,
    OCI_INDEX,
    REF_ANNOTATION,
    STAND_IN_LABEL,
    Descriptor,
    ImageConfig,
    Index,
    Manifest,
    Platform,
    check_digest,
    host_platform,
    image_manifest,
    is_digest,
    parse_config,
    parse_manifest,
    select_platform,
)
from deepgym.images.unpack import remove_tree, unpack_layers

__all__ = ["ImageEntry", "ImageRoot", "ImageStore"]

_Entries = list[dict[str, Any]]  # index.json's manifests (``list`` is a method below)


_ImageEntries = list["ImageEntry"]


@dataclass(frozen=True)
class ImageRoot:
    """An image ready to run: its manifest digest, its unpacked root, its config."""

    digest: str
    rootfs: Path
    config: ImageConfig


@dataclass(frozen=True)
class ImageEntry:
    """One image in the store: its ref (None when imported without one), its manifest digest,
    its bytes on disk (blobs and unpacked root), and whether it is unpacked."""

    ref: str | None
    digest: str
    size: int
    unpacked: bool
    base: str | None = None
    """For an image built on a stand-in (``build``'s ``bases``): ``FROM -> stand-in``."""


class ImageStore:
    """Images and their unpacked roots under ``home / "images"`` (``deepgym_home()`` by
    default); ``platform`` chooses from image indexes (default: this host's)."""

    def __init__(self, home: Path | None = None, platform: Platform | None = None) -> None:
        self.path = (home if home is not None else deepgym_home()) / "images"
        self.layout_dir = self.path / "oci"
        self.blobs_dir = self.layout_dir / "blobs"
        self.roots_dir = self.path / "roots"
        self.platform = platform or host_platform()
        self.blobs = BlobStore(self.blobs_dir, f"image store {self.path}")
        self._tmp = self.path / "tmp"
        self._locks = self.path / "locks"

    # -- adding images ----------------------------------------------------------------------

    def import_layout(
        self,
        path: Path,
        ref: str | None = None,
        *,
        name: str | None = None,
        platform: Platform | None = None,
    ) -> str:
        """Import the OCI image layout at ``path`` (``name`` chooses among its images by ref
        annotation) as ``ref`` (default: its name there); returns the manifest digest."""
        if not Path(path).is_dir():
            raise ConfigError(f"image layout {path} is not a directory")
        with open_image(Path(path), name, platform or self.platform) as source:
            return self._import(source, ref)

    def import_tarball(
        self,
        path: Path,
        ref: str | None = None,
        *,
        name: str | None = None,
        platform: Platform | None = None,
    ) -> str:
        """Import a ``docker save`` tarball (``name`` chooses by repo tag or ref annotation) as
        ``ref`` (default: its first tag); returns the manifest digest."""
        if not Path(path).is_file():
            raise ConfigError(f"image tarball {path} is not a file")
        with open_image(Path(path), name, platform or self.platform) as source:
            return self._import(source, ref)

    def add_blobs_manifest(self, digest: str, ref: str | None) -> str:
        """Name ``ref`` the manifest ``digest`` whose blobs are already in ``blobs_dir`` (an
        image index is followed to this store's platform); returns the manifest digest."""
        if not is_digest(digest):
            raise ConfigError(f"manifest digest {digest!r}: not sha256: and 64 hex digits")
        with self.writing():
            desc = self.blobs.stored(digest)
            parsed = parse_manifest(self.blobs.read(desc), None, f"manifest {digest}")
            if isinstance(parsed, Index):
                entry = select_platform(parsed.manifests, self.platform, f"image index {digest}")
                where = f"manifest {entry.digest}"
                parsed = image_manifest(self.blobs.read(entry), entry.media_type, where)
            parse_config(self.blobs.read(parsed.config), f"config {parsed.config.digest}")
            for layer in parsed.layers:
                if not self.blobs.has(layer):
                    raise ImageError(f"manifest {parsed.digest}: layer {layer.digest} is missing")
            self._set_ref(ref, parsed.descriptor())
            return parsed.digest

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold this while writing blobs into ``blobs_dir`` from outside: ``prune`` waits."""
        self._ensure()
        with self._lock("store", exclusive=False):
            yield

    def _import(self, source: ImageSource, ref: str | None) -> str:
        manifest = source.manifest
        with self.writing():
            for layer in manifest.layers:
                self.blobs.write(layer, source.open_blob(layer))
            self.blobs.write(manifest.config, io.BytesIO(source.config_raw))
            self.blobs.write(manifest.descriptor(), io.BytesIO(manifest.raw))
            self._set_ref(ref if ref is not None else source.name, manifest.descriptor())
        return manifest.digest

    # -- using images -----------------------------------------------------------------------

    def resolve(self, ref_or_digest: str) -> ImageRoot:
        """The image's unpacked root and config, unpacking it on first use."""
        digest = self._lookup(ref_or_digest)
        with self.writing():
            manifest = self._manifest(digest)
            config = parse_config(
                self.blobs.read(manifest.config), f"config {manifest.config.digest}"
            )
            root = self.roots_dir / digest[7:]
            if not root.is_dir():
                with self._lock(f"root-{digest[7:]}", exclusive=True):
                    if not root.is_dir():
                        self._unpack(manifest, root)
        return ImageRoot(digest, root, config)

    def _unpack(self, manifest: Manifest, root: Path) -> None:
        hex_ = manifest.digest[7:]
        for stale in self._tmp.glob(f"{hex_}.*"):  # a crashed unpack's: we hold its lock
            remove_tree(stale)
        work = self._tmp / f"{hex_}.{uuid.uuid4().hex}"
        base, shared = self._shared_root(manifest)
        if base is None:
            work.mkdir(mode=0o755)
        try:
            layers = ((d.digest, self.blobs.open(d)) for d in manifest.layers[shared:])
            unpack_layers(work, layers, base)
            work.chmod(0o755)
            os.rename(work, root)
        except BaseException:
            remove_tree(work)
            raise

    def _base_of(self, digest: str) -> str | None:
        """``FROM -> stand-in`` from the image's config labels, or None."""
        try:
            manifest = self._manifest(digest)
            labels = dict(parse_config(self.blobs.read(manifest.config)).labels)
        except (ConfigError, ImageError, OSError):
            return None
        if BASE_LABEL not in labels:
            return None
        return f"{labels[BASE_LABEL]} -> {labels.get(STAND_IN_LABEL, '?')}"

    def _shared_root(self, manifest: Manifest) -> tuple[Path | None, int]:
        """The unpacked root whose image's layers are the longest proper prefix of
        ``manifest``'s, and how many layers that is (``None, 0`` without one). Images built on
        one base (the tasks of a corpus: one toolchain, each its own files) share its root's
        file data on disk (``unpack_layers``'s ``base``)."""
        want = [d.digest for d in manifest.layers]
        best: tuple[Path | None, int] = (None, 0)
        for root in self.roots_dir.iterdir() if self.roots_dir.is_dir() else ():
            try:
                have = [d.digest for d in self._manifest(f"sha256:{root.name}").layers]
            except (ConfigError, ImageError, OSError):  # its manifest went (a pruned build's)
                continue
            if best[1] < len(have) < len(want) and want[: len(have)] == have:
                best = (root, len(have))
        return best

    def list(self) -> _ImageEntries:
        """Every image in the store, in the order they were added."""
        out = []
        for entry in self._entries():
            digest = str(entry.get("digest"))
            ref = (entry.get("annotations") or {}).get(REF_ANNOTATION)
            root = self.roots_dir / digest[7:]
            size = sum(_disk(self.blobs.path(d)) for d in self._reaches(digest)) + _du(root)
            out.append(ImageEntry(ref, digest, size, root.is_dir(), self._base_of(digest)))
        return out

    def remove(self, ref_or_digest: str) -> None:
        """Drop a ref (or every entry of a digest); ``prune`` then frees what nothing reaches."""
        self._ensure()
        with self._lock("index", exclusive=True):
            entries = self._entries()
            keep = [e for e in entries if ref_or_digest not in _names(e)]
            if len(keep) == len(entries):
                raise self._unknown(ref_or_digest)
            self._write_index(keep)

    def prune(self) -> int:
        """Remove the roots and blobs no entry reaches, and leftovers of crashed writes;
        returns the bytes freed."""
        self._ensure()
        freed = 0
        with self._lock("store", exclusive=True):
            live: set[str] = set()
            manifests = {str(e.get("digest")) for e in self._entries()}
            for digest in manifests:
                live.update(self._reaches(digest))
            for root in self.roots_dir.iterdir():
                if f"sha256:{root.name}" not in manifests:
                    freed += _du(root)
                    remove_tree(root)
            for blob in (self.blobs_dir / "sha256").iterdir():
                if f"sha256:{blob.name}" not in live:
                    freed += _disk(blob)
                    blob.unlink()
            for leftover in self._tmp.iterdir():
                freed += _du(leftover)
                remove_tree(leftover)
        return freed

    def size(self) -> int:
        """Bytes the store takes on disk."""
        return _du(self.path)

    # -- the index ----------------------------------------------------------------------------

    def _entries(self) -> _Entries:
        self._ensure()
        doc = json.loads((self.layout_dir / "index.json").read_bytes())
        entries = doc.get("manifests") if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            raise ConfigError(f"{self.layout_dir / 'index.json'}: manifests must be a list")
        return [e for e in entries if isinstance(e, dict)]

    def _write_index(self, entries: _Entries) -> None:
        doc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        _write_atomic(self.layout_dir / "index.json", json.dumps(doc, indent=1).encode())

    def _set_ref(self, ref: str | None, desc: Descriptor) -> None:
        if ref is not None and (not ref or ref.startswith("sha256:")):
            raise ConfigError(f"image ref {ref!r} must be a name, not empty or a digest")
        entry = desc.to_json() | ({"annotations": {REF_ANNOTATION: ref}} if ref else {})
        with self._lock("index", exclusive=True):
            entries = self._entries()
            if ref is None:
                if any(e.get("digest") == desc.digest for e in entries):
                    return
            else:
                entries = [e for e in entries if _ref(e) != ref]
            self._write_index([*entries, entry])

    def lookup(self, ref_or_digest: str) -> str:
        """The manifest digest the store holds for a name or digest, without unpacking it;
        ``ConfigError`` (with the closest name) when it holds none."""
        return self._lookup(ref_or_digest)

    def _lookup(self, name: str) -> str:
        if name.startswith("sha256:"):
            if not is_digest(name):
                raise ConfigError(f"image digest {name!r}: not sha256: and 64 hex digits")
            if not self.blobs.path(name).is_file():
                raise ConfigError(f"no image {name} in the store {self.path}")
            return name
        for entry in reversed(self._entries()):
            if _ref(entry) == name:
                return check_digest(entry.get("digest"), f"{self.path}: index.json")
        raise self._unknown(name)

    def _unknown(self, name: str) -> ConfigError:
        known = [r for r in (_ref(e) for e in self._entries()) if r]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return ConfigError(f"unknown image {name!r} in the store {self.path}{hint}")

    def _reaches(self, digest: str) -> set[str]:
        """The blobs the manifest ``digest`` needs (itself included), as far as they can be
        read: a missing or broken manifest keeps only itself."""
        out = {digest}
        try:
            manifest = self._manifest(digest)
        except (ImageError, OSError):
            return out
        out.add(manifest.config.digest)
        out.update(layer.digest for layer in manifest.layers)
        return out

    def _manifest(self, digest: str) -> Manifest:
        desc = self.blobs.stored(digest)
        return image_manifest(self.blobs.read(desc), None, f"manifest {digest}")

    # -- the directories and locks -------------------------------------------------------------

    def _ensure(self) -> None:
        if (self.layout_dir / "index.json").is_file():
            return
        for path in (self.blobs_dir / "sha256", self.roots_dir, self._tmp, self._locks):
            path.mkdir(parents=True, exist_ok=True)
        with self._lock("index", exclusive=True):
            layout = self.layout_dir / "oci-layout"
            if not layout.is_file():
                _write_atomic(layout, b'{"imageLayoutVersion": "1.0.0"}')
            if not (self.layout_dir / "index.json").is_file():
                self._write_index([])

    @contextlib.contextmanager
    def _lock(self, name: str, *, exclusive: bool) -> Iterator[None]:
        fd = os.open(self._locks / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock


def _ref(entry: dict[str, Any]) -> str | None:
    annotations = entry.get("annotations")
    return annotations.get(REF_ANNOTATION) if isinstance(annotations, dict) else None


def _names(entry: dict[str, Any]) -> set[str]:
    return {n for n in (_ref(entry), entry.get("digest")) if isinstance(n, str)}


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _disk(path: Path) -> int:
    try:
        return path.lstat().st_blocks * 512
    except FileNotFoundError:
        return 0


def _du(path: Path) -> int:
    """Bytes on disk under ``path`` (each inode once), following no symlink."""
    if not path.exists():
        return 0
    seen: set[tuple[int, int]] = set()
    total = 0
    for top, dirs, files in os.walk(path):
        for name in (*dirs, *files, *(["."] if top == str(path) else [])):
            st = os.lstat(os.path.join(top, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total
