"""Container images as root file systems for the sandbox, rootless and without a daemon.

``oci`` is the image data model (media types, descriptors, platforms, manifests, the digest
check, and ``ImageError``, the one error for a bad image from any source); ``blobs`` keeps blobs
by digest, verified. ``layout`` reads an image from disk (an OCI image layout, a ``docker save``
tarball), ``unpack`` applies its layers to a root directory securely, ``store`` keeps images and
their unpacked roots under ``$DEEPGYM_HOME/images``; ``reference`` and ``distribution`` (a
registry's client) pull and push over the OCI distribution API; ``recipe``, ``build``, ``diff``,
``mapped`` and ``network`` build an image from a Dockerfile without a daemon. Names load
lazily: importing this package imports none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deepgym.images.oci import ImageConfig
    from deepgym.images.store import ImageEntry, ImageRoot, ImageStore

__all__ = ["ImageConfig", "ImageEntry", "ImageRoot", "ImageStore"]

_HOMES = {
    "ImageConfig": "deepgym.images.oci",
    "ImageEntry": "deepgym.images.store",
    "ImageRoot": "deepgym.images.store",
    "ImageStore": "deepgym.images.store",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
