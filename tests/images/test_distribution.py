"""Pull and push against a real registry on 127.0.0.1, with a real image built from Debian's
packages: digests verified, platforms chosen, corruption refused, token auth, a registry down."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ImageError, RegistryError, is_infrastructure_failure
from deepgym.images.blobs import BlobStore
from deepgym.images.distribution import (
    PASSWORD_ENV,
    USER_ENV,
    parse_challenge,
    pull,
    push,
)
from tests.images.registry_fixtures import (
    LocalRegistry,
    TokenProxy,
    files_layer,
    layer_from_rootfs,
    registry,
    rootfs_tar,
    write_image,
    write_index,
)

__all__ = ["registry", "rootfs_tar"]  # fixtures, imported by name


def blob_path(blobs_dir: Path, digest: str) -> Path:
    return BlobStore(blobs_dir).path(digest)


@pytest.fixture(scope="module")
def busybox(
    registry: LocalRegistry, rootfs_tar: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The Debian busybox image, pushed as ``test/busybox:bookworm``; its manifest descriptor."""
    layout = tmp_path_factory.mktemp("busybox-layout")
    desc = write_image(layout, layer_from_rootfs(rootfs_tar), cmd=("/bin/sh", "-c", "echo hi"))
    push(layout, f"{registry.host}/test/busybox:bookworm", desc["digest"])
    return desc | {"layout": layout}


def _blob_files(blobs: Path) -> dict[str, Path]:
    return {p.name: p for p in (blobs / "sha256").iterdir()}


def test_pull_stores_every_blob_verified(
    registry: LocalRegistry, busybox: dict[str, Any], tmp_path: Path
) -> None:
    seen: list[tuple[int, int]] = []
    pulled = pull(
        f"{registry.host}/test/busybox:bookworm", tmp_path, progress=lambda *a: seen.append(a)
    )
    assert pulled.digest == busybox["digest"]
    assert pulled.size == busybox["size"]
    assert pulled.media_type == "application/vnd.oci.image.manifest.v1+json"
    assert pulled.index_digest is None
    assert len(pulled.layer_digests) == 1
    files = _blob_files(tmp_path)
    wanted = {pulled.digest, pulled.config_digest, *pulled.layer_digests}
    assert set(files) == {d.split(":")[1] for d in wanted}
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == name
    layer = blob_path(tmp_path, pulled.layer_digests[0])
    assert pulled.fetched_bytes > 1_000_000  # the busybox layer
    assert seen[-1] == (pulled.fetched_bytes, pulled.fetched_bytes)
    assert (
        layer.read_bytes()
        == blob_path(busybox["layout"] / "blobs", pulled.layer_digests[0]).read_bytes()
    )
    assert pulled.descriptor().to_json() == {k: busybox[k] for k in ("mediaType", "digest", "size")}


def test_a_second_pull_downloads_nothing(
    registry: LocalRegistry, busybox: dict[str, Any], tmp_path: Path
) -> None:
    ref = f"{registry.host}/test/busybox:bookworm"
    first = pull(ref, tmp_path)
    stamps = {name: p.stat().st_mtime_ns for name, p in _blob_files(tmp_path).items()}
    again = pull(ref, tmp_path)
    assert again.fetched_bytes == 0
    assert again.digest == first.digest
    assert {name: p.stat().st_mtime_ns for name, p in _blob_files(tmp_path).items()} == stamps
    by_digest = pull(f"{registry.host}/test/busybox@{first.digest}", tmp_path)
    assert (by_digest.digest, by_digest.fetched_bytes) == (first.digest, 0)


def test_chunked_push_then_pull_by_digest(
    registry: LocalRegistry, busybox: dict[str, Any], tmp_path: Path
) -> None:
    ref = f"{registry.host}/test/chunked@{busybox['digest']}"
    assert push(busybox["layout"], ref, busybox["digest"], chunk_size=300_000) == busybox["digest"]
    pulled = pull(ref, tmp_path / "blobs")
    assert pulled.digest == busybox["digest"]
    assert pulled.reference.tag is None


def test_a_manifest_list_gives_the_platforms_image(
    registry: LocalRegistry, busybox: dict[str, Any], tmp_path: Path
) -> None:
    layout = busybox["layout"]
    arm = write_image(layout, files_layer({"arch": b"arm64\n"}), arch="arm64")
    amd = {k: v for k, v in busybox.items() if k != "layout"}
    index = write_index(layout, [amd, arm])
    ref = f"{registry.host}/test/multi:v1"
    push(layout, ref, index["digest"])
    on_arm = pull(ref, tmp_path, platform="linux/arm64/v8")
    assert (on_arm.digest, on_arm.index_digest) == (arm["digest"], index["digest"])
    on_amd = pull(ref, tmp_path, platform="linux/x86_64")
    assert on_amd.digest == busybox["digest"]
    assert blob_path(tmp_path, index["digest"]).is_file()  # the index is stored too
    with pytest.raises(ImageError, match=r"no manifest for linux/s390x .*linux/amd64, linux/arm64"):
        pull(ref, tmp_path, platform="linux/s390x")


