"""``deepgym.text``: the one-line and percent helpers the command line and the service share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deepgym.text import one_line, percent


def test_one_line_joins_lines_and_drops_pydantic_links() -> None:
    message = "2 validation errors\n  name\n    Field required\n  For further information visit x"
    assert one_line(message) == "2 validation errors; name; Field required"
    assert one_line("  \n\n") == ""
    assert one_line("a\nb\nc", limit=4) == "a; b"


@given(st.floats(allow_nan=True, allow_infinity=False))
def test_percent_keeps_both_formats(x: float) -> None:
    assert percent(x) == f"{x:.2%}"  # the console's and ``deepgym runs``'
    small = f"{x:.1%}" if x >= 0.001 or x == 0 else f"{x:.3%}"  # ``deepgym price``'s
    assert percent(x, 1, small=True) == small
