"""``judge.files``: a run's files written beneath its work dir, and read back from it without
following a link, waiting on a FIFO, or passing the room for them."""

from __future__ import annotations

import base64
import os
import socket
from pathlib import Path

import pytest

from deepgym.judge import files


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "non-empty"),
        ("/etc/passwd", "absolute"),
        ("../up", "'..'"),
        ("a/../../b", "'..'"),
        ("a//b", "empty"),
        ("./a", "'.'"),
        ("a\0b", "NUL"),
        ("x" * (files.MAX_NAME_CHARS + 1), "at most"),
        ("solution.py", "program's own"),
    ],
)
def test_names_that_could_leave_the_work_dir_are_refused(name: str, says: str) -> None:
    assert says in files.check_name(name)


@pytest.mark.parametrize("name", ["a.txt", "deep/er/file.bin", "sub/solution.py", ".hidden"])
def test_plain_relative_names_are_taken(name: str) -> None:
    assert files.check_name(name) == ""


def test_put_writes_nested_files_and_refuses_a_bad_name(tmp_path: Path) -> None:
    files.put(str(tmp_path), {"a.txt": _b64(b"one"), "d/e/f.bin": _b64(bytes(range(256)))})
    assert (tmp_path / "a.txt").read_bytes() == b"one"
    assert (tmp_path / "d/e/f.bin").read_bytes() == bytes(range(256))
    with pytest.raises(ValueError, match=r"'\.\.'"):
        files.put(str(tmp_path), {"../escape": _b64(b"x")})
    assert not (tmp_path.parent / "escape").exists()


def test_put_never_writes_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "d").symlink_to(outside)
    (work / "f").symlink_to(outside / "target")
    for name in ("d/x", "f"):
        with pytest.raises(OSError):
            files.put(str(work), {name: _b64(b"x")})
    assert list(outside.iterdir()) == []


def _dir(path: Path) -> int:
    return os.open(path, os.O_PATH | os.O_DIRECTORY)


def test_fetch_reads_regular_files_only_and_follows_no_link(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("not yours")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "out.txt").write_text("mine")
    (work / "sub" / "deep.txt").write_text("deeper")
    (work / "link").symlink_to(secret)
    (work / "linkdir").symlink_to(tmp_path)
    os.mkfifo(work / "fifo")  # opened non-blocking: never waited on
    fd = _dir(work)
    try:
        names = ["out.txt", "sub/deep.txt", "link", "linkdir/secret", "fifo", "missing", "sub"]
        got, over = files.fetch(fd, names)
    finally:
        os.close(fd)
    assert {k: base64.b64decode(v) for k, v in got.items()} == {
        "out.txt": b"mine",
        "sub/deep.txt": b"deeper",
    }
    assert over == []


def test_fetch_names_what_does_not_fit_and_never_cuts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "FETCH_MAX_BYTES", 10)
    (tmp_path / "big").write_bytes(b"x" * 11)
    (tmp_path / "a").write_bytes(b"y" * 6)
    (tmp_path / "b").write_bytes(b"z" * 6)  # fits alone, not after "a"
    (tmp_path / "c").write_bytes(b"w" * 4)
    fd = _dir(tmp_path)
    try:
        got, over = files.fetch(fd, ["big", "a", "b", "c"])
    finally:
        os.close(fd)
    assert sorted(got) == ["a", "c"] and over == ["big", "b"]


def test_the_io_socket_carries_the_files_and_hands_back_the_work_dir(tmp_path: Path) -> None:
    """Both sides, in one process: the judge's message, the solution's write and its work
    dir's descriptor, through which the judge reads what the program left (the folder itself
    renamed away meanwhile: the descriptor, not the path, is what counts)."""
    judge, solution = socket.socketpair()
    work = tmp_path / "work"
    work.mkdir()
    message = files.message({"in.txt": _b64(b"given")}, fetch=True)
    judge.sendall(message)
    files.end_message(judge.fileno())
    files.serve_io(solution.detach(), str(work))  # (closes its end)
    assert (work / "in.txt").read_bytes() == b"given"
    (work / "out.txt").write_text("made")
    work.rename(tmp_path / "moved")
    got = files.take_dir(judge.fileno())
    assert got is not None
    try:
        fetched, _ = files.fetch(got, ["out.txt", "in.txt"])
    finally:
        os.close(got)
        judge.close()
    assert base64.b64decode(fetched["out.txt"]) == b"made"


def test_no_message_means_no_files_and_no_work_dir(tmp_path: Path) -> None:
    judge, solution = socket.socketpair()
    assert files.message({}, fetch=False) == b""
    files.end_message(judge.fileno())
    files.serve_io(solution.detach(), str(tmp_path))
    assert files.take_dir(judge.fileno()) is None
    judge.close()
    assert list(tmp_path.iterdir()) == []
