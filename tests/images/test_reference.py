"""Image references: Docker's defaults, a configurable default registry, one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError
from deepgym.images.reference import (
    REGISTRY_ENV,
    Reference,
    default_registry,
    parse_reference,
)

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(autouse=True)
def _no_registry_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REGISTRY_ENV, raising=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("debian:bookworm", Reference("docker.io", "library/debian", "bookworm")),
        ("debian", Reference("docker.io", "library/debian", "latest")),
        ("library/debian", Reference("docker.io", "library/debian", "latest")),
        ("team/img", Reference("docker.io", "team/img", "latest")),
        ("index.docker.io/debian", Reference("docker.io", "library/debian", "latest")),
        ("127.0.0.1:5000/team/img:tag", Reference("127.0.0.1:5000", "team/img", "tag")),
        ("localhost/img", Reference("localhost", "img", "latest")),
        ("Host/img", Reference("Host", "img", "latest")),
        ("[::1]:5000/a/b:c", Reference("[::1]:5000", "a/b", "c")),
        (f"img@{DIGEST}", Reference("docker.io", "library/img", None, DIGEST)),
        (f"ghcr.io/o/img:v1.2@{DIGEST}", Reference("ghcr.io", "o/img", "v1.2", DIGEST)),
        ("localhost:5000", Reference("docker.io", "library/localhost", "5000")),
        ("a.b/c__d/e-f.g_h:T_1", Reference("a.b", "c__d/e-f.g_h", "T_1")),
    ],
)
def test_docker_defaults(text: str, expected: Reference) -> None:
    assert parse_reference(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        (" debian", "padded"),
        ("Debian", "lower-case"),
        ("team/Img", "lower-case"),
        ("img:", "bad tag"),
        ("img:-x", "bad tag"),
        ("img@sha256:abc", "bad digest"),
        ("img@sha512:" + "a" * 128, "'sha512' unsupported"),
        (f"img@{DIGEST.upper()}", "unsupported"),
        ("a//b", "bad path component"),
        ("img/", "bad path component"),
        ("bad_host.io/img", "bad registry host"),
        ("host.io:99999999/img", "bad registry host"),
        ("x/" + "a" * 300, "longer than 255"),
        ("a@b@c", "unsupported"),
    ],
)
def test_bad_references_are_one_line_config_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_reference(text)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert repr(text) in message


def test_the_default_registry_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse_reference("team/img").registry == "docker.io"
    monkeypatch.setenv(REGISTRY_ENV, "127.0.0.1:5000")
    ref = parse_reference("debian:bookworm")
    assert ref == Reference("127.0.0.1:5000", "debian", "bookworm")  # no library/ off Docker Hub
    assert ref.is_loopback
    other = parse_reference("debian", default_registry="mirror.example:443")
    assert other == Reference("mirror.example:443", "debian", "latest")
    assert parse_reference("quay.io/x/y").registry == "quay.io"  # a named host beats the default
    assert default_registry("index.docker.io") == "docker.io"


@pytest.mark.parametrize("value", ["http://127.0.0.1:5000", "bad host", "x/y"])
def test_a_bad_default_registry_is_named(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(REGISTRY_ENV, value)
    with pytest.raises(ConfigError, match=REGISTRY_ENV):
        parse_reference("img")
    with pytest.raises(ConfigError, match="default_registry"):
        parse_reference("img", default_registry=value)


def test_reference_properties() -> None:
    hub = parse_reference("debian")
    assert hub.api_host == "registry-1.docker.io"
    assert hub.target == "latest"
    assert not hub.is_loopback
    pinned = parse_reference(f"localhost:5000/img:t@{DIGEST}")
    assert pinned.target == DIGEST
    assert pinned.api_host == "localhost:5000"
    assert pinned.is_loopback
    assert parse_reference("127.0.0.2/img").is_loopback
    assert parse_reference("[::1]/img").is_loopback
    assert not parse_reference("127.example/img").is_loopback


_component = st.from_regex(r"[a-z0-9]{1,6}(?:[._-][a-z0-9]{1,4}){0,2}", fullmatch=True)
_tags = st.none() | st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
_digests = st.none() | st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex())
_hosts = st.sampled_from(["docker.io", "ghcr.io", "127.0.0.1:5000", "localhost", "[::1]:443"])


@given(_hosts, st.lists(_component, min_size=1, max_size=4), _tags, _digests)
def test_str_round_trips(host: str, path: list[str], tag: str | None, digest: str | None) -> None:
    ref = Reference(host, "/".join(path), tag, digest)
    parsed = parse_reference(str(ref))
    repository = ref.repository
    if host == "docker.io" and len(path) == 1:
        repository = f"library/{repository}"
    default_tag = "latest" if tag is None and digest is None else tag
    assert parsed == Reference(host, repository, default_tag, digest)
    assert parse_reference(str(parsed)) == parsed


@given(st.text(max_size=80))
def test_parsing_is_total(text: str) -> None:
    try:
        ref = parse_reference(text, default_registry="docker.io")
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert ref.tag is not None or ref.digest is not None
        assert parse_reference(str(ref)) == ref
