"""The image store the image tests of ``tests/envs`` share, kept between runs (a Debian base
and the corpora's toolchains are built once there, not once per test)."""

from __future__ import annotations

from pathlib import Path

CACHE = Path.home() / ".cache" / "deepgym-harbor-tests"
"""A ``DEEPGYM_HOME`` whose ``images`` every such test's own home links to."""


def link_shared_store(home: Path) -> Path:
    """Make ``home``'s (a test's private ``DEEPGYM_HOME``) ``images`` a link to ``CACHE``'s;
    returns ``CACHE``."""
    (CACHE / "images").mkdir(parents=True, exist_ok=True)
    link = home / "images"
    if not link.exists():
        link.symlink_to(CACHE / "images")
    return CACHE
