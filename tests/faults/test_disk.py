"""A full disk: the answer's own work space, and the host's workspace.

- An answer that writes until its work dir, ``/tmp`` or ``/dev/shm`` is full (many files, each
  under its file-size limit, so the quota is what stops it) or until one file reaches
  ``max_file_mb``: the write fails inside the sandbox, and the run completes with the answer's
  verdict (a pass if it carries on, a 0 if the error escapes), in a few seconds.
- The host's workspace (where environments are staged) on a tmpfs too small for an
  environment's test data: the run fails as ours (a result without a verdict in a batch),
  never as the answer's 0, and never hangs; a smaller environment still runs after.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym import Environment, RunResult
from deepgym.client import AsyncDeepGym
from deepgym.exceptions import SandboxError
from deepgym.scheduling import TimeLimitPolicy
from tests.faults.conftest import Leftovers

pytestmark = pytest.mark.sandbox

ENV = Environment(
    name="fault-disk",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    timeout=20.0,
    case_timeout=15.0,
    memory_mb=256,
    max_file_mb=4,
)


def filler(where: str, chunk_kb: int, carry_on: bool) -> str:
    """An answer that writes ``chunk_kb`` files into ``where`` until a write fails; then it
    returns the right sum (``carry_on``) or lets the error escape."""
    caught = "except OSError:\n            break" if carry_on else "finally:\n            pass"
    return (
        "import os\n\n"
        "def add(a, b):\n"
        f"    block = b'x' * ({chunk_kb} * 1024)\n"
        "    i = 0\n"
        "    while i < 100000:\n"
        "        try:\n"
        f"            with open(os.path.join({where!r}, f'fill-{{i}}'), 'wb') as f:\n"
        "                f.write(block)\n"
        "                f.flush()\n"
        "            i += 1\n"
        f"        {caught}\n"
        "    return a + b\n"
    )


ONE_BIG_FILE = (
    "def add(a, b):\n"
    "    with open('big', 'wb') as f:\n"
    "        while True:\n"
    "            f.write(b'x' * 65536)\n"
    "            f.flush()\n"
)


@pytest.mark.parametrize("sandbox", ["pool", "strict"])
def test_an_answer_that_fills_its_disk_gets_its_verdict(sandbox: str, leftovers: Leftovers) -> None:
    cases: list[tuple[str, bool | None]] = []  # (answer, passes: True, False)
    for where in (".", "/tmp", "/dev/shm"):
        cases.append((filler(where, 1024, carry_on=True), True))
        cases.append((filler(where, 1024, carry_on=False), False))
    cases.append((ONE_BIG_FILE, False))

    async def go() -> list[RunResult]:
        async with AsyncDeepGym(
            sandbox=sandbox, workers=2, time_limits=TimeLimitPolicy(factor=None)
        ) as dg:
            batch = dg.run_batch(ENV, [a for a, _ in cases], max_parallel=2)
            results = (await asyncio.wait_for(batch, 90)).results
            after = await dg.run(ENV, "def add(a, b):\n    return a + b\n")
        assert after.passed  # each run's space is its own: nothing carried over
        return results

    results = asyncio.run(go())
    assert len(results) == len(cases)
    for (_, passes), r in zip(cases, results, strict=True):
        assert r.has_verdict, r  # the answer's own doing
        assert r.passed is passes, r
        assert r.service.total_ms < 20_000, r  # stopped by the quota, not by the clock
    leftovers.check()


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, mounted in this test run's own mount namespace (root only)."""
    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


BIG = ENV.model_copy(
    update={
        "name": "fault-big-data",
        "test_cases": [{"args": [1, 2], "expected": 3, "pad": "x" * (1 << 20)}],
    }
)
"""An environment whose test data (1 MiB) does not fit in ``tiny_tmpfs``."""
RIGHT = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def full_workspace(
    tiny_tmpfs: Path, leftovers: Leftovers, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The pool's workspace on ``tiny_tmpfs``; it is empty again after the test."""
    monkeypatch.setenv("TMPDIR", str(tiny_tmpfs))
    monkeypatch.setenv("DEEPGYM_TMPDIR", str(tiny_tmpfs))
    monkeypatch.setattr("tempfile.tempdir", str(tiny_tmpfs))
    leftovers.tmp = tiny_tmpfs
    yield tiny_tmpfs
    assert not os.listdir(tiny_tmpfs)  # the pool's workspace removed at close


def test_a_full_host_workspace_is_ours_never_the_answers_zero(
    full_workspace: Path, leftovers: Leftovers
) -> None:
    async def go() -> tuple[list[RunResult], RunResult]:
        async with AsyncDeepGym(workers=1, time_limits=TimeLimitPolicy(factor=None)) as dg:
            batch = dg.run_batch([BIG, ENV, BIG], [RIGHT] * 3, max_parallel=2)
            results = (await asyncio.wait_for(batch, 60)).results
            small = await asyncio.wait_for(dg.run(ENV, RIGHT), 60)
        return results, small

    (big, fits, big_again), small = asyncio.run(go())
    for r in (big, big_again):
        assert not r.has_verdict and r.error_type is not None, r  # ours: never a 0
        assert "No space left on device" in r.error, r
    assert fits.passed and small.passed  # the pool still works
    leftovers.check()


def test_a_single_run_on_a_full_host_workspace_raises_the_contracts_error(
    full_workspace: Path,
) -> None:
    async def go() -> None:
        async with AsyncDeepGym(workers=1, time_limits=TimeLimitPolicy(factor=None)) as dg:
            with pytest.raises(SandboxError, match="No space left on device") as caught:
                await asyncio.wait_for(dg.run(BIG, RIGHT), 60)
            assert isinstance(caught.value.__cause__, OSError)  # translated once, with its cause
            assert (await asyncio.wait_for(dg.run(ENV, RIGHT), 60)).passed  # the pool still works

    asyncio.run(go())
