"""Pull and push images over the OCI distribution API (standard library HTTP, no daemon): the
client of a registry (``deepgym.envs.registry`` is another thing: the environments' registry).

``pull(ref, blobs_dir)`` fetches an image's manifest (choosing the platform's entry of an index or
manifest list), config and layers into ``<blobs_dir>/sha256/<hex>`` and returns what it pulled; the
image store records the reference. ``push(source, ref, digest)`` uploads an OCI layout's image.

Failure rules and guarantees:

- **Nothing unverified is stored.** Each blob and manifest streams into a temporary file beside
  its final place while its sha256 is computed, and is renamed into place only when digest and
  size match its descriptor (``blobs.BlobStore.write``); a mismatch raises ``ImageError`` naming
  the digest and leaves nothing. A registry cannot send more than the descriptor's size, nor a
  digest that is not a plain file name (``oci.parse_manifest`` checks them). A manifest that
  breaks the format is ``ImageError`` too, as from any other source (``oci``).
- **Present blobs are not fetched again** (a file of the right size under its digest: the store
  writes only verified files).
- **Auth**: a 401 with a ``Bearer`` challenge fetches a token from the challenge's realm
  (anonymous, or with basic credentials from ``$DEEPGYM_REGISTRY_USER`` and
  ``$DEEPGYM_REGISTRY_PASSWORD``) and retries once; a ``Basic`` challenge sends those credentials.
  Credentials never travel over plain http to another host, and never follow a redirect to one.
- **Time is bounded**: every socket operation has ``timeout`` seconds; 408, 429, 5xx and
  connection errors are retried ``retries`` times with a bounded backoff
  (``deepgym.retry``), then raise ``RegistryError`` (a ``TransportError``: a registry that
  is down is infrastructure, never the answer's fault).
- **Plain http** only when asked (``insecure=True``) or for a registry on this host.

Foreign errors (``urllib``, ``http.client``, ``OSError``) are translated once, in ``_Session``
(and, mid-transfer, in ``_Body``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from deepgym.exceptions import ConfigError, ImageError, RegistryError
from deepgym.images.blobs import CHUNK, BlobStore
from deepgym.images.oci import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    MAX_JSON_BYTES,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    Index,
    Manifest,
    Platform,
    VerifiedReader,
    is_digest,
    parse_manifest,
    select_platform,
)
from deepgym.images.reference import Reference, parse_reference
from deepgym.retry import RetryPolicy, retry_delay, retryable_status
from deepgym.validation import bounded_int, optional_seconds

__all__ = [
    "ACCEPT",
    "PASSWORD_ENV",
    "USER_ENV",
    "Challenge",
    "Pulled",
    "parse_challenge",
    "pull",
    "push",
]

USER_ENV = "DEEPGYM_REGISTRY_USER"
PASSWORD_ENV = "DEEPGYM_REGISTRY_PASSWORD"
ACCEPT = ", ".join([OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST])
"""The ``Accept`` header of a manifest request: both formats, lists and single images."""
_MAX_REDIRECTS = 5
REGISTRY_RETRY = RetryPolicy(base_s=0.25, max_s=8.0)
"""The backoff between a registry's tries (how many: ``retries``): 0.25 s doubling, 8 s at most."""
_REDIRECTS = frozenset({301, 302, 303, 307, 308})

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Pulled:
    """What ``pull`` stored: the image manifest's descriptor (``digest``, ``media_type``,
    ``size``; the platform's entry when the reference named an index), its config and layers,
    the index's digest when there was one, and the blob bytes this pull downloaded."""

    reference: Reference
    digest: str
    media_type: str
    size: int
    config_digest: str
    layer_digests: tuple[str, ...]
    index_digest: str | None = None
    fetched_bytes: int = 0

    def descriptor(self) -> Descriptor:
        """The image manifest's descriptor, for the store's index."""
        return Descriptor(self.media_type, self.digest, self.size)


@dataclass(frozen=True)
class Challenge:
    """A ``WWW-Authenticate`` challenge: ``scheme`` lower-cased (``bearer``, ``basic``) and its
    parameters (``realm``, ``service``, ``scope``)."""

    scheme: str
    params: dict[str, str]


_PARAM = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*,?')


