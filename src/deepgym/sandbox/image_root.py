"""Sandboxes on a container image's root file system, in place of the host's system folders.

An environment that names an ``image`` runs its sandboxes on that image's unpacked root: the
image store (``deepgym.images``, reached through the ``ImageResolver`` seam) gives a root folder
on the host and the image's config; this module turns them into the ``policy.Params`` of the
same roles. Nothing else of the policy changes: no network, own pid namespace, no capabilities,
no further user namespaces, the same ``/proc`` rules, the capped ``/work``, ``/tmp`` and
``/dev/shm``, the run's or session's cgroups.

How the root is mounted (``system_args``): the image's folder is the lower layer of an overlay
at ``/`` whose upper layer is a tmpfs of this sandbox's own (bwrap's ``--tmp-overlay``). The
folder on disk is never written, two sandboxes on one image never see each other's writes, and
everything written is gone when the sandbox ends.

- A session (``writable=True``): the agent may write anywhere (``apt-get install``, ``/etc``).
  bwrap cannot cap that tmpfs's size, so its pages are bounded by the session's memory cgroup
  (tmpfs pages are charged to the cgroup of the process that writes them): an image session is
  refused where the session's group holds no memory controller. The final verifier runs on the
  image too, in a fresh sandbox (``session_verifier``): the image as built plus the agent's
  work dir, never the agent's layer.
- A function task (``writable=False``, the ``strict`` backend only): the answer's ``solution``
  sandbox remounts its root read-only, layer and all, as it does the host's; the verifier's
  root is writable in its own layer, as bwrap's root is on the host (its ``/tmp`` is the
  image's, in that layer: private all the same).

Where the host's bwrap or kernel has no overlay (``host.check_overlay``), a sandbox on an image
is refused in one line, never run on the host's system instead.

The judge's own interpreter comes from the host, never from the image (which may have none, or
another version): the host's Python prefix is mounted read-only (``python_mount``), the host's
library folders at ``IN_HOST_LIBS``, and the judge runs through the host's dynamic loader with
those folders first on its library path (``launcher``). What it starts (the agent's shell, a
verifier's commands, the answer's subprocesses) runs on the image's own loader and libraries; a
verifier that starts ``sys.executable`` gets the host's interpreter on the image's glibc, so
that works where the image's glibc is as new as the host's. The image's ``/bin/bash`` runs the
agent's commands (``judge/agent_shell.py``): an image without bash cannot host a session.

Threat model: the image is the environment's, trusted as its verifier is; the agent is not. The
agent's uid inside owns the image's files (they are the host user's), which only means it may
write to its own tmpfs layer; a setuid file gives nothing (no capabilities, no_new_privs, and the
file's owner maps to the agent's own uid). Of the host, the sandbox sees only what the policy
mounts plus the interpreter's prefix and the library folders, read-only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from deepgym.exceptions import ConfigError, ImageError, SandboxUnavailableError
from deepgym.models import Environment
from deepgym.sandbox import host, policy
from deepgym.sandbox.host import HostLoader

__all__ = [
    "IN_HOST_LIBS",
    "IN_PYTHON",
    "SYSTEM_TOPS",
    "ImageResolver",
    "ImageRoots",
    "RootImage",
    "image_env",
    "image_params",
    "launcher",
    "python_mount",
    "refuse_image",
    "store_resolver",
    "system_args",
]

IN_PYTHON = "/opt/deepgym/python"
"""Where the host's Python prefix is mounted in an image's sandbox when it lives in a system
folder an image has its own of (``SYSTEM_TOPS``); elsewhere it is mounted at its own path, so
that the interpreter's RUNPATH, and a verifier's ``sys.executable``, work as on the host."""
SYSTEM_TOPS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/var", "/opt/deepgym")
"""Folders of an image never shadowed by a host mount."""
IN_HOST_LIBS = "/opt/deepgym/hostlib"
"""Where the host's library folders are mounted in an image's sandbox, one numbered folder each."""
UNSAFE_ENV_PREFIXES = ("LD_", "DEEPGYM_")
"""Image variables never set: the loader's (they would change what the host's interpreter
loads) and deepgym's own."""
OVERLAY_SPECIAL = ",:\\\n"
"""Characters an overlay's folder path cannot hold (its mount options are split on them)."""
OURS = frozenset({"HOME"})
"""Variables the session sets itself, whatever the image says."""


@dataclass(frozen=True)
class RootImage:
    """An image as a sandbox needs it: its unpacked root on the host and its config's ``Env``.
    Its ``WorkingDir`` moves nothing: a session's shell starts in the work dir, ``/work``, the
    folder its verifier scores (an imported Harbor task maps its ``WORKDIR`` onto it)."""

    rootfs: Path
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)


class ImageResolver(Protocol):
    """Resolves an environment's ``image`` reference to an unpacked root (pulling, building or
    unpacking it as needed); raises a ``DeepGymError`` naming the reference when it cannot."""

    def __call__(self, ref: str, /) -> RootImage:
        """The root and config of image ``ref``."""
        ...


