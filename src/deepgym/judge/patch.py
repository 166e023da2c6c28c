"""Unified diffs, handled by the trusted verifier: find one in an answer, parse it, apply it.

Pure functions on text and ``{relative path: text}`` maps (no I/O). The verifier process runs
them before any of the answer's code exists anywhere: a patch is data, parsed and applied here, and
only the patched files travel to the solution process, where the checks then call into them.

Outcomes, each a ``PatchError`` whose ``status`` is the report status the contract names:

- ``invalid_patch``: the answer holds no unified diff (no ``---``/``+++`` file header);
- ``patch_apply_failed``: a malformed hunk, a hunk whose lines do not match the file exactly, a
  new file that exists or a deleted file that does not, or a path that leaves the repository
  (absolute, ``..``);
- ``test_infra_tampering``: the diff touches tests or test infrastructure (``TEST_DIRS``,
  ``TEST_FILES``, ``test_*.py``, ``*_test.py``).

Context must match exactly (no fuzz); only a hunk's position may differ from its header, and then
the nearest exact match after the previous hunk is taken. ``\\ No newline at end of file`` is
honoured on both sides.
"""

from __future__ import annotations

import itertools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

TEST_DIRS = frozenset({"tests", "test", ".github"})
TEST_FILES = frozenset(
    {"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py"}
)
NO_NEWLINE = "\\ No newline at end of file"
DEV_NULL = "/dev/null"
GIT_HEADER = "diff --git "
GIT_EXTENDED = (
    "index ",
    "old mode ",
    "new mode ",
    "new file mode ",
    "deleted file mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
    "Binary files ",
    "GIT binary patch",
)


class PatchError(ValueError):
    """The diff cannot be used; ``status`` is the report status for the run."""

    status = "patch_apply_failed"


class NoDiffError(PatchError):
    """The answer holds no unified diff."""

    status = "invalid_patch"


class TamperingError(PatchError):
    """The diff touches tests or test infrastructure."""

    status = "test_infra_tampering"


class Hunk:
    """One ``@@ -a,b +c,d @@`` block: its header numbers and its (tag, line) pairs.

    A line keeps its ``\\n`` unless a ``\\ No newline at end of file`` marker followed it.
    """

    def __init__(self, old_start: int, old_len: int, new_start: int, new_len: int) -> None:
        self.old_start = old_start
        self.old_len = old_len
        self.new_start = new_start
        self.new_len = new_len
        self.lines: list[tuple[str, str]] = []

    def old(self) -> list[str]:
        """The hunk's lines before the change (context and removed)."""
        return [text for tag, text in self.lines if tag != "+"]

    def new(self) -> list[str]:
        """The hunk's lines after the change (context and added)."""
        return [text for tag, text in self.lines if tag != "-"]


class FilePatch:
    """The hunks for one file. ``old_path`` None: a new file; ``new_path`` None: a deletion."""

    def __init__(self, old_path: str | None, new_path: str | None) -> None:
        self.old_path = old_path
        self.new_path = new_path
        self.hunks: list[Hunk] = []

    @property
    def path(self) -> str:
        """The path the patch reads (or creates)."""
        return self.old_path if self.old_path is not None else self.new_path or ""

    def paths(self) -> list[str]:
        """The old and new paths the patch names (one of them may be absent)."""
        return [p for p in (self.old_path, self.new_path) if p is not None]


# -- finding a diff in an answer -------------------------------------------------------------


def _fenced_blocks(text: str) -> Iterator[str]:
    """The contents of each ```-fenced block (any info string), in order."""
    inside = False
    body: list[str] = []
    fence = ""
    for line in text.split("\n"):
        stripped = line.strip()
        if not inside and stripped.startswith("```"):
            inside, fence, body = True, stripped[: len(stripped) - len(stripped.lstrip("`"))], []
        elif inside and stripped.startswith(fence) and stripped.strip("`") == "":
            inside = False
            yield "\n".join(body) + "\n"
        elif inside:
            body.append(line)


def _is_header(line: str, following: str) -> bool:
    return line.startswith("--- ") and following.startswith("+++ ")


