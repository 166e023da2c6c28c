"""The docs cannot rot: every Python block of README.md and docs/ runs, and every link resolves.

Each Python block runs as a script of its own (``tests/docs/snippets.py``), in a temporary
working directory with a private ``DEEPGYM_HOME``: real sandboxes, no network, no model
downloads. A block that raises, or exits non-zero, fails its test with the Markdown file and line.
Every fence names its language, so nothing meant to run can hide in an unmarked block.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import built_runtimes
from tests.docs.snippets import PYTHON, ROOT, Block, blocks, run

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LANGUAGES = PYTHON | {"bash", "console", "text", "toml", "yaml", "json", "jsonl", "diff", "ini"}
PYTHON_BLOCKS = [b for page in PAGES for b in blocks(page) if b.language in PYTHON]
_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def test_the_docs_have_python_blocks() -> None:
    assert len(PAGES) > 10
    assert len(PYTHON_BLOCKS) > 20


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_names_its_language(page: Path) -> None:
    unmarked = [b.where for b in blocks(page) if b.language not in LANGUAGES]
    assert not unmarked, f"fences without a known language ({sorted(LANGUAGES)}): {unmarked}"


def _prose(page: Path) -> str:
    """The page without its fenced blocks and code spans (where brackets are code, not links)."""
    text = page.read_text(encoding="utf-8")
    for block in blocks(page):
        text = text.replace(block.code.rstrip("\n"), "")
    return re.sub(r"`[^`]*`", "", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = _prose(page)
    broken = []
    for m in _LINK.finditer(text):
        target = m["target"].split("#", 1)[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        if not (page.parent / target).exists():
            broken.append(m["target"])
    assert not broken, f"{page.relative_to(ROOT)}: links to missing files: {broken}"


@pytest.mark.sandbox
@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: b.where)
def test_python_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A block with an answer in a runtime finds the tests' build (tests.built_runtimes) rather
    # than building one of its own in its private home.
    monkeypatch.setenv("DEEPGYM_RUNTIMES", str(built_runtimes.ROOT))
    if 'runtime="scientific"' in block.code:
        built_runtimes.scientific()
    done = run(block, tmp_path)
    assert done.returncode == 0, f"{block.where} failed:\n{done.stderr[-4000:]}"


def test_a_failing_block_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n```python\nx = 1\nraise SystemExit(x + 1)\n```\n", encoding="utf-8")
    (block,) = blocks(page)
    assert (block.line, block.language) == (4, "python")
    assert run(block, tmp_path).returncode == 2
    broken = Block(ROOT / "README.md", 3, "python", "undefined_name\n")
    done = run(broken, tmp_path)
    assert done.returncode == 1
    assert "line 3" in done.stderr and "NameError" in done.stderr


def test_an_unclosed_fence_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n", encoding="utf-8")
    with pytest.raises(ValueError, match="never closed"):
        list(blocks(page))


# -- names the docs use -----------------------------------------------------------------------

_SPAN = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"^deepgym(?:\.[A-Za-z_]\w*)+$")
_CLASS = re.compile(r"^(?P<name>[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)(?:\(.*\))?$")
FOREIGN = frozenset(
    {
        "GRPOConfig",
        "GRPOTrainer",
        # verifiers', SkyRL's, NeMo Gym's and Atropos's (their "Coming from" pages)
        "Taskset",
        "SingleTurnEnv",
        "Rubric",
        "TaskError",
        "SkyRLGymGenerator",
        "SimpleResourcesServer",
        "AggregateMetrics",
        "RewardProfiler",
        "BaseEnv",
        "BaseEnvConfig",
        "ScoredDataGroup",
        "BatchEncoding",
    }
)
"""Names of the trainer frameworks' own that the docs mention in passing."""


def _resolves(dotted: str) -> bool:
    """Whether ``deepgym.a.b.C`` is a module, or an attribute reached from one."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _names_its_module(page_text: str, name: str) -> bool:
    """The page says where ``name`` lives: ``deepgym.x.name``, or an import of it."""
    qualified = re.search(rf"\bdeepgym(?:\.\w+)+\.{name}\b", page_text)
    imported = re.search(rf"^\s*from deepgym(?:\.\w+)+ import [^\n]*\b{name}\b", page_text, re.M)
    return bool(qualified or imported)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_the_docs_mention_is_importable(page: Path) -> None:
    import builtins

    import deepgym

    text = page.read_text(encoding="utf-8")
    spans = [m[1].strip() for m in _SPAN.finditer(_prose_keeping_spans(page))]
    missing = []
    for span in spans:
        if _DOTTED.match(span):
            if not _resolves(span):
                missing.append(span)
            continue
        m = _CLASS.match(span)
        if m is None:
            continue
        name = m["name"]
        known = hasattr(deepgym, name) or hasattr(builtins, name) or name in FOREIGN
        if not known and not _names_its_module(text, name):
            missing.append(span)
    assert not missing, (
        f"{page.relative_to(ROOT)} mentions names that are not importable from deepgym and whose "
        f"module it does not name: {sorted(set(missing))}"
    )


def _prose_keeping_spans(page: Path) -> str:
    """The page without its fenced blocks (code spans kept)."""
    text = page.read_text(encoding="utf-8")
    for block in blocks(page):
        text = text.replace(block.code.rstrip("\n"), "")
    return text


def test_the_name_check_catches_what_it_should() -> None:
    assert _resolves("deepgym.integrations.reward.MaskedRate")
    assert not _resolves("deepgym.no_such_module.Thing")
    assert not _resolves("deepgym.RunResult.no_such_attribute")
    assert _names_its_module("see `deepgym.grpo.GroupPipeline`", "GroupPipeline")
    assert _names_its_module("from deepgym.sandbox.base import Job, RawRun\n", "RawRun")
    assert not _names_its_module("`GroupPipeline` alone", "GroupPipeline")