def parse_challenge(header: str) -> Challenge | None:
    """``Bearer realm="...",service="...",scope="..."`` -> ``Challenge``; None when unreadable.
    Pure and total."""
    scheme, _, rest = header.strip().partition(" ")
    if not scheme or "=" in scheme:
        return None
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        match = _PARAM.match(rest, pos)
        if match is None or match.end() == pos:
            break
        quoted, bare = match.group(2), match.group(3)
        params[match.group(1).lower()] = (
            re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare or ""
        )
        pos = match.end()
    return Challenge(scheme.lower(), params)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are followed by ``_Session``, which drops credentials on a change of host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _credentials() -> tuple[str, str] | None:
    user = os.environ.get(USER_ENV)
    if not user:
        return None
    return user, os.environ.get(PASSWORD_ENV, "")


def _basic(creds: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()


def _host_is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).netloc.rsplit("@", 1)[-1]
    return Reference(host or "x", "x").is_loopback


class _Session:
    """One registry's HTTP: retries, auth and redirects; every foreign error translated here."""

    def __init__(
        self, ref: Reference, *, insecure: bool | None, timeout: float | None, retries: int
    ) -> None:
        timeout = optional_seconds(timeout, "timeout")
        retries = bounded_int(retries, "retries", 0, 100)
        plain = ref.is_loopback if insecure is None else insecure
        self.ref = ref
        self.base = f"{'http' if plain else 'https'}://{ref.api_host}/v2/"
        self.timeout, self.retries = timeout, retries
        self.authorization: str | None = None
        self.creds = _credentials()
        self.opener = urllib.request.build_opener(_NoRedirect)

    def url(self, kind: str, target: str) -> str:
        """``/v2/<repository>/<kind>/<target>`` on this registry."""
        return f"{self.base}{self.ref.repository}/{kind}/{target}"

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | Path | None = None,
        ok: frozenset[int] = frozenset({200}),
        retry: bool = True,
    ) -> http.client.HTTPResponse:
        """One exchange, retried, authenticated and redirected; the open response on ``ok``."""
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                resp = self._authenticated(method, url, headers or {}, body)
            except RegistryError as exc:
                if last or not exc.unreachable:
                    raise
                time.sleep(retry_delay(REGISTRY_RETRY, attempt + 1))
                continue
            if resp.status in ok:
                return resp
            detail = _error_detail(resp)
            if retryable_status(resp.status) and not last:
                time.sleep(
                    retry_delay(REGISTRY_RETRY, attempt + 1, resp.headers.get("Retry-After"))
                )
                continue
            raise RegistryError(
                f"{method} {url}: registry answered {resp.status}{detail}", status_code=resp.status
            )
        raise AssertionError("unreachable")  # the loop returns or raises

    def _authenticated(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | Path | None
    ) -> http.client.HTTPResponse:
        resp = self._send(method, url, headers, body, self.authorization)
        if resp.status != 401:
            return resp
        challenge = parse_challenge(resp.headers.get("WWW-Authenticate", ""))
        resp.close()
        self.authorization = self._answer(challenge, url)
        resp = self._send(method, url, headers, body, self.authorization)
        if resp.status == 401:
            resp.close()
            raise RegistryError(
                f"{method} {url}: registry refused the credentials it challenged for (401)",
                status_code=401,
            )
        return resp

    def _answer(self, challenge: Challenge | None, url: str) -> str:
        if challenge is None:
            raise RegistryError(f"{url}: 401 without a readable challenge", status_code=401)
        if challenge.scheme == "basic":
            if self.creds is None:
                raise RegistryError(
                    f"{url}: registry needs credentials: set {USER_ENV} and {PASSWORD_ENV}",
                    status_code=401,
                )
            self._check_plain(url)
            return _basic(self.creds)
        if challenge.scheme != "bearer" or not challenge.params.get("realm"):
            raise RegistryError(
                f"{url}: unsupported auth challenge {challenge.scheme!r}", status_code=401
            )
        return "Bearer " + self._token(challenge.params)

    def _check_plain(self, url: str) -> None:
        if url.startswith("http://") and not _host_is_loopback(url):
            raise ImageError(f"{url}: refusing to send credentials over plain http")

    def _token(self, params: Mapping[str, str]) -> str:
        realm = params["realm"]
        if not realm.startswith(("http://", "https://")):
            raise RegistryError(f"token realm {realm!r}: not an http(s) URL", status_code=401)
        query = [(k, params[k]) for k in ("service",) if params.get(k)]
        query += [("scope", s) for s in params.get("scope", "").split() if s]
        url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(query)
        auth = None
        if self.creds is not None:
            self._check_plain(realm)
            auth = _basic(self.creds)
        resp = self._send("GET", url, {}, None, auth, realm=realm)
        with resp:
            if resp.status != 200:
                raise RegistryError(
                    f"token realm {realm}: answered {resp.status}{_error_detail(resp)}",
                    status_code=resp.status,
                )
            try:
                reply = json.loads(resp.read(MAX_JSON_BYTES))
            except (ValueError, OSError, http.client.HTTPException) as exc:
                raise RegistryError(f"token realm {realm}: unreadable reply ({exc})") from exc
        token = reply.get("token") or reply.get("access_token") if isinstance(reply, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"token realm {realm}: reply without a token", status_code=401)
        return token

    def _send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | Path | None,
        authorization: str | None,
        realm: str | None = None,
    ) -> http.client.HTTPResponse:
        # credentials go to the registry's host (or the token realm's), never to a redirect's
        origin = urllib.parse.urlsplit(self.base if realm is None else realm).netloc
        for _ in range(_MAX_REDIRECTS + 1):
            all_headers = dict(headers)
            if authorization and urllib.parse.urlsplit(url).netloc == origin:
                all_headers["Authorization"] = authorization
            resp = self._once(method, url, all_headers, body)
            location = resp.headers.get("Location")
            if resp.status not in _REDIRECTS or not location:
                return resp
            resp.close()
            url = urllib.parse.urljoin(url, location)
            if not url.startswith(("http://", "https://")):
                raise RegistryError(f"{method}: redirect to a non-http URL {url!r}")
        raise RegistryError(f"{method} {url}: more than {_MAX_REDIRECTS} redirects")

    def _once(
        self, method: str, url: str, headers: dict[str, str], body: bytes | Path | None
    ) -> http.client.HTTPResponse:
        data: bytes | IO[bytes] | None = body if not isinstance(body, Path) else None
        if isinstance(body, Path):
            headers["Content-Length"] = str(body.stat().st_size)
        req = urllib.request.Request(url, method=method, headers=headers)
        try:
            with contextlib.ExitStack() as stack:
                if isinstance(body, Path):
                    data = stack.enter_context(body.open("rb"))
                resp: http.client.HTTPResponse = self.opener.open(
                    req, data=data, timeout=self.timeout
                )
                return resp
        except urllib.error.HTTPError as exc:
            return exc  # type: ignore[return-value]  # an HTTPError is also the response
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(
                f"{method} {url}: registry unreachable ({reason})", unreachable=True
            ) from exc