def _has_header(text: str) -> bool:
    lines = text.split("\n")
    return any(
        _is_header(a, b) or a.startswith(GIT_HEADER) for a, b in itertools.pairwise([*lines, ""])
    )


def extract_diff(text: str) -> str | None:
    """The unified diff in an answer, or None when it has none.

    Fenced blocks that hold a file header win (all of them, joined: one block per file is
    common); otherwise the whole text is the diff, and the parser skips prose around it.
    """
    blocks = [b for b in _fenced_blocks(text) if _has_header(b)]
    if blocks:
        return "".join(blocks)
    return text if _has_header(text) else None


# -- parsing ----------------------------------------------------------------------------------


def _header_path(line: str) -> str:
    """The path of a ``--- `` / ``+++ `` line, without a timestamp or quotes."""
    raw = line[4:]
    if "\t" in raw:
        raw = raw.split("\t", 1)[0]
    raw = raw.rstrip("\r")
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        raw = raw[1:-1]
    return raw.rstrip()


def _numbers(part: str, where: str) -> tuple[int, int]:
    start, _, length = part.partition(",")
    try:
        a, b = int(start), int(length) if length else 1
    except ValueError:
        raise PatchError(f"{where}: malformed hunk header") from None
    if a < 0 or b < 0:
        raise PatchError(f"{where}: malformed hunk header")
    return a, b


def _hunk_header(line: str, where: str) -> Hunk:
    parts = line.split("@@")
    if len(parts) < 3 or parts[0] != "":
        raise PatchError(f"{where}: malformed hunk header {line[:80]!r}")
    fields = parts[1].split()
    if len(fields) != 2 or fields[0][:1] != "-" or fields[1][:1] != "+":
        raise PatchError(f"{where}: malformed hunk header {line[:80]!r}")
    return Hunk(*_numbers(fields[0][1:], where), *_numbers(fields[1][1:], where))


def _read_hunk(hunk: Hunk, lines: list[str], i: int, where: str) -> int:
    """Fill ``hunk`` from ``lines[i:]`` until its counts are met; return the next index.

    An empty line counts as an empty context line (editors and models drop the lone space). A
    hunk line right after the counts are met means the header miscounts: an error, not prose.
    """
    old = new = 0
    while old < hunk.old_len or new < hunk.new_len:
        if i >= len(lines):
            raise PatchError(f"{where}: the diff ends inside a hunk")
        line = lines[i]
        tag = line[:1] if line else " "
        if line.startswith(NO_NEWLINE[:2]) and hunk.lines:
            _strip_newline(hunk)
            i += 1
            continue
        if tag not in (" ", "-", "+"):
            raise PatchError(f"{where}: unexpected line in a hunk: {line[:80]!r}")
        old += tag != "+"
        new += tag != "-"
        hunk.lines.append((tag, line[1:] + "\n"))
        i += 1
    if i < len(lines) and lines[i].startswith(NO_NEWLINE[:2]) and hunk.lines:
        _strip_newline(hunk)
        i += 1
    if _stray_hunk_line(lines, i):
        raise PatchError(f"{where}: the hunk is longer than its header says")
    return i


def _stray_hunk_line(lines: list[str], i: int) -> bool:
    """A ``+``/``-`` line right after a complete hunk (not the next file's header, not a
    ``-- `` signature line)."""
    if i >= len(lines) or lines[i][:1] not in ("+", "-") or lines[i] == "-- ":
        return False
    return not _is_header(lines[i], lines[i + 1] if i + 1 < len(lines) else "")


def _strip_newline(hunk: Hunk) -> None:
    tag, text = hunk.lines[-1]
    hunk.lines[-1] = (tag, text[:-1] if text.endswith("\n") else text)


def _git_paths(rest: str) -> tuple[str, str]:
    """The two paths of ``diff --git A B`` (equal halves when the path has spaces)."""
    n = (len(rest) - 1) // 2
    if (
        len(rest) % 2 == 1
        and rest[n] == " "
        and rest[:n].partition("/")[2] == rest[n + 1 :].partition("/")[2]
    ):
        return rest[:n], rest[n + 1 :]
    a, _, b = rest.partition(" ")
    return a, b


