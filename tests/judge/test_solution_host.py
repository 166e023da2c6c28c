"""The solution host's patch-task ops: write_files stays inside its root; dotted names resolve."""

from __future__ import annotations

import os
import os.path
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepgym.judge import solution_host


@pytest.fixture
def clean_path() -> Iterator[None]:
    saved = list(sys.path)
    modules = set(sys.modules)
    yield
    sys.path[:] = saved
    for name in set(sys.modules) - modules:
        del sys.modules[name]


def test_write_files_writes_and_goes_first_on_sys_path(tmp_path: Path, clean_path: None) -> None:
    root = tmp_path / "repo"
    files = {
        "dgprobe_pkg/__init__.py": "",
        "dgprobe_pkg/mod.py": "def f():\n    return 'patched'\r\n",
    }
    assert solution_host.write_files(files, str(root)) == 2
    assert sys.path[0] == str(root.resolve())
    assert (root / "dgprobe_pkg/mod.py").read_bytes() == b"def f():\n    return 'patched'\r\n"
    fn = solution_host._resolve(None, "dgprobe_pkg.mod:f")
    assert fn() == "patched"


@pytest.mark.parametrize(
    "path", ["../x.py", "/abs.py", "a//b.py", "a/./b.py", "a/../../b.py", "", "x\0.py"]
)
def test_write_files_refuses_paths_that_leave(tmp_path: Path, path: str) -> None:
    root = tmp_path / "repo"
    with pytest.raises(ValueError):
        solution_host.write_files({"ok.py": "", path: "x"}, str(root))
    assert not (root / "ok.py").exists()  # nothing is written unless every path is good


def test_write_files_does_not_follow_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="leaves"):
        solution_host.write_files({"link/x.py": "x"}, str(root))
    (root / "file.py").symlink_to(outside / "target.py")
    with pytest.raises(OSError):
        solution_host.write_files({"file.py": "x"}, str(root))
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("files", [["a.py"], {"a.py": b"bytes"}, {1: "x"}])
def test_write_files_takes_a_map_of_texts(tmp_path: Path, files: object) -> None:
    with pytest.raises(ValueError):
        solution_host.write_files(files, str(tmp_path / "repo"))


def test_resolve_names() -> None:
    module = SimpleNamespace(add=lambda a, b: a + b)
    assert solution_host._resolve(module, "add")(1, 2) == 3
    assert solution_host._resolve(None, "os.path:join") is os.path.join
    assert solution_host._resolve(None, "os:path.join") is os.path.join
    with pytest.raises(NameError, match="module:attribute"):
        solution_host._resolve(None, "add")
    with pytest.raises(AttributeError):
        solution_host._resolve(None, "os:no_such_thing")
    with pytest.raises(ModuleNotFoundError):
        solution_host._resolve(None, "no_such_module_here:f")


@pytest.mark.parametrize("places", [(100, 101), (101, 100), (4, 3), (3, 101), (5, 3)])
def test_move_fds_never_overwrites_a_descriptor_before_moving_it(places: tuple[int, int]) -> None:
    """The host's pipes can sit anywhere (past 100 under load): each must end up where asked."""
    import subprocess
    import sys

    code = f"""
import os, sys
from deepgym.judge.solution_host import move_fds
made = [os.pipe() for _ in range(2)]
pipes = []
for k, (r, w) in enumerate(made):  # out of the way first, so placing them clobbers nothing
    os.dup2(r, 200 + 2 * k)
    os.dup2(w, 201 + 2 * k)
    os.close(r)
    os.close(w)
    pipes.append((200 + 2 * k, 201 + 2 * k))
wanted = {places!r}
for (r, w), n in zip(pipes, wanted):
    os.dup2(r, n)
    os.close(r)
for i, (r, w) in enumerate(pipes):
    os.write(w, str(i).encode())
move_fds(list(wanted), 10)
print(os.read(10, 1).decode() + os.read(11, 1).decode())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "01"


@pytest.mark.parametrize(
    ("reads", "lines"),
    [
        ([b'{"a":1}\n{"b":2}\n'], [b'{"a":1}\n', b'{"b":2}\n']),  # two lines in one read
        ([b'{"a"', b":1}", b"\n"], [b'{"a":1}\n']),  # one line over three reads
        ([b"x\ny", b"z\n", b"tail"], [b"x\n", b"yz\n", b"tail"]),  # a last line, no newline
        ([], []),
    ],
)
def test_lines_splits_what_each_read_returns_at_newlines(
    reads: list[bytes], lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    pending = list(reads)

    def read(fd: int, n: int) -> bytes:
        assert fd == 7
        return pending.pop(0) if pending else b""

    monkeypatch.setattr(solution_host, "os", SimpleNamespace(read=read))
    assert list(solution_host._lines(7)) == lines


def test_write_all_writes_past_the_pipe_buffer() -> None:
    r, w = os.pipe()
    data = os.urandom(1 << 20)  # four times a default pipe buffer: partial writes happen
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child writes and leaves
        os.close(r)
        solution_host.write_all(w, data)
        os._exit(0)
    os.close(w)
    got = b""
    while chunk := os.read(r, 1 << 16):
        got += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert got == data
