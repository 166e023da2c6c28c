"""Every install hint names this repository: ``deepgym`` on the package index is another
project's name, so ``pip install deepgym`` (or ``'deepgym[extra]'``) installs the wrong thing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deepgym.text import install_extra

ROOT = Path(__file__).resolve().parents[2]
FROM_THE_INDEX = re.compile(r"pip install +(-U +)?['\"]?deepgym\b")


def _texts() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile"]
    for folder, pattern in (("src", "*.py"), ("docs", "*.md"), ("scripts", "*")):
        files += [p for p in (ROOT / folder).rglob(pattern) if p.is_file()]
    return files


def test_no_text_installs_deepgym_from_the_index() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _texts()
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if FROM_THE_INDEX.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("extra", ["server", "ray", "humaneval", "latency"])
def test_the_hint_installs_the_extra_from_the_checkout(extra: str) -> None:
    assert install_extra(extra) == f"pip install -e '.[{extra}]' in deepgym's checkout"
