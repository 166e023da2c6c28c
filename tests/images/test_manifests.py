"""The distribution API's pure decisions: manifests, platforms, challenges, backoff."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images.manifests import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    ImageManifest,
    Index,
    choose_platform,
    parse_challenge,
    parse_manifest,
    parse_platform,
)

D1, D2, D3 = ("sha256:" + c * 64 for c in "123")


def _desc(digest: str, platform: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"mediaType": OCI_MANIFEST, "digest": digest, "size": 10}
    if platform is not None:
        out["platform"] = platform
    return out


def _index(*entries: dict[str, Any]) -> Index:
    parsed = parse_manifest(json.dumps({"schemaVersion": 2, "manifests": list(entries)}).encode())
    assert isinstance(parsed, Index)
    return parsed


def test_an_image_manifest_and_an_index_are_read() -> None:
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": _desc(D1),
        "layers": [_desc(D2), _desc(D3)],
    }
    parsed = parse_manifest(json.dumps(manifest).encode())
    assert isinstance(parsed, ImageManifest)
    assert parsed.media_type == DOCKER_MANIFEST
    assert [d.digest for d in parsed.layers] == [D2, D3]
    no_type = {k: v for k, v in manifest.items() if k != "mediaType"}
    assert parse_manifest(json.dumps(no_type).encode(), DOCKER_MANIFEST).media_type == (
        DOCKER_MANIFEST
    )
    assert parse_manifest(json.dumps(no_type).encode()).media_type == OCI_MANIFEST
    listed = {"schemaVersion": 2, "manifests": [_desc(D1, {"os": "linux", "architecture": "arm"})]}
    index = parse_manifest(json.dumps(listed).encode(), f"{DOCKER_LIST}; charset=utf-8")
    assert isinstance(index, Index)
    assert index.media_type == DOCKER_LIST
    assert index.manifests[0].platform == "linux/arm"


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"schemaVersion": 1, "fsLayers": []}', "schemaVersion 1 unsupported"),
        (b'{"schemaVersion": 2}', "media type '' unsupported"),
        (
            json.dumps(
                {"schemaVersion": 2, "config": _desc("sha256:../../x"), "layers": []}
            ).encode(),
            "manifest config: digest 'sha256:../../x'",
        ),
        (
            json.dumps(
                {"schemaVersion": 2, "config": _desc(D1), "layers": [{"digest": D2, "size": 1}]}
            ).encode(),
            "layer 0: field 'mediaType'",
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
        (json.dumps({"schemaVersion": 2, "manifests": {}}).encode(), "index: field 'manifests'"),
    ],
)
def test_a_broken_manifest_is_an_image_error(doc: bytes, fragment: str) -> None:
    with pytest.raises(ImageError) as info:
        parse_manifest(doc)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_the_platform_is_chosen_from_an_index() -> None:
    index = _index(
        _desc(D1, {"os": "linux", "architecture": "amd64"}),
        _desc(D2, {"os": "linux", "architecture": "arm64", "variant": "v8"}),
        _desc(D3, {"os": "linux", "architecture": "arm", "variant": "v7"}),
        _desc(D3, {"os": "unknown", "architecture": "unknown"}),  # an attestation entry
        _desc(D3),
    )
    assert choose_platform(index, "linux/amd64").digest == D1
    assert choose_platform(index, "linux/x86_64").digest == D1
    assert choose_platform(index, "linux/arm64").digest == D2
    assert choose_platform(index, "linux/aarch64/v8").digest == D2
    assert choose_platform(index, "linux/arm/v7").digest == D3
    with pytest.raises(ImageError, match=r"'linux/arm/v6'.*linux/amd64, linux/arm/v7"):
        choose_platform(index, "linux/arm/v6")
    bare_arm = _index(_desc(D2, {"os": "linux", "architecture": "arm64"}))
    assert choose_platform(bare_arm, "linux/arm64/v8").digest == D2  # arm64 means v8
    with pytest.raises(ImageError, match="it has none"):
        choose_platform(_index(), "linux/amd64")


@pytest.mark.parametrize("bad", ["linux", "linux/", "Linux/amd64", "linux/amd64/v8/x", ""])
def test_a_bad_platform_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="platform"):
        parse_platform(bad)


def test_challenges_are_parsed() -> None:
    bearer = parse_challenge(
        'Bearer realm="https://auth.example/token",service="registry.example",'
        'scope="repository:a/b:pull,push"'
    )
    assert bearer is not None
    assert bearer.scheme == "bearer"
    assert bearer.params == {
        "realm": "https://auth.example/token",
        "service": "registry.example",
        "scope": "repository:a/b:pull,push",
    }
    basic = parse_challenge('Basic realm="basic-realm"')
    assert basic is not None
    assert (basic.scheme, basic.params) == ("basic", {"realm": "basic-realm"})
    bare = parse_challenge('bearer realm=http://x/t, error="insufficient_scope"')
    assert bare is not None
    assert bare.params == {"realm": "http://x/t", "error": "insufficient_scope"}
    escaped = parse_challenge(r'Bearer realm="a\"b"')
    assert escaped is not None
    assert escaped.params["realm"] == 'a"b'
    assert parse_challenge("") is None
    assert parse_challenge('realm="x"') is None


@given(st.text(max_size=200))
def test_challenge_parsing_is_total(header: str) -> None:
    parsed = parse_challenge(header)
    assert parsed is None or parsed.scheme == parsed.scheme.lower()


def test_a_descriptor_as_json() -> None:
    assert Descriptor(OCI_INDEX, D1, 3).to_json() == {
        "mediaType": OCI_INDEX,
        "digest": D1,
        "size": 3,
    }
