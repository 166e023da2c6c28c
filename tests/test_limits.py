"""Derived time limits that persist (``deepgym.time_limits``): shared by the machine's clients,
keyed by content and by the kind of machine, safe under concurrent writers."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from pathlib import Path

import pytest

from deepgym import TimeLimitPolicy
from deepgym.client import AsyncDeepGym
from deepgym.time_limits import LimitStore, content_key, default_limits_path
from tests.fakes import TOY, FakeBackend

ENV = TOY


def _limit(policy: TimeLimitPolicy | None = None) -> tuple[float, int]:
    """The limit a new client derives for ``ENV``, and how many times it ran the reference."""
    fake = FakeBackend()

    async def go() -> float:
        async with AsyncDeepGym(backend=fake, time_limits=policy) as dg:
            return await dg.time_limit(ENV)

    limit = asyncio.run(go())
    return limit, fake.calls["ref"]


def test_a_second_client_reads_the_first_ones_measurement() -> None:
    assert _limit() == (1.0, 1)  # measured (5 ms: the floor after one run)
    assert default_limits_path().is_file()
    assert _limit() == (1.0, 0)  # read: the reference did not run again
    assert _limit(TimeLimitPolicy(persist=False)) == (1.0, 1)  # opted out: measured


def test_a_runtime_measured_on_another_machine_is_not_used_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import deepgym.time_limits as limits

    store = LimitStore()
    store.put(content_key(ENV, "fake"), ENV.name, reference_ms=500.0)  # this machine: 10 x 0.5 s
    store.put(content_key(ENV, "fake", machine="a faster CPU x64"), ENV.name, reference_ms=100.0)
    store.close()
    assert _limit() == (5.0, 0)  # this machine's own figure, read
    monkeypatch.setattr(limits, "machine_id", lambda: "a new machine x2")
    assert _limit() == (1.0, 1)  # a machine with no figure of its own measures
    monkeypatch.setattr(limits, "machine_id", lambda: "a faster CPU x64")
    assert _limit() == (1.0, 0)  # the faster machine's figure, on that machine only


def test_the_key_is_the_content_not_the_name(tmp_path: Path) -> None:
    base = content_key(ENV, "pool")
    assert content_key(ENV.model_copy(update={"name": "renamed", "task": "x"}), "pool") == base
    assert content_key(ENV.model_copy(update={"reference_solution": "ref2"}), "pool") != base
    assert content_key(ENV.model_copy(update={"timeout": 20.0}), "pool") != base
    assert content_key(ENV, "strict") != base
    assert content_key(ENV, "pool", machine="another CPU x8") != base
    verifier = tmp_path / "verifier.py"
    verifier.write_text("def verify(solution, test_cases):\n    return 1.0\n")
    with_file = ENV.model_copy(update={"test_cases": None, "verifier_path": verifier})
    before = content_key(with_file, "pool")
    verifier.write_text("def verify(solution, test_cases):\n    return 0.5\n")
    assert content_key(with_file, "pool") != before  # the file's bytes, not its path


def test_a_settled_verifier_file_is_read_once_and_a_change_to_it_still_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    reads: list[Path] = []
    read_bytes = Path.read_bytes

    def counted(self: Path) -> bytes:
        reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    verifier = tmp_path / "verifier.py"
    verifier.write_text("def verify(solution, test_cases):\n    return 1.0\n")
    env = ENV.model_copy(update={"test_cases": None, "verifier_path": verifier})
    content_key(env, "pool")
    content_key(env, "pool")
    assert len(reads) == 2  # just written: read every time (a coarse clock could hide a change)
    old = verifier.stat().st_mtime_ns - 60 * 10**9
    os.utime(verifier, ns=(old, old))  # settled: read once, then kept
    first = content_key(env, "pool")
    assert content_key(env, "pool") == first and len(reads) == 3
    verifier.write_text("def verify(solution, test_cases):\n    return 0.5\n")  # same size
    assert content_key(env, "pool") != first and len(reads) == 4


def _write_many(path: str, worker: int) -> None:
    store = LimitStore(path)
    for i in range(50):
        store.put(f"shared-{i % 5}", "e", float(worker))
        store.put(f"w{worker}-{i}", "e", float(i))
    store.close()


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "limits.sqlite")
    LimitStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, w)) for w in range(3)]
    for p in procs:
        p.start()
    threads = [threading.Thread(target=_write_many, args=(path, 10 + t)) for t in range(2)]
    for t in threads:
        t.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for t in threads:
        t.join(60)
    store = LimitStore(path)
    assert store.count() == 5 * 50 + 5  # every writer's keys, and the five shared ones once
    shared = store.get("shared-0")
    assert shared in {0.0, 1.0, 2.0, 10.0, 11.0}
    store.close()


def test_deepgym_limits_computes_them_ahead_and_later_clients_read_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from click.testing import CliRunner

    from deepgym import DeepGym, cli
    from deepgym.cli import common

    fakes: list[FakeBackend] = []

    def make_client(sandbox: str | None) -> DeepGym:
        fakes.append(FakeBackend())
        return DeepGym(backend=fakes[-1])

    monkeypatch.setattr(common, "make_client", make_client)
    runner = CliRunner(env={"COLUMNS": "80"})
    first = runner.invoke(cli.cli, ["limits", "two_sum,fizzbuzz", "--json"])
    assert first.exit_code == 0, first.output
    rows = json.loads(first.stdout)
    assert [r["env"] for r in rows] == ["two_sum", "fizzbuzz"]
    assert all(r["derived"] and r["time_limit"] == 1.0 for r in rows)
    assert sum(fakes[0].calls.values()) == 2  # each reference measured once
    again = runner.invoke(cli.cli, ["limits", "two_sum,fizzbuzz"])
    assert again.exit_code == 0, again.output
    assert "two_sum" in again.stdout and "derived" in again.stdout
    assert sum(fakes[1].calls.values()) == 0  # read from the machine's store