def parse_env(items: Mapping[str, str] | Iterable[str] | None) -> dict[str, str]:
    """An image config's ``Env`` (OCI's ``["K=V", ...]`` or a mapping) as a dict."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return {str(k): str(v) for k, v in items.items()}
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if sep:
            out[key] = value
    return out


def image_env(env: Mapping[str, str]) -> dict[str, str]:
    """The image's variables that a session sets over ``policy.BASE_ENV``: all but the
    loader's, deepgym's own, ``HOME``, and names or values a process environment cannot hold."""
    out: dict[str, str] = {}
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            continue
        if key in OURS or key.startswith(UNSAFE_ENV_PREFIXES):
            continue
        out[key] = value
    return out


def python_mount(prefix: str) -> str:
    """Where the host's Python ``prefix`` is mounted: its own path, unless that would shadow a
    system folder of the image (``SYSTEM_TOPS``), then ``IN_PYTHON``."""
    clash = prefix == "/" or any(prefix == t or prefix.startswith(t + "/") for t in SYSTEM_TOPS)
    return IN_PYTHON if clash else prefix


def _lib_index(loader: HostLoader) -> dict[str, str]:
    return {d: f"{IN_HOST_LIBS}/{i}" for i, d in enumerate(loader.lib_dirs)}


def _inside(path: str, mounts: Mapping[str, str]) -> str:
    """Where host ``path`` is in the sandbox, given host folder -> mount point ``mounts``."""
    for host_dir, mount in mounts.items():
        if path.startswith(host_dir.rstrip("/") + "/"):
            return mount + path[len(host_dir.rstrip("/")) :]
    raise SandboxUnavailableError(f"{path} is in none of the folders mounted for it")


def system_args(rootfs: Path, loader: HostLoader) -> list[str]:
    """bwrap arguments that make ``rootfs`` the sandbox's root (an overlay with a tmpfs upper
    layer of its own) with the host's Python and libraries read-only under ``/opt/deepgym``."""
    args = ["--overlay-src", str(rootfs), "--tmp-overlay", "/"]
    args += ["--ro-bind", loader.prefix, python_mount(loader.prefix)]
    for host_dir, mount in _lib_index(loader).items():
        args += ["--ro-bind", host_dir, mount]
    return args


def launcher(loader: HostLoader) -> list[str]:
    """The command prefix that runs the host's interpreter inside: the host's loader, with the
    prefix's ``lib`` first (as its RUNPATH would) and the host's library folders."""
    mounts = _lib_index(loader)
    path = ":".join([f"{python_mount(loader.prefix)}/lib", *mounts.values()])
    return [_inside(loader.loader, mounts), "--library-path", path]


def image_params(
    host: policy.Params, image: RootImage, loader: HostLoader, *, writable: bool = True
) -> policy.Params:
    """``host``'s params for a sandbox on ``image``: its root as the system, the host's
    interpreter through ``launcher``, and the image's safe variables (``image_env``), under
    which the sandbox's own go. ``writable``: a session's root stays writable (its own layer);
    else the roles that remount their root read-only (``solution``) do so, layer and all."""
    root = image.rootfs
    if not root.is_absolute() or not root.is_dir() or str(root.resolve()) == "/":
        raise ConfigError(f"image root {str(root)!r} is not an unpacked root folder")
    if any(ch in str(root.resolve()) for ch in OVERLAY_SPECIAL):  # overlayfs's option syntax
        raise ConfigError(f"image root {str(root)!r} has one of {OVERLAY_SPECIAL!r} in its path")
    python = _inside(loader.python, {loader.prefix: python_mount(loader.prefix)})
    return dataclasses.replace(
        host,
        system=tuple(system_args(root.resolve(), loader)),
        python=python,
        launcher=tuple(launcher(loader)),
        writable_root=writable,
        base_env=image_env(image.env),
    )


class ImageRoots:
    """Images as sandbox params: each reference resolved once (``images``: the image store's
    resolver by default), each sandbox refused in one line where this host's bwrap mounts no
    overlay (``host.check_overlay``)."""

    def __init__(self, images: ImageResolver | None = None) -> None:
        self.images: ImageResolver = store_resolver if images is None else images
        self._roots: dict[str, RootImage] = {}

    def get(self, ref: str) -> RootImage:
        """Image ``ref``, resolved at its first use."""
        image = self._roots.get(ref)
        if image is None:
            image = self._roots[ref] = self.images(ref)
        return image

    def params(self, base: policy.Params, ref: str, *, writable: bool) -> policy.Params:
        """``base`` for a sandbox on image ``ref`` (``image_params``)."""
        host.check_overlay()
        return image_params(base, self.get(ref), host.host_loader(), writable=writable)


def refuse_image(env: Environment, backend: str) -> None:
    """``ConfigError`` for a task on an image sent to a backend that runs none (``pool``'s
    workers run on the host's system; ``unsafe`` has no sandbox to put a root in)."""
    if env.image is not None:
        raise ConfigError(
            f"env {env.name!r} runs on image {env.image!r}: the {backend} backend runs no "
            "image; use sandbox='strict'"
        )


def store_resolver(ref: str) -> RootImage:
    """``ref`` through deepgym's image store (``deepgym.images.store.ImageStore``): the stored
    image, else pulled from its registry first (``deepgym.images.distribution.pull``; an image that
    cannot be pulled is ``ImageError``, ours: no verdict, naming the commands that build or
    load it)."""
    from deepgym.images.store import ImageStore

    store = ImageStore()
    try:
        store.lookup(ref)
    except ConfigError:
        if ref.startswith("sha256:"):
            raise
        from deepgym.images.distribution import pull

        try:
            with store.writing():
                pulled = pull(ref, store.blobs_dir)
        except ImageError as exc:  # one line that says how to have it without a registry
            raise ImageError(
                f"image {ref}: not in the image store, and not pulled ({exc}); build it "
                f"(deepgym image build DIR -t {ref}: an imported Harbor task keeps its DIR as "
                "image/ in its folder) or load it (deepgym image load)"
            ) from exc
        store.add_blobs_manifest(pulled.digest, ref)
    got = store.resolve(ref)
    return RootImage(rootfs=Path(got.rootfs), env=parse_env(got.config.env))
