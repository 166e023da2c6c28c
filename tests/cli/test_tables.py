"""Output that fits 80 columns: keys never cut, a table or a plain list, JSON for scripts."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from deepgym import cli
from deepgym.cli.tables import Column, column_widths, drop_empty, list_lines, print_table, wrap
from deepgym.envs.registry import list_environments, list_session_environments
from deepgym.store import RunStore

LONG_KEY = "a-very-long-environment-name-that-is-never-cut"
COLUMNS = [Column("name"), Column("score", justify="right"), Column("cause", wrap=True)]


def _lines(output: str) -> list[str]:
    return output.splitlines()


def test_wrap_breaks_between_words_only() -> None:
    text = "the answer hit its 256 MB memory limit, then the verifier raised KeyError"
    lines = wrap(text, 20)
    assert all(len(line) <= 20 for line in lines)
    assert " ".join(line.strip() for line in lines) == text
    assert wrap("supercalifragilisticexpialidocious word", 10)[0] == (
        "supercalifragilisticexpialidocious"  # a word wider than a line stays whole
    )
    assert wrap("fits  as  it is", 80) == ["fits  as  it is"]  # spacing kept when it fits


def test_a_table_that_fits_keeps_keys_and_wraps_prose() -> None:
    rows = [[LONG_KEY, "0.250", "expected 3, got None " * 6]]
    widths = column_widths(COLUMNS, rows, 80)
    assert widths is not None
    assert widths[0] == len(LONG_KEY) and widths[1] == len("score")
    assert sum(widths) + 3 * len(COLUMNS) + 1 <= 80
    console = Console(width=80, record=True, file=io.StringIO())
    print_table(console, "results", COLUMNS, rows)
    text = console.export_text()
    assert all(len(line) <= 80 for line in _lines(text))
    assert any(LONG_KEY in line for line in _lines(text))


def test_a_table_that_cannot_fit_becomes_a_list() -> None:
    rows = [[LONG_KEY, "0.250", "fine"], ["x" * 70, "1.000", ""]]
    assert column_widths(COLUMNS, rows, 60) is None
    lines = list_lines(COLUMNS, rows, 60)
    assert lines[0] == LONG_KEY
    assert lines[1] == "  score: 0.250  cause: fine"
    assert lines[2] == "x" * 70  # a key wider than the console, still whole
    assert lines[3] == "  score: 1.000"  # empty values left out


def _at_80(*args: str) -> str:
    r = CliRunner(env={"COLUMNS": "80"}).invoke(cli.cli, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout


def test_list_at_80_columns_never_cuts_a_name() -> None:
    output = _at_80("list")
    words = set(re.findall(r"[\w/.-]+", output))
    every = list_environments() + list_session_environments()
    missing = [name for name in every if name not in words]
    assert not missing, output
    assert all(len(line) <= 80 for line in _lines(output)), output


def test_list_json() -> None:
    rows = json.loads(_at_80("list", "--json"))
    assert [r["name"] for r in rows] == list_environments() + list_session_environments()
    assert set(rows[0]) == {"name", "kind", "difficulty", "tags", "description"}


def test_runs_at_80_columns_keeps_the_id_on_one_line(tmp_path: Path) -> None:
    names = [f"env_{i}" for i in range(164)]
    with RunStore(tmp_path / "runs.db") as store:
        run_id = store.create_run("eval", "a-suite-with-a-rather-long-source-name", names, names)
    output = _at_80("runs", "--store", str(tmp_path / "runs.db"))
    assert any(run_id in line for line in _lines(output)), output  # whole, on one line
    assert all(len(line) <= 80 for line in _lines(output)), output


def test_a_column_blank_in_every_row_is_not_drawn() -> None:
    columns = [Column("test"), Column("score"), Column("message", wrap=True)]
    rows = [["t0", "", "boom"], ["t1", " ", ""]]
    kept, kept_rows = drop_empty(columns, rows)
    assert [c.header for c in kept] == ["test", "message"]
    assert kept_rows == [["t0", "boom"], ["t1", ""]]
    assert drop_empty(columns, [["", "", ""]])[0][0].header == "test"  # the key column stays
    assert drop_empty(columns, []) == (columns, [])  # no rows: the headers say what is not there
    console = Console(file=io.StringIO(), width=80)
    print_table(console, "tests", columns, rows)
    assert "score" not in console.file.getvalue()  # type: ignore[attr-defined]
