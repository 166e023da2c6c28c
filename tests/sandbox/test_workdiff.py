"""The diff of an agent's work dir (``deepgym.sandbox.workdiff``), as properties over any names
and bytes: identical trees give nothing, each file that differs is named exactly once (and no
other), and the text depends only on the two trees."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from deepgym.sandbox.workdiff import work_diff

Tree = dict[str, bytes]

_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")

names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0\n"),
    min_size=1,
    max_size=12,
).filter(lambda n: n not in (".", "..", "__pycache__", "sub", "deep") and len(n.encode()) <= 200)
"""A file's name: anything a file system takes (folders ``sub`` and ``deep`` hold the nested
ones)."""
paths = st.tuples(st.sampled_from(["", "sub/", "sub/deep/"]), names).map("".join)
contents = st.one_of(st.binary(max_size=64), st.text(max_size=64).map(str.encode))


@st.composite
def tree_pairs(draw: st.DrawFn) -> tuple[Tree, Tree]:
    """A seed and a work dir over a shared pool of paths: files kept, changed, added, removed."""
    pool = draw(st.lists(paths, min_size=1, max_size=6, unique=True))
    seed = draw(st.dictionaries(st.sampled_from(pool), contents, max_size=6))
    work = draw(st.dictionaries(st.sampled_from(pool), contents, max_size=6))
    for name in draw(st.lists(st.sampled_from(pool), max_size=3)):
        if name in seed:  # an unchanged file too, most of the time
            work[name] = seed[name]
    return seed, work


@contextmanager
def trees(*contents: Tree, reverse: bool = False) -> Iterator[list[Path]]:
    """Each tree written to a folder of its own (in sorted or reverse order of its names)."""
    root = Path(tempfile.mkdtemp(prefix="workdiff-"))
    try:
        dirs = []
        for i, tree in enumerate(contents):
            d = root / str(i)
            d.mkdir()
            for name in sorted(tree, reverse=reverse):
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_bytes(tree[name])
            dirs.append(d)
        yield dirs
    finally:
        shutil.rmtree(root)


def named(diff: str) -> list[str]:
    """Every file the diff names, once per mention, read by the hunks' own line counts (so that
    no content line is taken for a header)."""
    assert diff == "" or diff.endswith("\n")
    lines = diff.split("\n")[:-1]
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("Binary files a/") and lines[i].endswith(" differ"):
            body = lines[i].removeprefix("Binary files a/").removesuffix(" differ")
            name = body[: (len(body) - len(" and b/")) // 2]
            assert body == f"{name} and b/{name}"
            out.append(name)
            i += 1
            continue
        old, new = lines[i], lines[i + 1]
        assert old.startswith("--- ") and new.startswith("+++ "), (old, new)
        a, b = old[4:], new[4:]
        assert a == "/dev/null" or a.startswith("a/")
        assert b == "/dev/null" or b.startswith("b/")
        assert "/dev/null" in (a, b) or a[2:] == b[2:]
        out.append(b[2:] if b != "/dev/null" else a[2:])
        i += 2
        while i < len(lines) and (hunk := _HUNK.fullmatch(lines[i])):
            left_old = int(hunk[1] or 1)
            left_new = int(hunk[2] or 1)
            i += 1
            while left_old or left_new:
                tag = lines[i][:1]
                assert tag in (" ", "-", "+"), lines[i]
                left_old -= tag in (" ", "-")
                left_new -= tag in (" ", "+")
                i += 1
    return out


@settings(max_examples=60, deadline=None)
@given(tree=st.dictionaries(paths, contents, max_size=6))
def test_identical_trees_have_an_empty_diff(tree: Tree) -> None:
    with trees(tree, tree, reverse=True) as (seed, work):
        assert work_diff(seed, work) == ""
        assert work_diff(work, seed) == ""


@settings(max_examples=150, deadline=None)
@given(pair=tree_pairs())
def test_each_file_that_differs_is_named_exactly_once(pair: tuple[Tree, Tree]) -> None:
    seed_files, work_files = pair
    with trees(seed_files, work_files) as (seed, work):
        diff = work_diff(seed, work)
    differs = {
        n
        for n in seed_files.keys() | work_files.keys()
        if seed_files.get(n) != work_files.get(n)  # an empty file added or removed too
    }
    assert sorted(named(diff)) == sorted(differs)
    assert named(diff) == sorted(named(diff))  # in the order of the names


@settings(max_examples=60, deadline=None)
@given(pair=tree_pairs())
def test_the_diff_depends_only_on_the_two_trees(pair: tuple[Tree, Tree]) -> None:
    seed_files, work_files = pair
    with trees(seed_files, work_files) as (seed, work):
        first = work_diff(seed, work)
        assert work_diff(seed, work) == first
    with trees(seed_files, work_files, reverse=True) as (seed, work):
        assert work_diff(seed, work) == first  # files written in another order


@settings(max_examples=60, deadline=None)
@given(tree=st.dictionaries(paths, contents, min_size=1, max_size=6))
def test_without_a_seed_every_file_is_added(tree: Tree) -> None:
    with trees(tree) as (work,):
        diff = work_diff(None, work)
    assert sorted(named(diff)) == sorted(tree)
    assert "\n--- a/" not in "\n" + diff  # nothing was there before


def test_an_empty_file_added_or_removed_is_named() -> None:
    with trees({"gone.txt": b"", "kept.txt": b"x"}, {"new.txt": b"", "kept.txt": b"x"}) as dirs:
        diff = work_diff(*dirs)
    assert diff == "--- a/gone.txt\n+++ /dev/null\n--- /dev/null\n+++ b/new.txt\n"


def test_a_diff_past_the_cap_is_cut_and_says_so() -> None:
    from deepgym.sandbox.workdiff import DIFF_CAP

    big = {f"f{i}.txt": ("line\n" * 4000).encode() for i in range(20)}
    with trees({}, big) as (seed, work):
        diff = work_diff(seed, work)
    assert len(diff) <= DIFF_CAP + len("\n... (cut)\n")
    assert diff.endswith("\n... (cut)\n")
