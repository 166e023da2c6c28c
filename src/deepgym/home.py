"""Where deepgym keeps what outlives a process: ``$DEEPGYM_HOME``, ``~/.deepgym`` when unset
(the run store, the stored reference runtimes, the records of open sessions)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["deepgym_home"]


def deepgym_home() -> Path:
    """``$DEEPGYM_HOME``, or ``~/.deepgym`` when it is unset or empty."""
    return Path(os.environ.get("DEEPGYM_HOME") or Path.home() / ".deepgym")
