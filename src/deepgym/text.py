"""Text for people: a message on one line, a run's cause in short, a share as a percent, an
instant in UTC.

Shared by the command line and the service (its error bodies, its console), so both say the same
thing the same way. Pure functions, no dependencies beyond the standard library.
"""

from __future__ import annotations

import re
import time

__all__ = ["clip", "install_extra", "one_line", "percent", "short_cause", "utc_time"]

VERIFIER_FILE = "verifier.py"
"""The name every sandbox gives an environment's verifier: its frames are the author's own."""

CAUSE_CHARS = 300
"""The longest short cause (a table cell, a check's message)."""

_MARKER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^[\s|]*File "([^"]*)", line (\d+), in (.+?)\s*$')
_INTERNAL_TYPE = re.compile(r"^deepgym[\w.]*\.(\w+)(?=:|$)")
_GROUP_BAR = re.compile(r"^\s*\| ?")


def install_extra(extra: str) -> str:
    """How to install one of deepgym's extras, said the same way everywhere. From the checkout:
    ``deepgym`` on the package index is another project's name."""
    return f"pip install -e '.[{extra}]' in deepgym's checkout"


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


def utc_time(t: float | None) -> str:
    """An instant (seconds since the epoch) as ``2025-01-01 12:00:00 UTC``; ``-`` for none."""
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def short_cause(error: str, limit: int | None = CAUSE_CHARS) -> str:
    """A run's cause (``RunResult.error``) as people see it: one line, at most ``limit`` characters.

    A traceback becomes its exception line and the verifier's own innermost frame, as
    ``KeyError: 'x' (verifier.py:12 in verify)``: the judge's frames, the sandbox's paths and the
    standard library's are left out, and an exception class of deepgym's own loses its module.
    Text before the traceback (``the answer hit its 256 MB memory limit, then:``) leads. Any
    other text is ``one_line``'s. ``RunResult.error`` keeps the full text.
    """
    text = str(error)
    lines = text.splitlines()
    frames = [(i, m) for i, line in enumerate(lines) if (m := _FRAME.match(line))]
    if not frames:
        return clip(one_line(text), limit)
    # After the last frame: its source lines (indented), then the exception, unindented (in an
    # exception group, each line behind a "| ", the sub-exceptions' too).
    after = (_GROUP_BAR.sub("", line) for line in lines[frames[-1][0] + 1 :])
    raised = [line for line in after if line.strip() and not line[0].isspace()]
    said = one_line("\n".join(_INTERNAL_TYPE.sub(r"\1", line) for line in raised))
    said = said or "the verifier raised"
    own = [m for _, m in frames if m.group(1).rsplit("/", 1)[-1] == VERIFIER_FILE]
    if own:
        said += f" ({VERIFIER_FILE}:{own[-1].group(2)} in {own[-1].group(3)})"
    marker = text.find(_MARKER)
    head = one_line(text[: text.rfind("\n", 0, marker) + 1]) if marker > 0 else ""
    return clip(f"{head} {said}" if head else said, limit)


def clip(text: str, limit: int | None) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked with an ellipsis (None: as
    it is)."""
    return text if limit is None or len(text) <= limit else text[: max(limit - 1, 0)] + "…"
