"""A Harbor task's files are checked before the import reads them (``deepgym.envs.harbor.files``):
a file past the limit, a task past its total, a named pipe or a looping link is refused in one
line with its memory untouched, and a refused import leaves nothing where it was to write.

The big files are sparse (``os.truncate``): they cost no disk, and a reader that reads them
anyway shows in the child's peak memory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.envs.test_harbor import write_task

from deepgym.envs.harbor import files as harbor_files
from deepgym.envs.harbor import import_harbor_task
from deepgym.envs.harbor.image import seed_work
from deepgym.exceptions import ConfigError

MIB = 2**20
HUGE = 1024 * MIB
"""A sparse file this big: the 300 MB instruction of the report, and more."""


def nothing_left(parent: Path, task: Path) -> None:
    """``parent`` holds the task folder and nothing of the refused import."""
    assert sorted(p.name for p in parent.iterdir()) == [task.name]


def test_a_huge_instruction_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """The report's case, through the command line: the import's peak memory stays far below
    the file's size, and no ``task.md`` is left."""
    task = write_task(tmp_path, {})
    os.truncate(task / "instruction.md", HUGE)
    log = tmp_path.parent / f"{tmp_path.name}-import.log"
    peak = tmp_path.parent / f"{tmp_path.name}-peak"
    # The import's own peak, VmHWM, which exec started afresh, written as it exits (a forked
    # child's ru_maxrss counts the memory of the test process it was forked from).
    argv = ["deepgym", "harbor", "import", str(task), str(tmp_path / "o")]
    code = (
        "import atexit, sys\n"
        "def peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        f"            open({str(peak)!r}, 'w').write(line.split()[1])\n"
        "atexit.register(peak)\n"
        f"sys.argv = {argv!r}\n"
        "from deepgym.cli import main\n"
        "main()\n"
    )
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
    said = log.read_text()
    log.unlink()
    assert done.returncode == 2, said
    assert said.strip() == (
        "Error: hello: instruction.md is 1024 MiB, past the import's limit of 64 MiB a file"
    )
    kib = int(peak.read_text())
    peak.unlink()
    assert kib * 1024 < 256 * MIB, kib  # measured: about 45 MiB
    nothing_left(tmp_path, task)


@pytest.mark.parametrize(
    "rel",
    [
        "instruction.md",
        "task.toml",
        "environment/Dockerfile",
        "environment/greeting.txt",
        "environment/data/blob.bin",
        "tests/test.sh",
        "tests/fixtures/blob.bin",
        "solution/blob.bin",
    ],
)
def test_a_file_past_the_limit_is_refused_wherever_it_is(tmp_path: Path, rel: str) -> None:
    task = write_task(tmp_path, {rel: ""})
    os.truncate(task / rel, harbor_files.MAX_FILE_BYTES + 1)
    with pytest.raises(ConfigError) as info:
        import_harbor_task(task, tmp_path / "out")
    assert str(info.value) == (
        f"hello: {rel} is 67108865 bytes, past the import's limit of 64 MiB a file"
    )
    nothing_left(tmp_path, task)


def test_files_past_the_limit_of_a_task_together_are_refused(tmp_path: Path) -> None:
    task = write_task(tmp_path, {f"tests/part{i}.bin": "" for i in range(9)})
    for i in range(9):
        os.truncate(task / f"tests/part{i}.bin", 60 * MIB)
    with pytest.raises(ConfigError, match=r"^hello: its files come to more than the import's "):
        import_harbor_task(task, tmp_path / "out")
    nothing_left(tmp_path, task)


def test_a_solution_past_one_file_together_is_refused(tmp_path: Path) -> None:
    """The reference agent carries every file of ``solution/`` in one file."""
    task = write_task(tmp_path, {"solution/a.bin": "", "solution/b.bin": ""})
    os.truncate(task / "solution/a.bin", 40 * MIB)
    os.truncate(task / "solution/b.bin", 40 * MIB)
    with pytest.raises(ConfigError, match="the reference agent carries it in one file"):
        import_harbor_task(task, tmp_path / "out")
    nothing_left(tmp_path, task)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda task: os.mkfifo(task / "environment" / "pipe"), "not a regular file"),
        (lambda task: os.mkfifo(task / "tests" / "pipe"), "not a regular file"),
        (lambda task: (task / "tests" / "up").symlink_to(".."), "a link back to a folder above"),
        (lambda task: (task / "tests" / "gone").symlink_to("nothing"), "a link to nothing"),
        (lambda task: (task / "solution" / "etc").symlink_to("/etc"), "a link out of the task"),
    ],
    ids=["pipe-in-environment", "pipe-in-tests", "loop", "dangling-link", "link-out"],
)
def test_what_is_not_a_plain_file_of_the_task_is_refused(
    tmp_path: Path, make: Callable[[Path], None], said: str
) -> None:
    """A named pipe would block the import that opens it; a loop would copy without end."""
    task = write_task(tmp_path, {})
    make(task)
    with pytest.raises(ConfigError, match=said):
        import_harbor_task(task, tmp_path / "out")
    nothing_left(tmp_path, task)


def test_an_empty_output_folder_stays_empty_and_missing_ones_stay_missing(tmp_path: Path) -> None:
    task = write_task(tmp_path, {})
    os.truncate(task / "instruction.md", HUGE)
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "empty", tmp_path / "a" / "b" / "out"):
        with pytest.raises(ConfigError, match=r"instruction\.md is 1024 MiB"):
            import_harbor_task(task, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "hello"]
    assert not any((tmp_path / "empty").iterdir())


def test_an_import_lands_whole_in_its_folder(tmp_path: Path) -> None:
    task = write_task(tmp_path, {})
    (tmp_path / "out").mkdir()  # an empty folder is taken
    env = import_harbor_task(task, tmp_path / "out")
    assert env.repo_path is not None and env.repo_path.parent == tmp_path / "out"
    assert (tmp_path / "out" / "task.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello", "out"]  # no stage left


def test_a_file_that_grew_past_the_limit_is_refused_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads and copies stop at the limit, whatever the size checked before."""
    monkeypatch.setattr(harbor_files, "MAX_FILE_BYTES", 1000)
    grown = tmp_path / "grown.txt"
    grown.write_bytes(b"x" * 1001)
    with pytest.raises(ConfigError, match="more than the import's limit"):
        harbor_files.read(grown)
    with pytest.raises(ConfigError, match="more than the import's limit"):
        harbor_files.copy_file(grown, tmp_path / "copy.txt")
    grown.write_bytes(b"x" * 1000)
    assert harbor_files.read(grown) == b"x" * 1000


def test_the_work_dir_an_image_seeds_is_held_to_the_limits(tmp_path: Path) -> None:
    app = tmp_path / "rootfs" / "app"
    app.mkdir(parents=True)
    (app / "main.py").write_text("print('hi')\n")
    (app / "model.bin").touch()
    os.truncate(app / "model.bin", harbor_files.MAX_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match=r"^the image's WORKDIR /app: model\.bin is 67108865 "):
        seed_work(tmp_path / "rootfs", "/app", tmp_path / "repo")
    assert not (tmp_path / "repo").exists()
    os.truncate(app / "model.bin", 10)
    assert seed_work(tmp_path / "rootfs", "/app", tmp_path / "repo")
    assert (tmp_path / "repo" / "main.py").read_text() == "print('hi')\n"
