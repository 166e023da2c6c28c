"""Blobs by digest in a folder (``<root>/sha256/<hex>``): where a blob lives, and how one is
written so that nothing unverified is ever under its name. A pull (``distribution``), a build
(``build``) and the image store (``store``) all keep their blobs through ``BlobStore``.

Invariants:

- ``blob_name`` is the one place a digest becomes a path, and it checks the digest first
  (``oci.check_digest``): no digest names a file outside ``sha256/``.
- A blob's file holds exactly the bytes of its digest. ``write`` streams into a temporary file
  beside its place (``.partial-*``), checked as it goes (``oci.VerifiedReader``: size and
  sha256), and renames it into place only when whole and right; otherwise ``ImageError`` and
  nothing is left. ``adopt`` takes a file whose writer computed its digest from the very bytes
  it wrote (a build's layer), checking its size.
- ``has`` is a file of the descriptor's size under its digest: only checked files are ever
  renamed there, so the size is enough to skip a blob already present.
- Reads are checked too: ``open`` streams through a ``VerifiedReader``, ``read`` takes a small
  blob whole. A blob that is missing is ``ImageError`` (an image that needs it is broken here).

Locking is the caller's: the image store holds ``ImageStore.writing`` around every writer, so its
``prune`` never removes a blob about to be named.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from deepgym.exceptions import ImageError
from deepgym.images.oci import (
    MAX_JSON_BYTES,
    Descriptor,
    VerifiedReader,
    check_digest,
    digest_of,
    read_verified,
)

__all__ = ["CHUNK", "BlobStore", "blob_name"]

CHUNK = 1 << 20
"""Bytes copied at a time."""


def blob_name(digest: str) -> str:
    """``sha256/<hex>``: a blob's path under a blob folder, for a checked digest."""
    return "sha256/" + check_digest(digest, "blob")[7:]


class BlobStore:
    """The blobs under ``root`` (an OCI layout's ``blobs`` folder), written and read checked;
    ``where`` names them in errors."""

    def __init__(self, root: Path, where: str | None = None) -> None:
        self.root = Path(root)
        self.where = where or f"blobs {self.root}"

    def path(self, digest: str) -> Path:
        """Where the blob ``digest`` is (or would be)."""
        return self.root / blob_name(digest)

    def has(self, desc: Descriptor) -> bool:
        """Whether the blob ``desc`` names is here, whole."""
        try:
            return self.path(desc.digest).stat().st_size == desc.size
        except OSError:
            return False

    def stored(self, digest: str) -> Descriptor:
        """The descriptor of a blob that is here (its size from the disk), type unknown."""
        try:
            size = self.path(digest).stat().st_size
        except FileNotFoundError:
            raise ImageError(f"{self.where}: no blob {digest}") from None
        return Descriptor("", digest, size)

    # -- writing ----------------------------------------------------------------------------

    def write(
        self,
        desc: Descriptor,
        source: IO[bytes] | VerifiedReader,
        seen: Callable[[int], None] | None = None,
    ) -> int:
        """Copy ``source`` (checked against ``desc`` as it is read) into place, unless the blob
        is here already; the bytes copied. ``seen(n)`` is told of each chunk."""
        reader = source if isinstance(source, VerifiedReader) else None
        if reader is None or reader.desc != desc:
            reader = VerifiedReader(source, desc, self.where)  # type: ignore[arg-type]
        with reader:
            if self.has(desc):
                return 0
            final = self.path(desc.digest)
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".partial-", dir=final.parent)
            written = 0
            try:
                with os.fdopen(fd, "wb") as out:
                    while chunk := reader.read(CHUNK):
                        out.write(chunk)
                        written += len(chunk)
                        if seen is not None:
                            seen(len(chunk))
                os.chmod(tmp, 0o644)
                os.replace(tmp, final)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return written

    def write_bytes(self, data: bytes, media_type: str = "") -> Descriptor:
        """Keep ``data`` as a blob; its descriptor."""
        desc = Descriptor(media_type, digest_of(data), len(data))
        self.write(desc, io.BytesIO(data))
        return desc

    def write_json(self, obj: object, media_type: str = "") -> Descriptor:
        """Keep ``obj`` as canonical JSON (sorted keys, no spaces: the same object, the same
        digest); its descriptor."""
        data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
        return self.write_bytes(data, media_type)

    def adopt(self, path: Path, desc: Descriptor) -> None:
        """Move the file ``path`` into place as the blob ``desc`` (its writer computed
        ``desc.digest`` from the bytes it wrote); drop it when the blob is here already."""
        if path.stat().st_size != desc.size:
            raise ImageError(f"{self.where}: {path} is not {desc.size} bytes: refused")
        final = self.path(desc.digest)
        if self.has(desc):
            path.unlink()
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o644)
        os.replace(path, final)

    # -- reading ----------------------------------------------------------------------------

    def open(self, desc: Descriptor) -> VerifiedReader:
        """A stream of the blob ``desc``, checked as it is read."""
        try:
            handle = self.path(desc.digest).open("rb")
        except FileNotFoundError:
            raise ImageError(f"{self.where}: no blob {desc.digest}") from None
        return VerifiedReader(handle, desc, self.where)

    def read(self, desc: Descriptor, limit: int = MAX_JSON_BYTES) -> bytes:
        """A small blob whole, checked (``limit`` bytes at most)."""
        try:
            handle = self.path(desc.digest).open("rb")
        except FileNotFoundError:
            raise ImageError(f"{self.where}: no blob {desc.digest}") from None
        return read_verified(handle, desc, self.where, limit)
