"""Build an image from a Dockerfile without a daemon: ``deepgym image build``.

``build(dockerfile)`` reads the Dockerfile (``deepgym.images.recipe``: the subset, and the line
that leaves it), finds its base, then runs each step in a private copy of the image's root and
keeps what the step changed as a layer (``deepgym.images.diff``). The image (the base's layers,
then the new ones, and a config) goes into the store (``deepgym.images.store``) under its name.

- **The base**: an image in the store, else pulled from its registry, else, for ``debian:SUITE``
  (``debian:bookworm``, ``debian:12``, ``debian:stable-slim``), built from Debian's packages with
  ``mmdebstrap --variant=minbase``, which needs only a Debian mirror.
- **A stand-in**: a ``FROM`` image this host cannot pull may be mapped to one in the store
  that stands for it (``bases``: ``buildpack-deps:jammy`` -> an image built from
  ``debian:bookworm`` with the same packages); the built image's config labels name both.
- **RUN** runs in bwrap on the copy, as uid 0 of a user namespace that maps many ids
  (``deepgym.images.mapped``: ``apt-get`` may ``chown`` to a package's own user), in a network
  namespace of its own (``deepgym.images.network``: ``outbound``, through slirp4netns, reaches
  other machines and never the host's loopback; ``none`` has no way out; nothing run from the
  image later has a network), a fresh ``/proc``, ``/dev`` and ``/tmp``, no other host path, and
  ``step_timeout`` seconds. A ``USER`` other than root runs the step as that user of the image.
  A step that exits non-zero stops the build with ``ConfigError`` (its line, the exit and the
  end of its output): the Dockerfile's fault, not the host's.
- **Cache**: each step's key is a hash of the previous key, the step, and for a copy the bytes it
  copies; a step whose key has a layer in the store is not run again, and a build whose every
  step is cached copies no root at all. The config records no build time, so a build whose
  every step is cached is the same image, digest and all.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError, ImageError
from deepgym.images import diff, mapped
from deepgym.images.blobs import BlobStore
from deepgym.images.dockerfile import parse as parse_dockerfile
from deepgym.images.network import DNS, network_mode, outbound
from deepgym.images.oci import (
    BASE_LABEL,
    OCI_CONFIG,
    OCI_LAYER_GZIP,
    OCI_MANIFEST,
    STAND_IN_LABEL,
    Descriptor,
    image_manifest,
    parse_json,
)
from deepgym.images.overlay import apply_upper
from deepgym.images.recipe import CopyStep, MkdirStep, Recipe, RunStep, Step, recipe
from deepgym.images.reference import DEFAULT_REGISTRY, parse_reference
from deepgym.images.store import ImageStore
from deepgym.images.unpack import remove_tree
from deepgym.text import clip
from deepgym.validation import optional_seconds

__all__ = [
    "BASE_LABEL",
    "STAND_IN_LABEL",
    "BuildResult",
    "StepResult",
    "build",
    "debian_suite",
    "parse_bases",
    "stand_in",
]

_NUMBERED = {"10": "buster", "11": "bullseye", "12": "bookworm", "13": "trixie", "14": "forky"}
_TAIL = 2000


@dataclass(frozen=True)
class StepResult:
    """One step of a build: its line, what it was, whether the cache had it, its layer."""

    line: int
    what: str
    cached: bool
    seconds: float
    layer: str
    layer_size: int


@dataclass
class BuildResult:
    """A built image: its name and manifest digest in the store, and each step."""

    ref: str
    digest: str
    steps: list[StepResult] = field(default_factory=list)


def debian_suite(image: str) -> str | None:
    """The Debian suite ``mmdebstrap`` builds for ``image`` (``debian:12`` -> ``bookworm``,
    ``debian:stable-slim`` -> ``stable``), or None for an image that is not Debian's (Docker
    Hub's official ``debian``, by tag: not by digest, not on another registry)."""
    try:
        ref = parse_reference(image, default_registry=DEFAULT_REGISTRY)
    except ConfigError:
        return None
    if not ref.on_docker_hub or ref.repository.removeprefix("library/") != "debian" or ref.digest:
        return None
    tag = (ref.tag or "stable").removesuffix("-slim")
    if tag == "latest":
        return "stable"
    return _NUMBERED.get(tag.split(".")[0], tag) if tag[:1].isdigit() else tag