def test_a_corrupted_blob_is_refused_and_leaves_nothing(
    registry: LocalRegistry, tmp_path: Path
) -> None:
    layout = tmp_path / "layout"
    desc = write_image(layout, files_layer({"data": bytes(range(256)) * 64}))
    ref = f"{registry.host}/test/corrupt:v1"
    push(layout, ref, desc["digest"])
    pulled_ok = pull(ref, tmp_path / "ok")
    layer = pulled_ok.layer_digests[0]
    stored = registry.blob_data(layer)
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    blobs = tmp_path / "blobs"
    with pytest.raises(ImageError, match=layer) as info:
        pull(ref, blobs)
    assert "\n" not in str(info.value)
    assert not blob_path(blobs, layer).exists()
    assert not [p for p in (blobs / "sha256").iterdir() if p.name.startswith(".")]


def test_token_auth_through_a_bearer_proxy(
    registry: LocalRegistry,
    busybox: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proxy = TokenProxy(registry.host)
    try:
        pulled = pull(f"{proxy.host}/test/busybox:bookworm", tmp_path / "anon")
        assert pulled.digest == busybox["digest"]
        assert len(proxy.token_requests) == 1  # one token, kept for the blobs
        assert "scope=repository%3Ax%3Apull" in proxy.token_requests[0]
        assert "service=test" in proxy.token_requests[0]
    finally:
        proxy.close()
    monkeypatch.setenv(USER_ENV, "alice")
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    proxy = TokenProxy(registry.host, creds="YWxpY2U6czNjcmV0")  # base64 of alice:s3cret
    try:
        assert (
            pull(f"{proxy.host}/test/busybox:bookworm", tmp_path / "creds").digest
            == busybox["digest"]
        )
        assert len(proxy.token_requests) == 1
        monkeypatch.setenv(PASSWORD_ENV, "wrong")
        with pytest.raises(RegistryError, match=r"token realm .*/token: answered 401") as info:
            pull(f"{proxy.host}/test/busybox:bookworm", tmp_path / "wrong")
        assert info.value.status_code == 401
    finally:
        proxy.close()


def test_a_wrong_token_realm_is_a_clear_error(registry: LocalRegistry, tmp_path: Path) -> None:
    proxy = TokenProxy(registry.host, realm_path="/nope")
    try:
        with pytest.raises(
            RegistryError, match=r"token realm http://127\.0\.0\.1:\d+/nope"
        ) as info:
            pull(f"{proxy.host}/test/busybox:bookworm", tmp_path)
    finally:
        proxy.close()
    assert is_infrastructure_failure(info.value)


def test_a_registry_that_is_down_fails_fast(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(RegistryError, match="unreachable") as info:
        pull(f"127.0.0.1:{port}/test/img:v1", tmp_path, retries=2)
    assert time.monotonic() - start < 3
    assert info.value.unreachable
    assert is_infrastructure_failure(info.value)


def test_a_registry_that_never_answers_times_out(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)  # connections are accepted by the kernel, never answered
        start = time.monotonic()
        with pytest.raises(RegistryError, match=r"unreachable.*timed out"):
            pull(f"127.0.0.1:{sock.getsockname()[1]}/test/img:v1", tmp_path, timeout=0.3, retries=1)
        assert time.monotonic() - start < 3
    assert not (tmp_path / "sha256").exists() or not list((tmp_path / "sha256").iterdir())


def test_a_busy_registry_is_retried_then_given_up(
    registry: LocalRegistry, busybox: dict[str, Any], tmp_path: Path
) -> None:
    proxy = TokenProxy(registry.host, require_token=False, fail_first=2)
    try:
        pulled = pull(f"{proxy.host}/test/busybox:bookworm", tmp_path / "a", retries=2)
        assert pulled.digest == busybox["digest"]
        proxy.fail_left = 100
        with pytest.raises(RegistryError, match="answered 503") as info:
            pull(f"{proxy.host}/test/busybox:bookworm", tmp_path / "b", retries=2)
        assert proxy.fail_left == 97  # three tries, no more
    finally:
        proxy.close()
    assert info.value.status_code == 503
    assert is_infrastructure_failure(info.value)


class _EndlessManifest(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk = b" " * 65536
        with contextlib.suppress(OSError):
            for _ in range(200):  # 13 MB, no Content-Length: over the 4 MiB limit
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")


def test_a_manifest_past_the_size_limit_is_refused(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessManifest)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        with pytest.raises(ImageError, match="over the 4194304 byte limit"):
            pull(f"127.0.0.1:{server.server_address[1]}/test/img:v1", tmp_path)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert not (tmp_path / "sha256").exists()


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
