"""A real OCI registry on 127.0.0.1 (Debian's ``docker-registry``), a real image built from
Debian's packages (``mmdebstrap``), and a token-issuing proxy in front of the registry.

Import the fixtures by name into a test module. Each one skips, never fails, where its tool is
missing (``scripts/ensure-image-tools.sh`` installs them) or cannot run here.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"

MMDEBSTRAP = [
    "mmdebstrap",
    "--quiet",
    "--variant=extract",
    "--include=busybox-static",
    "--mode=unshare",
    "--skip=output/dev",
    "bookworm",
]
"""The smallest Debian root with a shell: one static busybox (measured: 2 s, a 2 MB tarball)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except urllib.error.HTTPError:
            return  # any HTTP answer means it listens
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@dataclass(frozen=True)
class LocalRegistry:
    host: str  # 127.0.0.1:<port>
    storage: Path  # the registry's filesystem root

    def blob_data(self, digest: str) -> Path:
        hexd = digest.split(":", 1)[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("docker-registry is absent (scripts/ensure-image-tools.sh installs it)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    with (root / "log").open("wb") as log:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=log)
    try:
        wait_for(f"http://127.0.0.1:{port}/v2/", 15.0)
        yield LocalRegistry(f"127.0.0.1:{port}", root / "data")
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def rootfs_tar() -> Path:
    """A Debian bookworm root with busybox, cached by the command under ~/.cache."""
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is absent (scripts/ensure-image-tools.sh installs it)")
    key = hashlib.sha256(json.dumps(MMDEBSTRAP).encode()).hexdigest()[:16]
    cache = Path.home() / ".cache" / "deepgym-tests"
    out = cache / f"rootfs-{key}.tar"
    if out.is_file():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".rootfs-{key}-{os.getpid()}.tar"
    try:
        done = subprocess.run(
            [*MMDEBSTRAP, str(tmp)], capture_output=True, timeout=180, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"mmdebstrap failed here: {done.stderr.decode()[-300:]}")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def put_blob(blobs: Path, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = blobs / "sha256" / digest.split(":")[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": digest, "size": len(data)}


def layer_from_rootfs(rootfs: Path) -> bytes:
    """The root as one uncompressed layer: no device nodes or fifos, ``/bin/sh`` -> busybox."""
    out = io.BytesIO()
    with tarfile.open(rootfs) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            if member.isdev():
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        link = tarfile.TarInfo("./bin/sh")
        link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
        dst.addfile(link)
    return out.getvalue()


def files_layer(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as dst:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            dst.addfile(info, io.BytesIO(data))
    return out.getvalue()


def write_image(
    layout: Path,
    layer_tar: bytes,
    *,
    arch: str = "amd64",
    cmd: tuple[str, ...] = ("/bin/sh",),
    env: tuple[str, ...] = ("PATH=/bin:/usr/bin",),
) -> dict[str, Any]:
    """A one-layer OCI image (gzip layer, config with Env/Cmd, manifest) in ``layout``'s blobs;
    the manifest's descriptor."""
    blobs = layout / "blobs"
    layout.mkdir(parents=True, exist_ok=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    gz = gzip.compress(layer_tar, compresslevel=6, mtime=0)
    layer = put_blob(blobs, gz) | {"mediaType": OCI_LAYER_GZIP}
    config = {
        "architecture": arch,
        "os": "linux",
        "config": {"Env": list(env), "Cmd": list(cmd)},
        "rootfs": {
            "type": "layers",
            "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()],
        },
    }
    config_desc = put_blob(blobs, json.dumps(config).encode()) | {"mediaType": OCI_CONFIG}
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config_desc,
        "layers": [layer],
    }
    desc = put_blob(blobs, json.dumps(manifest).encode()) | {"mediaType": OCI_MANIFEST}
    return desc | {"platform": {"os": "linux", "architecture": arch}}


def write_index(layout: Path, manifests: list[dict[str, Any]]) -> dict[str, Any]:
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    desc = put_blob(layout / "blobs", json.dumps(index).encode()) | {"mediaType": OCI_INDEX}
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [desc]}))
    return desc


class TokenProxy:
    """A registry front that challenges with Bearer, issues a token at ``/token`` (checking basic
    credentials when it has some), and forwards requests with the token to the real registry;
    or, with ``fail_first``, answers 503 that many times first."""

    TOKEN = "tok-3f9a"

    def __init__(
        self,
        upstream: str,
        *,
        realm_path: str = "/token",
        creds: str | None = None,
        require_token: bool = True,
        fail_first: int = 0,
    ) -> None:
        self.upstream, self.realm_path, self.creds = upstream, realm_path, creds
        self.require_token = require_token
        self.fail_left = fail_first  # answer 503 (Retry-After: 0) to this many requests first
        self.token_requests: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self)

            do_HEAD = do_PUT = do_POST = do_PATCH = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        if req.path.startswith("/token"):
            self.token_requests.append(req.path)
            if self.creds is not None and req.headers.get("Authorization") != f"Basic {self.creds}":
                self.reply(req, 401, b'{"errors": [{"code": "DENIED", "message": "bad creds"}]}')
                return
            self.reply(req, 200, json.dumps({"token": self.TOKEN}).encode())
            return
        if self.fail_left > 0:
            self.fail_left -= 1
            self.reply(req, 503, b"{}", {"Retry-After": "0"})
            return
        if self.require_token and req.headers.get("Authorization") != f"Bearer {self.TOKEN}":
            realm = f"http://{self.host}{self.realm_path}"
            challenge = f'Bearer realm="{realm}",service="test",scope="repository:x:pull"'
            self.reply(req, 401, b"{}", {"WWW-Authenticate": challenge})
            return
        self.forward(req)

    def forward(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(self.upstream, timeout=10)
        headers = {
            k: v for k, v in req.headers.items() if k.lower() not in {"host", "authorization"}
        }
        conn.request(req.command, req.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        skip = {"transfer-encoding", "connection", "content-length"}
        extra = {k: v for k, v in resp.getheaders() if k.lower() not in skip}
        if "Location" in extra and extra["Location"].startswith(f"http://{self.upstream}"):
            extra["Location"] = extra["Location"].replace(self.upstream, self.host, 1)
        conn.close()
        self.reply(req, resp.status, data, extra)

    @staticmethod
    def reply(
        req: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        req.send_response(status)
        for key, value in (headers or {}).items():
            req.send_header(key, value)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(body)
