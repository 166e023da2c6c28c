"""The verifier's diff handling: find, parse, check and apply unified diffs exactly, or fail."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.judge import patch
from deepgym.judge.patch import NoDiffError, PatchError, TamperingError

line_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
    max_size=12,
)
# Few distinct lines, so the diffs have repeated context and real hunks.
lines = st.lists(st.sampled_from(["a", "b", "c", "", "def f():", "    return 1"]) | line_text)


def text_of(body: list[str], final_newline: bool) -> str:
    if not body:
        return ""
    return "\n".join(body) + ("\n" if final_newline else "")


texts = st.builds(text_of, lines, st.booleans())

REPO = {
    "pkg/__init__.py": "",
    "pkg/core.py": "def add(a, b):\n    return a - b\n\n\ndef neg(x):\n    return -x\n",
    "README.md": "pkg\n",
}
FIX = (
    "--- a/pkg/core.py\n"
    "+++ b/pkg/core.py\n"
    "@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n"
    "-    return a - b\n"
    "+    return a + b\n"
)


# -- round trips ------------------------------------------------------------------------------


@given(texts, texts)
def test_make_diff_applies_back_exactly(old: str, new: str) -> None:
    diff = patch.make_diff({"f.py": old}, {"f.py": new})
    if old == new:
        assert diff == ""
        return
    assert patch.patch_repo(diff, {"f.py": old}) == {"f.py": new}


@given(lines, lines, st.integers(0, 3))
def test_difflib_output_applies_back(a: list[str], b: list[str], context: int) -> None:
    """Plain difflib output (no git prefixes, any context size) with newline-terminated lines."""
    old = [x + "\n" for x in a]
    new = [x + "\n" for x in b]
    diff = "".join(difflib.unified_diff(old, new, "src/mod.py", "src/mod.py", n=context))
    files = {"src/mod.py": "".join(old)}
    if old == new:
        with pytest.raises(NoDiffError):
            patch.patch_repo(diff, files)
        return
    assert patch.patch_repo(diff, files) == {"src/mod.py": "".join(new)}


@given(st.lists(line_text, min_size=1, max_size=12, unique=True), lines, st.data())
def test_a_changed_context_line_makes_the_diff_fail(
    a: list[str], b: list[str], data: st.DataObject
) -> None:
    """Exact context: with distinct lines, changing any line a hunk reads makes it not apply."""
    old, new = text_of(a, True), text_of(b, True)
    diff = patch.make_diff({"f.py": old}, {"f.py": new})
    if not diff:
        return
    (fp,) = patch.parse_diff(diff)
    read = [i for h in fp.hunks for i in range(h.old_start - 1, h.old_start - 1 + h.old_len)]
    if not read:
        return
    i = data.draw(st.sampled_from(read))
    changed = [*a[:i], a[i] + "\x00changed", *a[i + 1 :]]
    with pytest.raises(PatchError, match="does not apply"):
        patch.patch_repo(diff, {"f.py": text_of(changed, True)})


@given(st.lists(texts, min_size=1, max_size=4), st.lists(texts, min_size=1, max_size=4))
def test_multi_file_diff_with_new_and_deleted_files(olds: list[str], news: list[str]) -> None:
    before = {f"pkg/m{i}.py": t for i, t in enumerate(olds)}
    after = {f"pkg/m{i}.py": t for i, t in enumerate(news)}
    diff = patch.make_diff(before, after)
    if not diff:
        return
    assert patch.patch_repo(diff, before) == after


# -- finding the diff -------------------------------------------------------------------------


def test_diff_inside_a_fenced_block_with_prose() -> None:
    answer = f"The sign is wrong. Here is the fix:\n\n```diff\n{FIX}```\n\nThat is all.\n"
    out = patch.patch_repo(answer, REPO)
    assert out["pkg/core.py"].startswith("def add(a, b):\n    return a + b\n")
    assert out["README.md"] == REPO["README.md"]


def test_bare_diff_with_prose_around_it() -> None:
    answer = "Fix below.\n" + FIX + "\nThis makes add add.\n"
    assert "a + b" in patch.patch_repo(answer, REPO)["pkg/core.py"]


def test_one_fenced_block_per_file() -> None:
    new_file = "--- /dev/null\n+++ b/pkg/extra.py\n@@ -0,0 +1 @@\n+X = 1\n"
    answer = f"```diff\n{FIX}```\nand\n```patch\n{new_file}```\n"
    out = patch.patch_repo(answer, REPO)
    assert out["pkg/extra.py"] == "X = 1\n"
    assert "a + b" in out["pkg/core.py"]


def test_fenced_blocks_without_a_diff_are_ignored() -> None:
    answer = f"```python\nprint('hi')\n```\n{FIX}"
    assert "a + b" in patch.patch_repo(answer, REPO)["pkg/core.py"]


@pytest.mark.parametrize(
    "answer",
    ["", "   \n", "I could not find the bug.", "```python\ndef add(a, b):\n    return a + b\n```"],
)
def test_no_diff_is_invalid_patch(answer: str) -> None:
    assert patch.extract_diff(answer) is None
    with pytest.raises(NoDiffError) as info:
        patch.patch_repo(answer, REPO)
    assert info.value.status == "invalid_patch"


# -- parsing ----------------------------------------------------------------------------------


def test_git_headers_and_timestamps() -> None:
    diff = (
        "diff --git a/pkg/core.py b/pkg/core.py\n"
        "index 111..222 100644\n"
        "--- a/pkg/core.py\t2024-01-01 00:00:00\n"
        "+++ b/pkg/core.py\t2024-01-02 00:00:00\n"
        "@@ -1,2 +1,2 @@ def add\n"
        " def add(a, b):\n"
        "-    return a - b\n"
        "+    return a + b\n"
    )
    (fp,) = patch.parse_diff(diff)
    assert (fp.old_path, fp.new_path) == ("pkg/core.py", "pkg/core.py")
    assert len(fp.hunks) == 1 and fp.hunks[0].old_len == 2


def test_paths_without_git_prefixes_are_kept() -> None:
    (fp,) = patch.parse_diff(FIX.replace("a/pkg", "pkg").replace("b/pkg", "pkg"))
    assert fp.path == "pkg/core.py"


def test_blank_context_line_without_its_space() -> None:
    diff = (
        "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -2,4 +2,4 @@\n"
        "     return a - b\n\n\n-def neg(x):\n+def negate(x):\n"
    )
    out = patch.patch_repo(diff, REPO)
    assert "def negate(x):\n" in out["pkg/core.py"]


def test_no_newline_at_end_of_file_on_both_sides() -> None:
    files = {"f.txt": "one\ntwo"}
    diff = (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n"
        "+three\n\\ No newline at end of file\n"
    )
    assert patch.patch_repo(diff, files) == {"f.txt": "one\nthree"}
    adds_newline = (
        "--- a/f.txt\n+++ b/f.txt\n@@ -2 +2 @@\n-two\n\\ No newline at end of file\n+two\n"
    )
    assert patch.patch_repo(adds_newline, files) == {"f.txt": "one\ntwo\n"}


def test_the_marker_matters() -> None:
    """Without the marker the old side says ``two\\n``, which the file does not have."""
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -2 +2 @@\n-two\n+three\n"
    with pytest.raises(PatchError):
        patch.patch_repo(diff, {"f.txt": "one\ntwo"})


@pytest.mark.parametrize(
    "diff",
    [
        FIX[: FIX.index("-    return")],  # ends inside a hunk
        FIX.replace("@@ -1,2 +1,2 @@", "@@ -1,2 +1,x @@"),
        FIX.replace("@@ -1,2 +1,2 @@", "@@ one two @@"),
        FIX.replace("@@ -1,2 +1,2 @@", "@@ -1,1 +1,1 @@"),  # longer than its header
        FIX.replace(" def add", "?def add"),
        "--- a/pkg/core.py\n+++ b/pkg/core.py\nno hunk here\n",
        "--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n",
    ],
)
def test_garbled_diffs_fail_to_apply(diff: str) -> None:
    with pytest.raises(PatchError) as info:
        patch.patch_repo(diff, REPO)
    assert info.value.status == "patch_apply_failed"
    assert not isinstance(info.value, NoDiffError | TamperingError)


# -- applying ---------------------------------------------------------------------------------


def test_context_must_match_exactly() -> None:
    stale = FIX.replace("-    return a - b", "-    return a-b")
    with pytest.raises(PatchError, match="does not apply"):
        patch.patch_repo(stale, REPO)
    trailing_space = FIX.replace(" def add(a, b):", " def add(a, b): ")
    with pytest.raises(PatchError, match="does not apply"):
        patch.patch_repo(trailing_space, REPO)


def test_a_hunk_may_sit_at_another_line_than_its_header_says() -> None:
    moved = FIX.replace("@@ -1,2 +1,2 @@", "@@ -40,2 +40,2 @@")
    assert "a + b" in patch.patch_repo(moved, REPO)["pkg/core.py"]


def test_the_nearest_match_wins() -> None:
    files = {"f": "x\ny\nx\ny\nx\ny\n"}
    diff = "--- a/f\n+++ b/f\n@@ -5,2 +5,2 @@\n x\n-y\n+z\n"
    assert patch.patch_repo(diff, files) == {"f": "x\ny\nx\ny\nx\nz\n"}


def test_hunks_apply_in_order() -> None:
    files = {"f": "a\nb\na\nb\n"}
    diff = "--- a/f\n+++ b/f\n@@ -3,2 +3,2 @@\n a\n-b\n+c\n@@ -1,2 +1,2 @@\n a\n-b\n+d\n"
    with pytest.raises(PatchError):  # the second hunk cannot go back before the first
        patch.patch_repo(diff, files)


def test_missing_file_new_file_that_exists_and_deletion() -> None:
    missing = FIX.replace("pkg/core.py", "pkg/other.py")
    with pytest.raises(PatchError, match="no such file"):
        patch.patch_repo(missing, REPO)
    exists = "--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+hi\n"
    with pytest.raises(PatchError, match="exists"):
        patch.patch_repo(exists, REPO)
    delete = "--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-pkg\n"
    assert "README.md" not in patch.patch_repo(delete, REPO)
    partial = "--- a/pkg/core.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-def add(a, b):\n"
    with pytest.raises(PatchError, match="leaves lines"):
        patch.patch_repo(partial, REPO)


def test_the_input_map_is_not_changed() -> None:
    before = dict(REPO)
    patch.patch_repo(FIX, REPO)
    assert before == REPO


# -- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "../outside.py", "pkg/../../x.py", "~/x.py", "a\\b.py", "", "./"],
)
def test_paths_that_leave_the_repo(path: str) -> None:
    diff = f"--- /dev/null\n+++ {path}\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(PatchError) as info:
        patch.patch_repo(diff, REPO)
    assert info.value.status == "patch_apply_failed"


def test_paths_are_normalised() -> None:
    assert patch.normalise_path("./pkg//core.py") == "pkg/core.py"


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_core.py",
        "pkg/tests/helpers.py",
        "test/data.txt",
        "test_core.py",
        "pkg/core_test.py",
        "conftest.py",
        "pkg/conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "noxfile.py",
        ".github/workflows/ci.yml",
    ],
)
def test_test_infrastructure_is_tampering(path: str) -> None:
    assert patch.is_test_infra(path)
    diff = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(TamperingError) as info:
        patch.patch_repo(FIX + diff, REPO)
    assert info.value.status == "test_infra_tampering"


@pytest.mark.parametrize("path", ["pkg/testing.py", "pkg/contest.py", "latest.py", "tests.py"])
def test_ordinary_files_are_not_test_infrastructure(path: str) -> None:
    assert not patch.is_test_infra(path)


def test_deleting_a_test_is_tampering_too() -> None:
    files = {**REPO, "tests/test_core.py": "assert True\n"}
    diff = "--- a/tests/test_core.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-assert True\n"
    with pytest.raises(TamperingError):
        patch.patch_repo(diff, files)


# -- git extended headers ---------------------------------------------------------------------


def test_git_creates_and_deletes_empty_files_without_hunks() -> None:
    files = {**REPO, "pkg/old.py": ""}
    diff = (
        "diff --git a/pkg/sub/__init__.py b/pkg/sub/__init__.py\n"
        "new file mode 100644\n"
        "index 0000000..e69de29\n"
        "diff --git a/pkg/old.py b/pkg/old.py\n"
        "deleted file mode 100644\n"
        "index e69de29..0000000\n" + FIX
    )
    out = patch.patch_repo(diff, files)
    assert out["pkg/sub/__init__.py"] == ""
    assert "pkg/old.py" not in out
    assert "a + b" in out["pkg/core.py"]


def test_git_mode_change_alone_changes_nothing() -> None:
    diff = "diff --git a/README.md b/README.md\nold mode 100644\nnew mode 100755\n" + FIX
    out = patch.patch_repo(diff, REPO)
    assert out["README.md"] == REPO["README.md"]


@pytest.mark.parametrize(
    "section",
    [
        "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nBinary files a/x and b/x differ\n",
        "diff --git a/README.md b/DOCS.md\nsimilarity index 100%\n"
        "rename from README.md\nrename to DOCS.md\n",
    ],
)
def test_binary_and_bare_renames_are_refused(section: str) -> None:
    with pytest.raises(PatchError) as info:
        patch.patch_repo(section + FIX, REPO)
    assert info.value.status == "patch_apply_failed"


def test_a_format_patch_signature_is_not_a_hunk_line() -> None:
    answer = "Subject: [PATCH] fix add\n---\n" + FIX + "-- \n2.43.0\n"
    assert "a + b" in patch.patch_repo(answer, REPO)["pkg/core.py"]


def test_a_hunk_line_past_the_header_count_is_refused() -> None:
    too_long = FIX + "+    # one more line the header does not count\n"
    with pytest.raises(PatchError, match="longer than its header"):
        patch.patch_repo(too_long, REPO)


# -- robustness -------------------------------------------------------------------------------

FRAGMENTS = [
    "--- a/pkg/core.py",
    "+++ b/pkg/core.py",
    "--- /dev/null",
    "+++ /dev/null",
    "+++ b/../x",
    "diff --git a/pkg/core.py b/pkg/core.py",
    "diff --git ",
    "new file mode 100644",
    "deleted file mode 100644",
    "rename from x",
    "@@ -1,2 +1,2 @@",
    "@@ -0,0 +1 @@",
    "@@ -1 +0,0 @@",
    "@@ -99,3 +1,-1 @@",
    "@@",
    " def add(a, b):",
    "-    return a - b",
    "+    return a + b",
    "\\ No newline at end of file",
    "```diff",
    "```",
    "",
]


@given(st.lists(st.sampled_from(FRAGMENTS) | line_text, max_size=30))
def test_any_text_either_applies_or_raises_patch_error(parts: list[str]) -> None:
    """The verifier runs this on hostile text after the answer is in play: any other exception
    would be a crash blamed on the answer, so there must be none."""
    try:
        out = patch.patch_repo("\n".join(parts), REPO)
    except PatchError as exc:
        assert exc.status in ("invalid_patch", "patch_apply_failed", "test_infra_tampering")
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in out.items())
    assert all(not k.startswith("/") and ".." not in k.split("/") for k in out)