def _error_detail(resp: Any) -> str:
    """The registry's first error code and message, when its body says (``{"errors": [...]}``)."""
    try:
        body = json.loads(resp.read(65536) or b"{}")
        first = body["errors"][0]
        return f" ({first.get('code', '')}: {first.get('message', '')})"
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, OSError):
        return ""
    finally:
        with contextlib.suppress(Exception):
            resp.close()


class _Body:
    """A response's body as a stream; a connection lost mid-transfer is ``RegistryError``."""

    def __init__(self, resp: http.client.HTTPResponse, what: str) -> None:
        self._resp, self._what = resp, what

    def read(self, n: int = -1) -> bytes:
        try:
            return self._resp.read(n)
        except (OSError, http.client.HTTPException) as exc:
            raise RegistryError(f"{self._what}: connection lost mid-transfer ({exc})") from exc

    def close(self) -> None:
        self._resp.close()


def _as_reference(ref: Reference | str) -> Reference:
    return ref if isinstance(ref, Reference) else parse_reference(ref)


class _Puller:
    """One pull: manifests first (verified, stored), then the missing blobs, with progress."""

    def __init__(self, session: _Session, blobs_dir: Path, progress: Progress | None) -> None:
        self.session, self.progress = session, progress
        self.blobs = BlobStore(Path(blobs_dir))
        self.where = f"registry {session.ref.registry}"
        self.done = self.total = 0

    def manifest(self, target: str, expected: Descriptor | None) -> Manifest | Index:
        """Fetch (or read, when stored) the manifest ``target`` names, verify and store it."""
        digest = expected.digest if expected else (target if is_digest(target) else None)
        stored = None
        if expected is not None:
            stored = expected if self.blobs.has(expected) else None
        elif digest is not None and self.blobs.path(digest).is_file():
            stored = self.blobs.stored(digest)
        if stored is not None:
            where = f"{self.blobs.where}: manifest {stored.digest}"
            return parse_manifest(self.blobs.read(stored), stored.media_type or None, where)
        url = self.session.url("manifests", target)
        resp = self.session.request("GET", url, headers={"Accept": ACCEPT})
        content_type = resp.headers.get("Content-Type")
        claimed = resp.headers.get("Docker-Content-Digest")
        data = _read_limited(resp, MAX_JSON_BYTES, url)
        got = f"sha256:{hashlib.sha256(data).hexdigest()}"
        if digest is None and claimed and claimed.startswith("sha256:"):
            digest = claimed
        if digest is not None and got != digest:
            raise ImageError(
                f"{self.where}: manifest {digest}: the registry sent bytes hashing to {got}; "
                "refused"
            )
        if expected is not None and len(data) != expected.size:
            raise ImageError(
                f"{self.where}: manifest {expected.digest}: {len(data)} bytes, not {expected.size}"
            )
        parsed = parse_manifest(data, content_type, f"{self.where}: manifest {got}")
        self.blobs.write_bytes(data, parsed.media_type)
        return parsed

    def fetch(self, wanted: list[Descriptor]) -> int:
        """Fetch every blob of ``wanted`` not already stored; the bytes downloaded."""
        missing = [d for d in dict.fromkeys(wanted) if not self.blobs.has(d)]
        self.total = sum(d.size for d in missing)
        self._tick(0)
        fetched = 0
        for desc in missing:
            fetched += self._blob(desc)
        return fetched

    def _blob(self, desc: Descriptor) -> int:
        url = self.session.url("blobs", desc.digest)
        attempts = self.session.retries + 1
        for attempt in range(attempts):
            start = self.done
            resp = self.session.request("GET", url)
            body = VerifiedReader(_Body(resp, url), desc, self.where)  # type: ignore[arg-type]
            try:
                return self.blobs.write(desc, body, self._tick)
            except RegistryError:  # the connection broke mid-blob: that blob again, whole
                if attempt == attempts - 1:
                    raise
                self.done = start
                time.sleep(retry_delay(REGISTRY_RETRY, attempt + 1))
        raise AssertionError("unreachable")  # the loop returns or raises

    def _tick(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)


