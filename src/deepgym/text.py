"""Text for people: a message on one line, a share as a percent.

Shared by the command line and the service (its error bodies, its console), so both say the same
thing the same way. Pure functions, no dependencies.
"""

from __future__ import annotations

__all__ = ["one_line", "percent"]


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` folded onto one line (a pydantic error, say): its non-blank lines joined by
    ``"; "``, pydantic's "For further information" links dropped, cut at ``limit`` characters."""
    lines = [s.strip() for s in str(text).splitlines() if s.strip()]
    out = "; ".join(s for s in lines if not s.startswith("For further information"))
    return out if limit is None else out[:limit]


def percent(x: float, places: int = 2, *, small: bool = False) -> str:
    """``x``, a share (0.25), as a percent with ``places`` decimals (``25.00%``).

    With ``small``, a share that is not zero but below what ``places`` shows (under 0.1% at one
    place) gets two decimals more, so a rare event does not read as none.
    """
    if small and not (x >= 10.0 ** -(places + 2) or x == 0):
        places += 2
    return f"{x:.{places}%}"
