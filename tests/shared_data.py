"""Where the third-party task data lies: ``../shared/data`` beside the project's root (see its
README), or ``$DEEPGYM_SHARED_DATA`` (a checkout whose ``../shared`` is elsewhere). Tests read
it in place; the project copies none of it."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_data() -> Path:
    """The folder of ``../shared/data``'s README."""
    return Path(os.environ.get("DEEPGYM_SHARED_DATA") or ROOT.parent / "shared" / "data")