def _read_limited(resp: http.client.HTTPResponse, limit: int, url: str) -> bytes:
    """The whole body, or ``ImageError`` as soon as it passes ``limit`` bytes."""
    body = _Body(resp, url)
    parts, total = [], 0
    try:
        while chunk := body.read(CHUNK):
            total += len(chunk)
            if total > limit:
                raise ImageError(f"{url}: manifest over the {limit} byte limit")
            parts.append(chunk)
    finally:
        body.close()
    return b"".join(parts)


def pull(
    ref: Reference | str,
    blobs_dir: Path,
    *,
    platform: str | Platform = "linux/amd64",
    insecure: bool | None = None,
    progress: Progress | None = None,
    timeout: float | None = 30.0,
    retries: int = 3,
) -> Pulled:
    """Pull ``ref`` into ``<blobs_dir>/sha256/``: manifests and blobs, each verified.

    ``platform``: the entry an image index gives (``oci.select_platform``'s rule).
    ``insecure``: plain http (default: only for a registry on this host). ``progress(done,
    total)``: blob bytes downloaded so far, of those missing. ``timeout``: seconds per socket
    operation; ``retries``: further tries after a connection error, 408, 429 or 5xx.
    """
    ref = _as_reference(ref)
    want = Platform.parse(platform) if isinstance(platform, str) else platform
    puller = _Puller(
        _Session(ref, insecure=insecure, timeout=timeout, retries=retries), blobs_dir, progress
    )
    top = puller.manifest(ref.target, None)
    index_digest = None
    if isinstance(top, Index):
        index_digest = top.digest
        entry = select_platform(top.manifests, want, f"{puller.where}: index {index_digest}")
        top = puller.manifest(entry.digest, entry)
        if isinstance(top, Index):
            raise ImageError(
                f"{puller.where}: index {index_digest}: entry {entry.digest} is another index"
            )
    fetched = puller.fetch([top.config, *top.layers])
    return Pulled(
        reference=ref,
        digest=top.digest,
        media_type=top.media_type,
        size=len(top.raw),
        config_digest=top.config.digest,
        layer_digests=tuple(d.digest for d in top.layers),
        index_digest=index_digest,
        fetched_bytes=fetched,
    )


