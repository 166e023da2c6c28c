"""``deepgym demo``'s last screen: the "Next:" commands as they work from the shell it ran in
(``make demo`` runs ``.venv/bin/deepgym``, which is not on PATH)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym import cli
from deepgym.cli import demo
from deepgym.cli.demo import HowToRun, how_to_run


def _venv(root: Path) -> Path:
    """A virtualenv's bin/ with a ``deepgym`` script and ``activate``."""
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("deepgym", "activate"):
        (bin_dir / name).write_text("")
    (bin_dir / "deepgym").chmod(0o755)
    return bin_dir


def _commands(block: list[str]) -> list[str]:
    """The block's commands, without what each does beside them."""
    return [x.strip().split("  ")[0] for x in block]


def _next_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str, path: str
) -> list[str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [program, "demo"])
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(demo, "_demo_suites", list)  # nothing to score: the last screen alone
    r = CliRunner(env={"COLUMNS": "100"}).invoke(cli.cli, ["demo"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    return lines[lines.index("Next:") + 1 :]


def test_after_make_demo_the_next_commands_name_the_venvs_deepgym(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _venv(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    block = _next_block(tmp_path, monkeypatch, ".venv/bin/deepgym", str(empty))
    assert _commands(block)[:4] == [
        ".venv/bin/deepgym list",
        ".venv/bin/deepgym show two_sum",
        ".venv/bin/deepgym run two_sum answer.py",
        ".venv/bin/deepgym --help",
    ]
    assert block[-1] == (
        "  (deepgym is not on PATH here: `. .venv/bin/activate` puts this one there for this shell)"
    )


def test_plain_deepgym_where_it_is_the_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _venv(tmp_path)
    block = _next_block(tmp_path, monkeypatch, str(bin_dir / "deepgym"), str(bin_dir))
    assert _commands(block)[0] == "deepgym list"
    assert not any(".venv" in x or "PATH" in x for x in block)


def test_another_deepgym_on_path_is_not_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _venv(tmp_path)
    other = _venv(tmp_path / "other")
    block = _next_block(tmp_path, monkeypatch, ".venv/bin/deepgym", str(other))
    assert _commands(block)[0] == ".venv/bin/deepgym list"
    said = " ".join(x.strip() for x in block)  # the hint, wrapped at 100 columns
    assert said.endswith(
        f"(the deepgym on PATH is another one ({other / 'deepgym'}): `. .venv/bin/activate` "
        "puts this one there for this shell)"
    )


NOT_ON_PATH = "deepgym is not on PATH here"
ACTIVATE = ": `. .venv/bin/activate` puts this one there for this shell"


@pytest.mark.parametrize(
    ("program", "on_path", "same", "activate", "expected"),
    [
        (".venv/bin/deepgym", None, False, True,
         HowToRun(".venv/bin/deepgym", NOT_ON_PATH + ACTIVATE)),
        ("/w/p/.venv/bin/deepgym", "/w/p/.venv/bin/deepgym", True, True, HowToRun("deepgym")),
        ("/w/p/.venv/bin/deepgym", "/usr/bin/deepgym", False, True,
         HowToRun(".venv/bin/deepgym",
                  "the deepgym on PATH is another one (/usr/bin/deepgym)" + ACTIVATE)),
        ("/opt/env/bin/deepgym", None, False, False, HowToRun("/opt/env/bin/deepgym")),
        ("/opt/env/bin/deepgym", "/usr/bin/deepgym", False, False,
         HowToRun("/opt/env/bin/deepgym", "the deepgym on PATH is another one (/usr/bin/deepgym)")),
        ("deepgym", None, False, False, HowToRun(os.path.join(".", "deepgym"))),
        (None, None, False, False, HowToRun("python -m deepgym")),
    ],
)  # fmt: skip
def test_how_to_run(
    program: str | None, on_path: str | None, same: bool, activate: bool, expected: HowToRun
) -> None:
    assert how_to_run(program, on_path, same, "/w/p", activate) == expected