def _git_section(lines: list[str], i: int) -> tuple[FilePatch | None, int]:
    """A ``diff --git`` section's extended header: a hunkless patch (an empty file created or
    deleted, a mode change: None), or None when ``---``/``+++`` follow; the next index."""
    a, b = _git_paths(lines[i][len(GIT_HEADER) :].rstrip("\r"))
    j = i + 1
    seen: list[str] = []
    while j < len(lines) and lines[j].startswith(GIT_EXTENDED):
        seen.append(lines[j])
        j += 1
    if any(x.startswith(("Binary files ", "GIT binary patch")) for x in seen):
        raise PatchError(f"line {i + 1}: binary patches are not supported")
    if j + 1 < len(lines) and _is_header(lines[j], lines[j + 1]):
        paths = (_header_path(lines[j]), _header_path(lines[j + 1]))
        if paths[0] in (a, DEV_NULL) and paths[1] in (b, DEV_NULL):
            return None, j  # this section's own ---/+++ header follows
    if any(x.startswith(("rename from ", "copy from ")) for x in seen):
        raise PatchError(f"line {i + 1}: a rename or copy without content is not supported")
    if any(x.startswith("new file mode ") for x in seen):
        return FilePatch(None, b), j
    if any(x.startswith("deleted file mode ") for x in seen):
        return FilePatch(a, None), j
    return None, j


def parse_diff(text: str) -> list[FilePatch]:
    """Parse a unified diff (plain or git style) into file patches.

    Lines outside a file's hunks (prose, ``index``, mode lines) are skipped. A git section with
    no hunks creates or deletes an empty file. Raises ``NoDiffError`` when there is no file
    header, ``PatchError`` when a hunk is malformed or a ``---``/``+++`` header has no hunk.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    patches: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(GIT_HEADER):
            hunkless, i = _git_section(lines, i)
            if hunkless is not None:
                patches.append(hunkless)
            continue
        if not _is_header(line, lines[i + 1] if i + 1 < len(lines) else ""):
            i += 1
            continue
        old, new = _header_path(line), _header_path(lines[i + 1])
        fp = FilePatch(None if old == DEV_NULL else old, None if new == DEV_NULL else new)
        if fp.old_path is None and fp.new_path is None:
            raise PatchError(f"line {i + 1}: both sides of the file header are {DEV_NULL}")
        i += 2
        while i < len(lines) and lines[i].startswith("@@"):
            hunk = _hunk_header(lines[i], f"line {i + 1}")
            i = _read_hunk(hunk, lines, i + 1, f"{fp.path}, hunk at line {i + 1}")
            fp.hunks.append(hunk)
        if not fp.hunks:
            raise PatchError(f"{fp.path}: a file header without a hunk")
        patches.append(fp)
    if not patches:
        raise NoDiffError("the answer holds no unified diff")
    _strip_git_prefixes(patches)
    return patches


def _strip_git_prefixes(patches: list[FilePatch]) -> None:
    """``a/x`` / ``b/x`` become ``x`` when every path in the diff carries its git prefix."""
    olds = [p.old_path for p in patches if p.old_path is not None]
    news = [p.new_path for p in patches if p.new_path is not None]
    if all(o.startswith("a/") for o in olds) and all(n.startswith("b/") for n in news):
        for p in patches:
            p.old_path = p.old_path[2:] if p.old_path is not None else None
            p.new_path = p.new_path[2:] if p.new_path is not None else None


# -- checking paths ---------------------------------------------------------------------------


def normalise_path(path: str) -> str:
    """``path`` relative to the repository root, or ``PatchError`` if it could leave it."""
    if not path or "\0" in path or "\\" in path:
        raise PatchError(f"invalid path {path!r}")
    if path.startswith("/") or path.startswith("~"):
        raise PatchError(f"path {path!r} is absolute: paths must stay inside the repository")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise PatchError(f"path {path!r} leaves the repository")
    return "/".join(parts)


def is_test_infra(path: str) -> bool:
    """True for tests and test infrastructure: the files a patch may not touch."""
    parts = path.split("/")
    name = parts[-1]
    if any(p in TEST_DIRS for p in parts[:-1]) or name in TEST_FILES:
        return True
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def check_paths(patches: list[FilePatch]) -> None:
    """Normalise every path in place; raise for an escape, then for tests touched."""
    for p in patches:
        p.old_path = normalise_path(p.old_path) if p.old_path is not None else None
        p.new_path = normalise_path(p.new_path) if p.new_path is not None else None
    for p in patches:
        for path in p.paths():
            if is_test_infra(path):
                raise TamperingError(f"the diff touches test infrastructure: {path}")


# -- applying ---------------------------------------------------------------------------------


def _split_lf(text: str) -> list[str]:
    """Lines with their ``\n`` (the last one may lack it); only ``\n`` ends a line."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _find(lines: list[str], block: list[str], want: int, low: int) -> int:
    """The start of ``block`` in ``lines`` at or after ``low``, nearest to ``want``; -1 if none.

    A block of no lines (an insertion without context) goes exactly where its header says.
    """
    if not block:
        return want if low <= want <= len(lines) else -1
    best = -1
    for pos in range(low, len(lines) - len(block) + 1):
        if lines[pos : pos + len(block)] == block and (
            best < 0 or abs(pos - want) < abs(best - want)
        ):
            best = pos
    return best