@dataclass(frozen=True)
class _Run:
    """How each ``RUN`` step runs: its time limit, and its network (``network.NETWORKS``)."""

    timeout: float | None
    network: str


@dataclass
class _Image:
    """An image being built: its layers and their diff ids, and its config."""

    layers: list[Descriptor]
    diff_ids: list[str]
    config: dict[str, Any]


def _read_image(blobs: BlobStore, digest: str) -> _Image:
    manifest = image_manifest(blobs.read(blobs.stored(digest)), None, f"image {digest}")
    config = parse_json(blobs.read(manifest.config), f"image {digest}: config")
    rootfs = config.get("rootfs")
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    layers = [Descriptor(d.media_type, d.digest, d.size) for d in manifest.layers]
    return _Image(layers, list(diff_ids or []), config)


def _write_image(blobs: BlobStore, image: _Image) -> str:
    """Store ``image``'s config and manifest; its manifest's digest."""
    config = {
        **image.config,
        "architecture": image.config.get("architecture", "amd64"),
        "os": image.config.get("os", "linux"),
        "rootfs": {"type": "layers", "diff_ids": image.diff_ids},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": blobs.write_json(config, OCI_CONFIG).to_json(),
        "layers": [d.to_json() for d in image.layers],
    }
    return blobs.write_json(manifest, OCI_MANIFEST).digest


def _step_text(step: Step) -> str:
    if isinstance(step, RunStep):
        return "RUN " + " ".join(step.argv[2:] if step.argv[:2] == ("/bin/sh", "-c") else step.argv)
    if isinstance(step, CopyStep):
        return f"COPY {' '.join(step.copy.sources)} {step.copy.dest}"
    return f"WORKDIR {step.path}"


def _context_files(context: Path, sources: tuple[str, ...], line: int) -> list[Path]:
    out: list[Path] = []
    for src in sources:
        matches = sorted(context.glob(src)) if any(c in src for c in "*?[") else [context / src]
        for m in matches:
            real = m.resolve()
            if not real.is_relative_to(context.resolve()):
                raise ConfigError(f"line {line}: {src} leaves the build context")
            if not m.exists():
                raise ConfigError(f"line {line}: {src} is not in the build context {context}")
            out.append(m)
    if not out:
        raise ConfigError(f"line {line}: {' '.join(sources)} matches nothing in {context}")
    return out


def _step_key(previous: str, step: Step, context: Path) -> str:
    h = hashlib.sha256(previous.encode())
    h.update(repr(step).encode())
    if isinstance(step, CopyStep):
        for path in _context_files(context, step.copy.sources, step.line):
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for f in files:
                h.update(str(f.relative_to(context)).encode())
                with f.open("rb") as data:  # in chunks: a context file may be large
                    while chunk := data.read(1 << 20):
                        h.update(chunk)
                h.update(oct(f.stat().st_mode).encode())
    return "sha256:" + h.hexdigest()


