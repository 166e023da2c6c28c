"""Images made in the tests: layers built with ``tarfile`` from a dict of entries, written as an
OCI image layout (optionally a two-platform index) or a legacy ``docker save`` tarball.

A layer is a dict ``path -> content``, in tar order: ``bytes``/``str`` is a regular file, an
``Entry`` anything else (a directory, a symlink, a hardlink, a device, a FIFO, a file with a
mode). ``write_oci_layout`` and ``write_docker_save`` return the manifest digest that the image
resolves to on this host's platform.
"""

from __future__ import annotations

import gzip as _gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deepgym.images.oci import host_platform

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZ = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_TYPES = {"manifest": OCI_MANIFEST, "index": OCI_INDEX, "config": OCI_CONFIG}
OCI_TYPES["layer"] = OCI_LAYER_GZ
DOCKER_TYPES = {
    "manifest": "application/vnd.docker.distribution.manifest.v2+json",
    "index": "application/vnd.docker.distribution.manifest.list.v2+json",
    "config": "application/vnd.docker.container.image.v1+json",
    "layer": "application/vnd.docker.image.rootfs.diff.tar.gzip",
}


@dataclass(frozen=True)
class Entry:
    """A tar entry other than a plain 0644 file: ``kind`` is file, dir, symlink, hardlink, chr,
    blk or fifo; ``link`` the target of a link."""

    kind: str
    data: bytes = b""
    mode: int = 0o644
    link: str = ""


_KINDS = {
    "file": tarfile.REGTYPE,
    "dir": tarfile.DIRTYPE,
    "symlink": tarfile.SYMTYPE,
    "hardlink": tarfile.LNKTYPE,
    "chr": tarfile.CHRTYPE,
    "blk": tarfile.BLKTYPE,
    "fifo": tarfile.FIFOTYPE,
}

Layer = Mapping[str, "bytes | str | Entry"]