def apply_file(text: str, fp: FilePatch) -> str:
    """``text`` with ``fp``'s hunks applied, in order; ``PatchError`` if a hunk does not match."""
    lines = _split_lf(text)
    out: list[str] = []
    pos = 0
    for n, hunk in enumerate(fp.hunks, 1):
        old = hunk.old()
        want = hunk.old_start - 1 if hunk.old_len else hunk.old_start
        at = _find(lines, old, max(want, 0), pos)
        if at < 0:
            raise PatchError(f"{fp.path}: hunk {n} (@@ -{hunk.old_start}) does not apply")
        out.extend(lines[pos:at])
        out.extend(hunk.new())
        pos = at + len(old)
    out.extend(lines[pos:])
    if any(not line.endswith("\n") for line in out[:-1]):
        raise PatchError(f"{fp.path}: a line without a newline in the middle of the file")
    return "".join(out)


def apply_diff(files: dict[str, str], patches: list[FilePatch]) -> dict[str, str]:
    """A new file map with every patch applied; the input is left as it was."""
    result = dict(files)
    for fp in patches:
        if fp.old_path is None:
            if fp.new_path in result:
                raise PatchError(f"{fp.new_path}: the diff creates a file that exists")
            source = ""
        else:
            if fp.old_path not in result:
                raise PatchError(f"{fp.old_path}: no such file in the repository")
            source = result[fp.old_path]
        patched = apply_file(source, fp)
        if fp.old_path is not None:
            del result[fp.old_path]
        if fp.new_path is None:
            if patched:
                raise PatchError(f"{fp.old_path}: the diff deletes the file but leaves lines")
            continue
        if fp.new_path in result:
            raise PatchError(f"{fp.new_path}: the diff renames onto a file that exists")
        result[fp.new_path] = patched
    return result


def patch_repo(answer: str, files: dict[str, str]) -> dict[str, str]:
    """Find, parse, check and apply the diff in ``answer`` to ``files``: the patched file map.

    Raises ``NoDiffError``, ``PatchError`` or ``TamperingError`` (their ``status`` names the
    report status).
    """
    diff = extract_diff(answer)
    if diff is None:
        raise NoDiffError("the answer holds no unified diff")
    patches = parse_diff(diff)
    check_paths(patches)
    return apply_diff(files, patches)


def make_diff(old: dict[str, str], new: dict[str, str]) -> str:
    """A git-style unified diff from ``old`` to ``new`` (for authors and tests)."""
    import difflib

    chunks: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        chunks.append(f"{GIT_HEADER}a/{path} b/{path}\n")
        if a is None:
            chunks.append("new file mode 100644\n")
        elif b is None:
            chunks.append("deleted file mode 100644\n")
        body = difflib.unified_diff(
            _split_lf(a or ""),
            _split_lf(b or ""),
            "a/" + path if a is not None else DEV_NULL,
            "b/" + path if b is not None else DEV_NULL,
        )
        for line in body:
            if line.endswith("\n"):
                chunks.append(line)
            else:
                chunks.append(line + "\n" + NO_NEWLINE + "\n")
    return "".join(chunks)
