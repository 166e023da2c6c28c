"""The hostile-input suites' summary: how many hostile inputs were sent."""

from __future__ import annotations

from typing import Any

from tests.hostile.common import EXAMPLES, SPECIAL, TRIED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line after the run: hostile inputs tried, in all and by suite (``http`` and ``api``:
    hostile field values; ``schema``: requests drawn from the OpenAPI schema; ``wire``,
    ``channel`` and ``sandbox``: bytes fed to the codec, the result channel's reader and a real
    sandbox)."""
    if TRIED:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(TRIED.items()))
        if TRIED.keys() & {"http", "api"}:
            parts += f"; per field: {len(SPECIAL)} fixed and {EXAMPLES} drawn"
        terminalreporter.write_line(f"hostile inputs tried: {sum(TRIED.values())} ({parts})")