def make_layer(entries: Layer, compress: bool = True) -> bytes:
    """A layer's blob: a tar of ``entries``, gzip-compressed unless ``compress`` is false."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, value in entries.items():
            entry = value if isinstance(value, Entry) else Entry("file", _bytes(value))
            info = tarfile.TarInfo(name)
            info.type = _KINDS[entry.kind]
            info.mode = entry.mode if entry.kind != "dir" or entry.mode != 0o644 else 0o755
            info.mtime = 1_700_000_000
            info.linkname = entry.link
            if entry.kind in ("chr", "blk"):
                info.devmajor, info.devminor = 1, 3
            info.size = len(entry.data) if entry.kind == "file" else 0
            tar.addfile(info, io.BytesIO(entry.data) if entry.kind == "file" else None)
    raw = out.getvalue()
    return _gzip.compress(raw, mtime=0) if compress else raw


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image_config(layers_raw: Sequence[bytes], **config: Any) -> bytes:
    """An image config blob; ``layers_raw`` are the uncompressed layer tars (for diff_ids)."""
    doc = {
        "architecture": host_platform().architecture,
        "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"], "WorkingDir": "/work", **config},
        "rootfs": {"type": "layers", "diff_ids": [digest_of(r) for r in layers_raw]},
    }
    return json.dumps(doc, sort_keys=True).encode()


def _descriptor(media_type: str, data: bytes, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest_of(data), "size": len(data), **extra}


class _Blobs:
    def __init__(self, root: Path) -> None:
        self.dir = root / "blobs" / "sha256"
        self.dir.mkdir(parents=True, exist_ok=True)

    def put(self, data: bytes) -> str:
        digest = digest_of(data)
        (self.dir / digest[7:]).write_bytes(data)
        return digest


def _manifest(
    blobs: _Blobs, layers: Sequence[Layer], config: Mapping[str, Any], types: Mapping[str, str]
) -> bytes:
    raw_layers = [make_layer(layer, compress=False) for layer in layers]
    gz_layers = [_gzip.compress(r, mtime=0) for r in raw_layers]
    config_raw = image_config(raw_layers, **config)
    for blob in (*gz_layers, config_raw):
        blobs.put(blob)
    manifest = {
        "schemaVersion": 2,
        "mediaType": types["manifest"],
        "config": _descriptor(types["config"], config_raw),
        "layers": [_descriptor(types["layer"], g) for g in gz_layers],
    }
    data = json.dumps(manifest).encode()
    blobs.put(data)
    return data


def write_oci_layout(
    path: Path,
    layers: Sequence[Layer],
    *,
    ref: str | None = "latest",
    other_platform: str | None = None,
    config: Mapping[str, Any] | None = None,
    docker: bool = False,
) -> str:
    """An OCI image layout at ``path`` (Docker v2 schema 2 media types when ``docker``).
    With ``other_platform`` (``linux/s390x``), ``index.json`` names an image index of two
    manifests (and an attestation): this host's, and one for the other platform whose single
    layer holds ``/platform``. Returns this host's manifest digest."""
    blobs = _Blobs(path)
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    types = DOCKER_TYPES if docker else OCI_TYPES
    host = _manifest(blobs, layers, config or {}, types)
    annotations = {"org.opencontainers.image.ref.name": ref} if ref else {}
    top = _descriptor(types["manifest"], host, annotations=annotations)
    if other_platform is not None:
        os_, arch = other_platform.split("/")[:2]
        other = _manifest(blobs, [{"platform": other_platform}], config or {}, types)
        here = host_platform()
        index = {
            "schemaVersion": 2,
            "mediaType": types["index"],
            "manifests": [
                _descriptor(types["manifest"], other, platform={"os": os_, "architecture": arch}),
                _descriptor(
                    types["manifest"],
                    host,
                    platform={"os": "linux", "architecture": here.architecture},
                ),
                _descriptor(
                    OCI_MANIFEST, b"{}", platform={"os": "unknown", "architecture": "unknown"}
                ),
            ],
        }
        index_raw = json.dumps(index).encode()
        blobs.put(index_raw)
        top = _descriptor(types["index"], index_raw, annotations=annotations)
    doc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [top]}
    (path / "index.json").write_text(json.dumps(doc))
    return digest_of(host)


def write_docker_save(
    path: Path,
    layers: Sequence[Layer],
    *,
    tag: str = "test/image:latest",
    config: Mapping[str, Any] | None = None,
) -> None:
    """A legacy ``docker save`` tarball at ``path``: ``manifest.json``, ``<hex>.json`` the config,
    ``<n>/layer.tar`` the uncompressed layers."""
    raw_layers = [make_layer(layer, compress=False) for layer in layers]
    config_raw = image_config(raw_layers, **(config or {}))
    config_name = digest_of(config_raw)[7:] + ".json"
    files = {config_name: config_raw}
    for i, raw in enumerate(raw_layers):
        files[f"{i:02d}/layer.tar"] = raw
    entry = {"Config": config_name, "RepoTags": [tag], "Layers": list(files)[1:]}
    files["manifest.json"] = json.dumps([entry]).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


TWO_LAYERS: list[dict[str, bytes | str | Entry]] = [
    {
        "etc/": Entry("dir"),
        "etc/motd": "hello\n",
        "etc/gone": "removed by the second layer\n",
        "opt/": Entry("dir"),
        "opt/old/a": "lower\n",
        "opt/old/sub/b": "lower\n",
        "usr/bin/tool": Entry("file", b"#!/bin/sh\n", mode=0o4755),
    },
    {
        "etc/.wh.gone": "",
        "opt/old/.wh..wh..opq": "",
        "opt/old/new": "upper\n",
        "etc/motd": "hello again\n",
    },
]
"""An image whose second layer removes a file and makes a directory opaque."""


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the root that no layer may touch (its listing is checked after)."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep").write_text("untouched\n")
    return path
