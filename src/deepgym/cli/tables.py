"""Output that fits the terminal: a table when it fits, a plain list when it does not, and lines
wrapped between words.

Invariants:

- A table's first column holds each row's key (an environment's name, a run's id, the id that
  ``--resume`` takes): it is never cut, folded or wrapped. The other columns are values (a
  score, a count, a time: never wrapped) or prose (``Column(wrap=True)``: a cause, a message, a
  list of tags), which wraps between words and never inside one. A header may wrap between
  words.
- A table is drawn only when it fits the console's width under those rules; otherwise each row
  is printed as a list item: its key alone on a line, then ``header: value`` pairs packed into
  indented lines no wider than the console.
- No line is wider than the console, except one that holds a single word wider than it (a word
  is never broken: a name stays whole).
- A value column that is blank in every row is not drawn (``drop_empty``): a column of nothing
  tells nothing.

``column_widths``, ``drop_empty``, ``list_lines`` and ``wrap`` are pure; ``print_table`` and
``echo`` print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import click
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "Cell",
    "Column",
    "column_widths",
    "drop_empty",
    "echo",
    "list_lines",
    "print_table",
    "wrap",
]

Cell = str | Text
"""A table cell: plain text, or rich ``Text`` with a style (drawn only in a table)."""

_FRAME = 3
"""Characters a column adds to a table beside its text: a space each side and its left border
(the table's right border is one more)."""


@dataclass(frozen=True)
class Column:
    """A table column: its header, and whether its text is prose that may wrap between words."""

    header: str
    wrap: bool = False
    justify: Literal["left", "right"] = "left"


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _longest_word(texts: Sequence[str]) -> int:
    return max((cell_len(w) for t in texts for w in t.split()), default=1)


def _widest(texts: Sequence[str]) -> int:
    return max((cell_len(line) for t in texts for line in t.splitlines() or [""]), default=1)


def column_widths(
    columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int
) -> list[int] | None:
    """The text width of each column of a table ``width`` wide at most, or None: it cannot fit.

    The key (first) column and the value columns get their widest cell; prose columns share
    what is left, each at least as wide as its longest word. Headers may wrap between words.
    """
    room = width - _FRAME * len(columns) - 1
    most: list[int] = []  # each column on one line, its header too
    least: list[int] = []  # prose and headers wrapped between words
    prose: list[bool] = []
    for i, column in enumerate(columns):
        cells = [_plain(row[i]) for row in rows]
        widest = _widest(cells) if cells else 1
        is_prose = column.wrap and i > 0
        most.append(max(widest, _widest([column.header]), 1))
        words = _longest_word([column.header, *cells] if is_prose else [column.header])
        least.append(max(words if is_prose else max(widest, words), 1))
        prose.append(is_prose)
    if sum(least) > room:
        return None
    widths = list(most)
    excess = sum(widths) - room
    # Wrap headers first (one line of the table), then prose (a line in every row it wraps in);
    # each time narrow the widest column that can still give a character.
    for phase in (False, True):
        while excess > 0:
            able = [j for j in range(len(widths)) if prose[j] == phase and widths[j] > least[j]]
            if not able:
                break
            widths[max(able, key=lambda j: widths[j])] -= 1
            excess -= 1
    return widths


def drop_empty(
    columns: Sequence[Column], rows: Sequence[Sequence[Cell]]
) -> tuple[list[Column], list[list[Cell]]]:
    """The columns, and each row's cells, without the value columns blank in every row (the
    key column always stays; with no rows, every column stays: the headers say what is not
    there)."""
    keep = [
        i
        for i in range(len(columns))
        if i == 0 or not rows or any(_plain(row[i]).strip() for row in rows)
    ]
    return [columns[i] for i in keep], [[row[i] for i in keep] for row in rows]


def wrap(text: str, width: int, indent: int = 0, hang: int | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words: the first line
    indented by ``indent`` spaces (and by the text's own leading spaces), the rest by ``hang``
    (the first line's indent + 2 by default). Text that fits is kept as it is; a word wider than
    a line is kept whole, on a line of its own."""
    lead = len(text) - len(text.lstrip(" "))  # leading spaces indent the first line too
    indent += lead
    text = text[lead:]
    if cell_len(text) + indent <= width and "\n" not in text:
        return [" " * indent + text]  # as it is, spacing kept
    rest = indent + 2 if hang is None else hang
    lines: list[str] = []
    current = " " * indent
    bare = True  # nothing but indentation on the current line yet
    for word in text.split():
        if bare:
            current += word
            bare = False
        elif cell_len(current) + 1 + cell_len(word) <= width:
            current += " " + word
        else:
            lines.append(current)
            current = " " * rest + word
    lines.append(current if not bare else current.rstrip())
    return lines


def list_lines(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int) -> list[str]:
    """The rows as a plain list: each key alone on a line, then its ``header: value`` pairs
    (empty values left out), packed two spaces apart into lines indented by two."""
    lines: list[str] = []
    for row in rows:
        key, *values = (_plain(c) for c in row)
        lines.append(key)
        current = ""
        for column, value in zip(columns[1:], values, strict=True):
            if not value.strip():
                continue
            pair = f"{column.header}: {value}"
            if current and cell_len(current) + 2 + cell_len(pair) <= width:
                current += "  " + pair
                continue
            if current:
                lines.append(current)
            current = "  " + pair
            if cell_len(current) > width:  # a long value: wrapped on lines of its own
                lines += wrap(pair, width, indent=2, hang=4)
                current = ""
        if current:
            lines.append(current)
    return lines


def print_table(
    console: Console,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
) -> None:
    """``rows`` as a table under ``title`` if it fits ``console``'s width, else as a plain list;
    the columns blank in every row left out (``drop_empty``)."""
    columns, rows = drop_empty(columns, rows)
    width = console.width
    widths = column_widths(columns, rows, width)
    if widths is None:
        for text in [*wrap(title, width), *list_lines(columns, rows, width)]:
            click.echo(text)
        return
    for text in wrap(title, width):  # above the table, not in it: a narrow table would fold it
        click.echo(text)
    table = Table()
    for column, w in zip(columns, widths, strict=True):
        table.add_column(
            column.header,
            width=w,
            justify=column.justify,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in row))
    console.print(table)


def echo(text: str, console: Console, *, indent: int = 0, hang: int | None = None) -> None:
    """Print ``text`` wrapped between words to ``console``'s width (see ``wrap``)."""
    for line in wrap(text, console.width, indent, hang):
        click.echo(line)