def _blobs_of(source: Path) -> Path:
    source = Path(source)
    return source / "blobs" if (source / "oci-layout").is_file() else source


def _with_digest(location: str, digest: str) -> str:
    return location + ("&" if "?" in location else "?") + urllib.parse.urlencode({"digest": digest})


class _Pusher:
    """One push: blobs the registry lacks (monolithic or chunked), then manifests, leaves first."""

    def __init__(self, session: _Session, blobs_dir: Path, chunk_size: int | None) -> None:
        self.session, self.chunk_size = session, chunk_size
        self.blobs = BlobStore(blobs_dir)

    def blob(self, digest: str) -> None:
        """Upload one blob unless the registry has it (``HEAD`` answers 200)."""
        path = self.blobs.path(digest)
        if not path.is_file():
            raise ImageError(f"{self.blobs.where}: no blob {digest}")
        url = self.session.url("blobs", digest)
        head = self.session.request("HEAD", url, ok=frozenset({200, 404}))
        head.close()
        if head.status == 200:
            return
        start = self.session.request(
            "POST", self.session.url("blobs", "uploads/"), ok=frozenset({202}), retry=False
        )
        start.close()
        location = self._location(start, url)
        if self.chunk_size is not None:
            location = self._chunks(path, location, self.chunk_size)
            body: bytes | Path = b""
        else:
            body = path
        done = self.session.request(
            "PUT",
            _with_digest(location, digest),
            headers={"Content-Type": "application/octet-stream"},
            body=body,
            ok=frozenset({201}),
            retry=False,
        )
        done.close()

    def _location(self, resp: http.client.HTTPResponse, url: str) -> str:
        location = resp.headers.get("Location")
        if not location:
            raise RegistryError(f"{url}: upload answered without a Location")
        return urllib.parse.urljoin(self.session.base, location)

    def _chunks(self, path: Path, location: str, size: int) -> str:
        offset = 0
        with path.open("rb") as src:
            while chunk := src.read(size):
                resp = self.session.request(
                    "PATCH",
                    location,
                    headers={
                        "Content-Type": "application/octet-stream",
                        "Content-Range": f"{offset}-{offset + len(chunk) - 1}",
                    },
                    body=chunk,
                    ok=frozenset({202}),
                    retry=False,
                )
                resp.close()
                location = self._location(resp, location)
                offset += len(chunk)
        return location

    def manifest(self, digest: str, target: str) -> None:
        """Push the manifest ``digest`` (an index's entries and every blob first) as ``target``."""
        data = self.blobs.read(self.blobs.stored(digest))
        parsed = parse_manifest(data, None, f"{self.blobs.where}: manifest {digest}")
        if isinstance(parsed, Index):
            for entry in parsed.manifests:
                self.manifest(entry.digest, entry.digest)
        else:
            for desc in (parsed.config, *parsed.layers):
                self.blob(desc.digest)
        resp = self.session.request(
            "PUT",
            self.session.url("manifests", target),
            headers={"Content-Type": parsed.media_type},
            body=data,
            ok=frozenset({201}),
        )
        resp.close()


def push(
    source: Path,
    ref: Reference | str,
    manifest_digest: str,
    *,
    insecure: bool | None = None,
    chunk_size: int | None = None,
    timeout: float | None = 30.0,
    retries: int = 3,
) -> str:
    """Push the image whose manifest (or index) is ``manifest_digest`` in ``source`` (an OCI
    layout, or its ``blobs`` folder) to ``ref``, under its tag, else its digest; the digest.

    Blobs the registry has are skipped; the others are uploaded in one ``PUT``, or, with
    ``chunk_size``, in ``PATCH`` chunks of that many bytes and a closing ``PUT``.
    """
    ref = _as_reference(ref)
    if not is_digest(manifest_digest):
        raise ConfigError(
            f"manifest_digest {manifest_digest!r}: expected sha256: and 64 lower-case hex digits"
        )
    if ref.digest is not None and ref.digest != manifest_digest:
        raise ConfigError(f"push: reference {ref} names another digest than {manifest_digest}")
    if chunk_size is not None and chunk_size <= 0:
        raise ConfigError(f"chunk_size {chunk_size!r}: must be > 0 bytes or None")
    session = _Session(ref, insecure=insecure, timeout=timeout, retries=retries)
    _Pusher(session, _blobs_of(source), chunk_size).manifest(
        manifest_digest, ref.tag or manifest_digest
    )
    return manifest_digest
