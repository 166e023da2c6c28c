"""The OCI data model (``deepgym.images.oci``): manifests and indexes read, one error for a
broken one, the platform rule, digests, blobs read verified."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images.oci import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    Index,
    Manifest,
    Platform,
    VerifiedReader,
    check_digest,
    digest_of,
    image_manifest,
    is_digest,
    parse_config,
    parse_manifest,
    read_verified,
    select_platform,
)

D1, D2, D3, D4 = ("sha256:" + c * 64 for c in "1234")


def _desc(digest: str, platform: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"mediaType": OCI_MANIFEST, "digest": digest, "size": 10}
    if platform is not None:
        out["platform"] = platform
    return out


def _entries(*entries: dict[str, Any]) -> tuple[Descriptor, ...]:
    parsed = parse_manifest(json.dumps({"schemaVersion": 2, "manifests": list(entries)}).encode())
    assert isinstance(parsed, Index)
    return parsed.manifests


def _choose(entries: tuple[Descriptor, ...], platform: str) -> str:
    return select_platform(entries, Platform.parse(platform), "index").digest


def test_an_image_manifest_and_an_index_are_read() -> None:
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": _desc(D1),
        "layers": [_desc(D2), _desc(D3)],
    }
    raw = json.dumps(manifest).encode()
    parsed = parse_manifest(raw)
    assert isinstance(parsed, Manifest)
    assert parsed.media_type == DOCKER_MANIFEST
    assert [d.digest for d in parsed.layers] == [D2, D3]
    assert parsed.descriptor() == Descriptor(DOCKER_MANIFEST, digest_of(raw), len(raw))
    no_type = json.dumps({k: v for k, v in manifest.items() if k != "mediaType"}).encode()
    assert parse_manifest(no_type, DOCKER_MANIFEST).media_type == DOCKER_MANIFEST
    assert parse_manifest(no_type).media_type == OCI_MANIFEST
    listed = {"schemaVersion": 2, "manifests": [_desc(D1, {"os": "linux", "architecture": "arm"})]}
    index = parse_manifest(json.dumps(listed).encode(), f"{DOCKER_LIST}; charset=utf-8")
    assert isinstance(index, Index)
    assert index.media_type == DOCKER_LIST
    assert index.manifests[0].platform == Platform("linux", "arm")
    with pytest.raises(ImageError, match="is an image index, not a manifest"):
        image_manifest(json.dumps(listed).encode())


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"schemaVersion": 1, "fsLayers": []}', "schemaVersion 1 unsupported"),
        (b'{"schemaVersion": 2}', "media type '' unsupported"),
        (b'{"schemaVersion": 2, "mediaType": "text/plain"}', "media type 'text/plain'"),
        (
            json.dumps(
                {"schemaVersion": 2, "config": _desc("sha256:../../x"), "layers": []}
            ).encode(),
            "manifest: config: digest 'sha256:../../x'",
        ),
        (
            json.dumps(
                {"schemaVersion": 2, "config": _desc(D1), "layers": [{"digest": D2, "size": 1}]}
            ).encode(),
            "layers[0]: field 'mediaType'",
        ),
        (
            json.dumps(
                {"schemaVersion": 2, "config": _desc(D1) | {"size": -1}, "layers": []}
            ).encode(),
            "negative size",
        ),
        (
            json.dumps(
                {"schemaVersion": 2, "config": _desc(D1) | {"size": True}, "layers": []}
            ).encode(),
            "'size' missing or not an integer",
        ),
        (json.dumps({"schemaVersion": 2, "manifests": {}}).encode(), "field 'manifests'"),
        (
            json.dumps(
                {"schemaVersion": 2, "manifests": [_desc(D1) | {"annotations": "x"}]}
            ).encode(),
            "manifests[0]: annotations must be an object",
        ),
    ],
)
def test_a_broken_manifest_is_an_image_error(doc: bytes, fragment: str) -> None:
    with pytest.raises(ImageError) as info:
        parse_manifest(doc)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_the_platform_is_chosen_from_an_index() -> None:
    index = _entries(
        _desc(D1, {"os": "linux", "architecture": "amd64"}),
        _desc(D2, {"os": "linux", "architecture": "arm64", "variant": "v8"}),
        _desc(D3, {"os": "linux", "architecture": "arm", "variant": "v7"}),
        _desc(D3, {"os": "unknown", "architecture": "unknown"}),  # an attestation entry
        _desc(D4, {"os": "linux"}),  # no architecture: never chosen
        _desc(D3),
    )
    assert _choose(index, "linux/amd64") == D1
    assert _choose(index, "linux/x86_64") == D1
    assert _choose(index, "linux/arm64") == D2
    assert _choose(index, "linux/aarch64/v8") == D2
    assert _choose(index, "linux/arm/v7") == D3
    with pytest.raises(ImageError, match=r"no manifest for linux/arm/v6 \(it has: linux/amd64, "):
        _choose(index, "linux/arm/v6")
    with pytest.raises(ImageError, match=r"index: no manifest for linux/amd64 \(it has: none\)"):
        _choose(_entries(), "linux/amd64")


def test_arm64_without_a_variant_is_v8() -> None:
    """The one rule for both sources (before: a layout and a registry each had their own): an
    ``arm64`` request with no variant matches ``v8`` and an entry with no variant, not ``v9``."""
    v9 = _desc(D1, {"os": "linux", "architecture": "arm64", "variant": "v9"})
    v8 = _desc(D2, {"os": "linux", "architecture": "arm64", "variant": "v8"})
    bare = _desc(D3, {"os": "linux", "architecture": "arm64"})
    assert _choose(_entries(v9, v8), "linux/arm64") == D2
    assert _choose(_entries(v9, bare), "linux/arm64") == D3
    assert _choose(_entries(v9, bare), "linux/arm64/v8") == D3
    assert _choose(_entries(v9, bare, v8), "linux/arm64/v9") == D1
    with pytest.raises(ImageError, match=r"no manifest for linux/arm64 \(it has: linux/arm64/v9\)"):
        _choose(_entries(v9), "linux/arm64")
    assert select_platform(_entries(v9, v8), Platform("linux", "aarch64"), "i").digest == D2


def test_an_exact_variant_wins_and_an_entry_without_one_fits() -> None:
    def entry(digest: str, arch: str, variant: str | None = None) -> dict[str, Any]:
        plat = {"os": "linux", "architecture": arch} | ({"variant": variant} if variant else {})
        return _desc(digest, plat)

    index = _entries(entry(D1, "arm", "v6"), entry(D2, "arm"), entry(D3, "arm", "v7"))
    assert _choose(index, "linux/arm/v7") == D3  # exact, though later in the index
    assert _choose(index, "linux/arm/v5") == D2  # names no variant: it fits any
    assert _choose(index, "linux/arm") == D2  # no variant asked: one without first
    amd = _entries(entry(D1, "amd64", "v3"), entry(D2, "amd64"))
    assert _choose(amd, "linux/amd64") == D2
    assert _choose(_entries(entry(D1, "amd64", "v3")), "linux/amd64") == D1


@pytest.mark.parametrize("bad", ["linux", "linux/", "Linux/amd64", "linux/amd64/v8/x", ""])
def test_a_bad_platform_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="platform"):
        Platform.parse(bad)


def test_platforms_parse_and_print() -> None:
    assert Platform.parse("linux/x86_64") == Platform("linux", "amd64")
    assert str(Platform.parse("linux/arm/v7")) == "linux/arm/v7"


def test_digests() -> None:
    assert is_digest(D1) and check_digest(D1, "x") == D1
    for bad in ["sha256:../../etc/passwd", "sha256:" + "A" * 64, "md5:" + "a" * 32, "", None]:
        assert not is_digest(bad)
        with pytest.raises(ImageError, match=r"^layer: digest"):
            check_digest(bad, "layer")


def test_a_descriptor_as_json() -> None:
    assert Descriptor(OCI_INDEX, D1, 3).to_json() == {
        "mediaType": OCI_INDEX,
        "digest": D1,
        "size": 3,
    }
    named = Descriptor(OCI_INDEX, D1, 3, {"k": "v"})
    assert named.to_json()["annotations"] == {"k": "v"} and named == Descriptor(OCI_INDEX, D1, 3)


def test_blobs_are_read_verified() -> None:
    data = b"hello"
    desc = Descriptor("", digest_of(data), len(data))
    assert read_verified(io.BytesIO(data), desc, "here") == data
    with pytest.raises(ImageError, match=r"^here: blob sha256:\w+ has digest .*\(4 of 5 bytes\)"):
        read_verified(io.BytesIO(b"hell"), desc, "here")
    with pytest.raises(ImageError, match="longer than its size"):
        VerifiedReader(io.BytesIO(data + b"!"), desc, "here").read()
    with pytest.raises(ImageError, match="over 4"):
        read_verified(io.BytesIO(data), desc, "here", limit=4)


def test_a_config_is_read() -> None:
    raw = json.dumps({"config": {"Env": ["A=1"], "WorkingDir": "/app", "Cmd": ["sh"]}}).encode()
    config = parse_config(raw)
    assert (config.env, config.working_dir, config.cmd) == (("A=1",), "/app", ("sh",))
    for broken in (b"[]", b'{"config": "x"}', b'{"config": {"Env": "A=1"}}'):
        with pytest.raises(ImageError):
            parse_config(broken)
