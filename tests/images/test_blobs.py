"""The blob store (``deepgym.images.blobs``): one path per digest, nothing unverified kept."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from deepgym.exceptions import ImageError
from deepgym.images.blobs import BlobStore, blob_name
from deepgym.images.oci import Descriptor, digest_of


def test_a_digest_is_checked_before_it_becomes_a_path(tmp_path: Path) -> None:
    data = b"x"
    assert blob_name(digest_of(data)) == f"sha256/{digest_of(data)[7:]}"
    for bad in ("sha256:../../etc/passwd", "sha256:" + "A" * 64, "../x"):
        with pytest.raises(ImageError, match="is not sha256:"):
            BlobStore(tmp_path).path(bad)


def test_write_keeps_only_the_bytes_of_the_digest(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    data = b"hello, blob"
    desc = Descriptor("", digest_of(data), len(data))
    seen: list[int] = []
    assert blobs.write(desc, io.BytesIO(data), seen.append) == len(data)
    assert blobs.path(desc.digest).read_bytes() == data and sum(seen) == len(data)
    assert blobs.has(desc) and blobs.stored(desc.digest) == Descriptor("", desc.digest, len(data))
    assert blobs.write(desc, io.BytesIO(data)) == 0  # there already: nothing read
    other = b"hello, blub"
    wrong = Descriptor("", digest_of(other), len(other))
    with pytest.raises(ImageError, match=r"has digest .* \(11 of 11 bytes\): refused"):
        blobs.write(wrong, io.BytesIO(data))
    with pytest.raises(ImageError, match="longer than its size"):
        blobs.write(Descriptor("", wrong.digest, 3), io.BytesIO(other))
    assert sorted(p.name for p in (tmp_path / "sha256").iterdir()) == [desc.hex]


def test_json_is_canonical_and_reads_are_checked(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path, "here")
    desc = blobs.write_json({"b": 1, "a": [2]}, "application/json")
    assert blobs.read(desc) == b'{"a":[2],"b":1}'
    assert blobs.write_json({"a": [2], "b": 1}).digest == desc.digest
    blobs.path(desc.digest).write_bytes(b'{"a":[3],"b":1}')  # the same size, other bytes
    with pytest.raises(ImageError, match=r"^here: blob .* has digest"):
        blobs.read(desc)
    with pytest.raises(ImageError, match=r"^here: blob .* has digest"):
        blobs.open(desc).read()
    missing = digest_of(b"none")
    with pytest.raises(ImageError, match=f"^here: no blob {missing}"):
        blobs.stored(missing)


def test_adopt_moves_a_file_in_and_checks_its_size(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path / "blobs")
    layer = tmp_path / "layer"
    layer.write_bytes(b"layer bytes")
    desc = Descriptor("", digest_of(b"layer bytes"), 11)
    with pytest.raises(ImageError, match="is not 12 bytes"):
        blobs.adopt(layer, Descriptor("", desc.digest, 12))
    blobs.adopt(layer, desc)
    assert not layer.exists() and blobs.has(desc)
    layer.write_bytes(b"layer bytes")
    blobs.adopt(layer, desc)  # there already: the copy is dropped
    assert not layer.exists()