def _ids(root: Path, user: str) -> tuple[int, int, str]:
    """``USER``'s uid, gid and home in the image at ``root`` (its passwd and group files)."""
    name, _, group = user.partition(":")

    def table(path: str) -> list[list[str]]:
        try:
            text = (root / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return [line.split(":") for line in text.splitlines() if line.count(":") >= 2]

    users = {r[0]: r for r in table("etc/passwd") if len(r) >= 6}
    if name.isdigit():
        uid, gid, home = int(name), int(name), "/"
        for r in users.values():
            if r[2] == name:
                gid, home = int(r[3]), r[5]
    elif name in users:
        uid, gid, home = int(users[name][2]), int(users[name][3]), users[name][5]
    else:
        raise ConfigError(f"USER {user}: no such user in the image's /etc/passwd")
    if group:
        groups = {r[0]: int(r[2]) for r in table("etc/group") if r[2].isdigit()}
        if group.isdigit():
            gid = int(group)
        elif group in groups:
            gid = groups[group]
        else:
            raise ConfigError(f"USER {user}: no such group in the image's /etc/group")
    return uid, gid, home


def _run(step: RunStep, root: Path, timeout: float | None, log: Path, net: str) -> None:
    from deepgym.sandbox.host import find_bwrap

    uid, gid, home = _ids(root, step.user) if step.user not in ("", "root", "0") else (0, 0, "")
    env = {"HOME": home or "/root", **dict(step.env)}
    upper = log.with_name("upper") if _overlay_builds() else None
    if upper is None:
        argv = [find_bwrap().path, "--bind", str(root), "/"]
    else:  # the step's writes in a folder of their own: root's files may be the store's
        for folder in (upper, log.with_name("overlay-work")):
            remove_tree(folder) if folder.exists() else None
            folder.mkdir()
        argv = [find_bwrap().path, "--overlay-src", str(root), "--overlay", str(upper)]
        argv += [str(log.with_name("overlay-work")), "/"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--perms", "1777", "--tmpfs", "/tmp"]
    if net == "outbound":  # names through slirp4netns's resolver, which asks the host's
        resolv = log.with_name("resolv.conf")
        resolv.write_text(f"nameserver {DNS}\n")
        argv += ["--ro-bind", str(resolv), "/etc/resolv.conf"]
    else:
        argv += ["--unshare-net"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    (root / step.cwd.lstrip("/")).mkdir(parents=True, exist_ok=True)
    argv += ["--chdir", step.cwd]
    if uid != 0:
        argv += ["--unshare-user", "--uid", str(uid), "--gid", str(gid)]
    argv += ["--", *step.argv]
    with contextlib.ExitStack() as stack:
        attach = None
        if net == "outbound":
            attach = stack.enter_context(outbound(log.with_name("slirp4netns.log"))).attach
        out = stack.enter_context(log.open("wb"))
        proc = mapped.spawn(
            argv, network=attach, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise ConfigError(
                f"line {step.line}: {clip(_step_text(step), 60)} ran past {timeout:g} s"
            ) from None
    if code != 0:
        tail = log.read_bytes()[-_TAIL:].decode(errors="replace").strip()
        raise ConfigError(f"line {step.line}: {clip(_step_text(step), 60)} exited {code}:\n{tail}")
    if upper is not None:
        apply_upper(upper, root)
        for folder in (upper, log.with_name("overlay-work")):
            remove_tree(folder)
    resolv = root / "etc/resolv.conf"
    with contextlib.suppress(OSError):  # bwrap's mount point, when the image had none
        if resolv.is_file() and resolv.stat().st_size == 0:
            resolv.unlink()


def _owner(chown: str | None, root: Path) -> tuple[int, int] | None:
    if not chown:
        return None
    uid, gid, _ = _ids(root, chown)
    return uid, gid


def _fresh_copy(s: str, d: str, *, follow_symlinks: bool = True, copied: list[Path]) -> None:
    """Copy ``s`` to ``d`` as a new file, never one written in place (the root's files may be
    hard links to the store's unpacked root: ``_working_root``); note it in ``copied``."""
    if os.path.lexists(d):
        os.unlink(d)
    shutil.copy2(s, d, follow_symlinks=follow_symlinks)
    copied.append(Path(d))


def _copy(step: CopyStep, root: Path, context: Path) -> None:
    c = step.copy
    files = _context_files(context, c.sources, step.line)
    owner = _owner(c.chown, root)
    dest = root / c.dest.lstrip("/")
    into = c.into or len(files) > 1
    for src in files:
        target = dest / src.name if into and not src.is_dir() else dest
        if target.is_symlink() or not target.resolve().is_relative_to(root.resolve()):
            raise ConfigError(f"line {step.line}: {c.dest} leads outside the image's root")
        target.parent.mkdir(parents=True, exist_ok=True)
        copied: list[Path] = []
        fresh = functools.partial(_fresh_copy, copied=copied)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True, copy_function=fresh)
            copied += [target, *(p for p in target.rglob("*") if p.is_dir())]
        else:
            fresh(str(src), str(target))
        for path in copied:  # what this step copied, never what the image held there
            if c.chmod is not None and not path.is_symlink():
                path.chmod(c.chmod)
            if owner is not None:
                os.lchown(path, *owner)


def _apply(
    step: Step, root: Path, context: Path, timeout: float | None, log: Path, net: str
) -> None:
    if isinstance(step, RunStep):
        _run(step, root, timeout, log, net)
    elif isinstance(step, CopyStep):
        _copy(step, root, context)
    elif isinstance(step, MkdirStep):
        (root / step.path.lstrip("/")).mkdir(parents=True, exist_ok=True)


def _debian_base(suite: str, blobs: BlobStore, work: Path) -> str:
    """Build Debian ``suite`` (minbase) with mmdebstrap; the one-layer image's digest."""
    tool = shutil.which("mmdebstrap")
    if tool is None:
        raise ImageError(
            f"building debian:{suite} needs mmdebstrap (apt-get install mmdebstrap), or pull "
            "the image first: deepgym image pull"
        )
    tar = work / "base.tar"
    done = subprocess.run(
        [tool, "--variant=minbase", "--skip=output/dev", "--quiet", suite, str(tar)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ImageError(f"mmdebstrap {suite} failed: {done.stderr.strip()[-_TAIL:]}")
    gz_path = work / "base.tar.gz"
    with tar.open("rb") as src, gz_path.open("wb") as raw:
        outer = diff.HashingWriter(raw)
        with gzip.GzipFile(fileobj=outer, mode="wb", compresslevel=1, mtime=0) as gz:
            inner = diff.HashingWriter(gz)
            while chunk := src.read(1 << 20):
                inner.write(chunk)
    layer = Descriptor(OCI_LAYER_GZIP, "sha256:" + outer.sha.hexdigest(), outer.size)
    blobs.adopt(gz_path, layer)
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    config = {"config": {"Env": [f"PATH={path}"], "Cmd": ["bash"]}}
    return _write_image(blobs, _Image([layer], ["sha256:" + inner.sha.hexdigest()], config))


@contextlib.contextmanager
def _scratch(store: ImageStore) -> Iterator[Path]:
    base = Path(store.path) / "tmp"
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="build-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _base(
    ref: str, store: ImageStore, blobs: BlobStore, work: Path, say: Callable[[str], None]
) -> str:
    """The base image's manifest digest: in the store, pulled, or built from Debian."""
    with contextlib.suppress(ConfigError):
        return str(store.lookup(ref))
    pull_error: Exception | None = None
    try:
        from deepgym.images.distribution import pull

        say(f"FROM {ref}: pulling")
        pulled = pull(ref, store.blobs_dir)
        store.add_blobs_manifest(pulled.digest, ref)
        return str(pulled.digest)
    except (ImageError, ConfigError, ImportError) as exc:
        pull_error = exc
    suite = debian_suite(ref)
    if suite is None:
        raise ImageError(
            f"FROM {ref}: not in the image store, and not pulled ({pull_error}); build an "
            f"image that stands for it and name it: --base {ref}=LOCAL"
        )
    say(f"FROM {ref}: not pulled ({pull_error}); building Debian {suite} with mmdebstrap")
    digest = _debian_base(suite, blobs, work)
    store.add_blobs_manifest(digest, ref)
    return digest


def parse_bases(pairs: Sequence[str]) -> dict[str, str]:
    """``FROM=LOCAL`` pairs (``buildpack-deps:jammy=local/buildpack:jammy``) as a mapping;
    ``ConfigError`` naming one that is not two image names."""
    out: dict[str, str] = {}
    for pair in pairs:
        base, sep, local = pair.partition("=")
        if not sep or not base.strip() or not local.strip():
            raise ConfigError(f"--base {pair!r}: FROM=LOCAL, two image names")
        parse_reference(base.strip())
        parse_reference(local.strip())
        out[base.strip()] = local.strip()
    return out


def stand_in(base: str, bases: Mapping[str, str] | None) -> str | None:
    """The image ``bases`` names to stand for the ``FROM`` image ``base`` (names compared as
    references: ``buildpack-deps:jammy`` is ``docker.io/library/buildpack-deps:jammy``), or
    None."""
    if not bases:
        return None
    want = _canonical(base)
    for name, local in bases.items():
        if _canonical(name) == want:
            return local
    return None


def _canonical(image: str) -> str:
    try:
        ref = parse_reference(image, default_registry=DEFAULT_REGISTRY)
    except ConfigError:
        return image
    return f"{ref.registry}/{ref.repository}:{ref.tag}@{ref.digest}"


def _stand_in(base: str, local: str, store: ImageStore, say: Callable[[str], None]) -> str:
    """The manifest digest of ``local``, the store's image that stands for ``base``."""
    try:
        digest = str(store.lookup(local))
    except ConfigError:
        raise ImageError(
            f"FROM {base}: its stand-in {local} is not in the image store (build or load it "
            "first: deepgym image build DIR -t " + local + ")"
        ) from None
    say(f"FROM {base}: the stand-in {local} ({digest[:19]})")
    return digest


def build(
    dockerfile: str | Path,
    context: str | Path | None = None,
    ref: str | None = None,
    *,
    store: ImageStore | None = None,
    step_timeout: float | None = 1800.0,
    progress: Callable[[str], None] | None = None,
    network: str = "outbound",
    bases: Mapping[str, str] | None = None,
) -> BuildResult:
    """Build the image ``dockerfile`` describes, with ``context`` (its folder by default) as
    the build context, and store it as ``ref`` (the context folder's name by default).
    ``network``: how its ``RUN`` steps reach the network (``deepgym.images.network``).
    ``bases``: ``FROM`` images a host cannot pull, each to the image in the store that stands
    for it (``{"buildpack-deps:jammy": "local/buildpack-deps:jammy"}``); the built image's
    config labels name both (``BASE_LABEL``, ``STAND_IN_LABEL``)."""
    path = Path(dockerfile)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the Dockerfile ({exc.strerror})") from None
    ctx = Path(context) if context is not None else path.parent
    if not ctx.is_dir():
        raise ConfigError(f"{ctx}: the build context is not a folder")
    step_timeout = optional_seconds(step_timeout, "step_timeout")
    net = network_mode(network)
    plan = recipe(parse_dockerfile(text))
    store = store or ImageStore()
    name = ref or f"{ctx.resolve().name.lower()}:latest"
    parse_reference(name)  # a name the store and a registry take
    say = progress or (lambda line: None)
    blobs = store.blobs
    out = BuildResult(name, "")
    local = stand_in(plan.base, bases)
    with store.writing(), _scratch(store) as work:
        if local is None:
            base = _base(plan.base, store, blobs, work, say)
        else:
            base = _stand_in(plan.base, local, store, say)
            plan.labels = {**plan.labels, BASE_LABEL: plan.base, STAND_IN_LABEL: f"{local}@{base}"}
        image = _read_image(blobs, base)
        out.digest = _build_steps(
            plan, image, base, ctx, store, blobs, work, _Run(step_timeout, net), say, out
        )
    store.add_blobs_manifest(out.digest, name)
    return out


def _build_steps(
    plan: Recipe,
    image: _Image,
    base: str,
    ctx: Path,
    store: ImageStore,
    blobs: BlobStore,
    work: Path,
    run: _Run,
    say: Callable[[str], None],
    out: BuildResult,
) -> str:
    cache = Path(store.path) / "build-cache"
    cache.mkdir(parents=True, exist_ok=True)
    key = base
    root: Path | None = None
    for n, step in enumerate(plan.steps, 1):
        key = _step_key(key, step, ctx)
        entry = cache / key.removeprefix("sha256:")
        what = _step_text(step)
        t0 = time.monotonic()
        layer: dict[str, Any] = json.loads(entry.read_text()) if entry.exists() else {}
        cached = Descriptor(layer["mediaType"], layer["digest"], layer["size"]) if layer else None
        if cached is not None and blobs.has(cached):
            image.layers.append(cached)
            image.diff_ids.append(layer["diff_id"])
            out.steps.append(StepResult(step.line, what, True, 0.0, cached.digest, cached.size))
            say(f"step {n}/{len(plan.steps)}: {clip(what, 70)} (cached)")
            continue
        if root is None:
            root = _working_root(image, store, blobs, work)
        say(f"step {n}/{len(plan.steps)}: {clip(what, 70)}")
        before = diff.snapshot(root)
        _apply(step, root, ctx, run.timeout, work / "step.log", run.network)
        tmp = work / "layer.tar.gz"
        got = diff.write_layer(root, before, tmp)
        record = Descriptor(OCI_LAYER_GZIP, got.digest, got.size)
        blobs.adopt(tmp, record)
        entry.write_text(json.dumps({**record.to_json(), "diff_id": got.diff_id}))
        image.layers.append(record)
        image.diff_ids.append(got.diff_id)
        seconds = time.monotonic() - t0
        out.steps.append(StepResult(step.line, what, False, seconds, got.digest, got.size))
    image.config = {
        **{k: v for k, v in image.config.items() if k not in ("rootfs", "history")},
        "config": {**image.config.get("config", {}), **plan.config()},
    }
    return _write_image(blobs, image)


@functools.cache
def _overlay_builds() -> bool:
    """Whether a build step's sandbox mounts an overlay with an upper folder on disk here
    (bwrap's ``--overlay``, overlayfs in a user namespace, user extended attributes): probed
    once, with a step that removes a file of its lower layer."""
    from deepgym.sandbox.host import find_bwrap

    with tempfile.TemporaryDirectory(prefix="deepgym-overlay-probe-") as tmp:
        base = Path(tmp)
        for name in ("lower", "upper", "work"):
            (base / name).mkdir()
        (base / "lower" / "gone").write_text("x")
        argv = [find_bwrap().path, "--overlay-src", str(base / "lower")]
        argv += ["--overlay", str(base / "upper"), str(base / "work"), "/"]
        argv += ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin"]
        argv += ["--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"]
        argv += ["--", "/bin/sh", "-c", "rm /gone"]
        try:
            proc = mapped.spawn(
                argv, network=None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            code = proc.wait(60)
        except (OSError, subprocess.TimeoutExpired, ImageError, ConfigError):
            return False
        gone = base / "upper" / "gone"
        ok = code == 0 and gone.is_char_device() and os.lstat(gone).st_rdev == 0
        with contextlib.suppress(OSError):
            remove_tree(base / "work")
        return ok


def _working_root(image: _Image, store: ImageStore, blobs: BlobStore, work: Path) -> Path:
    """A private, writable copy of ``image``'s root (unpacked by the store, then copied). With
    overlay steps (``_overlay_builds``), its files are hard links to the store's root: no step
    writes one in place (a ``RUN`` writes to its overlay's upper, ``apply_upper`` moves the
    changes in; a ``COPY`` writes new files), so a corpus of images built on one toolchain
    copies the toolchain's folders, not its gigabytes."""
    digest = _write_image(blobs, image)
    unpacked = store.resolve(digest).rootfs
    root = work / "root"
    how = "--link" if _overlay_builds() else "--reflink=auto"
    done = subprocess.run(
        ["cp", "-a", how, f"{unpacked}/.", str(root)], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise ImageError(f"copying the image's root failed: {done.stderr.strip()}")
    return root
