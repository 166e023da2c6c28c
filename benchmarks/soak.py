"""Soak: mixed batches through the pool and through the service for N minutes, the host's figures
each minute.

Two arms run at once, batch after batch, until the time is up: (a) an in-process client over the
pool and (b) a remote client of a ``deepgym serve`` this script starts on 127.0.0.1 (its own pool,
its own run store). Every batch mixes correct and wrong answers, answers that hang, memory bombs,
fork bombs and runs whose verifier crashes. Each result is checked against what its kind must
give (a pass; a verdict of 0; no verdict for a crashing verifier), and every batch must return one
result per answer: nothing lost, nothing duplicated.

Each minute (after a warm-up sample at minute 0) one row: runs so far, results off their kind,
RSS of this process, of the service process and of every process below this one (the workers,
zygotes and solutions of both pools), open file descriptors of this process and of the service,
the number of processes below this one and how many of them are a run's left behind (``strays``:
none of what a pool keeps between runs), the cgroups this process and the service hold (each
pool worker's slot, found by its open control files) and the folders ``deepgym-*`` in this run's
private temporary folder (made here and set as ``DEEPGYM_TMPDIR`` and ``TMPDIR``, so no other
program's folders count). Rows are taken between batches: the arms finish the batch in flight
and start none until the row is read. After the close, every cgroup seen must be gone, and no
process or folder be left. The figures should stay flat: ``tests/faults/test_soak.py`` runs
two minutes and checks them.

Loopback only; bounded (the arms stop at ``--minutes``, the server is stopped whatever happens).

    nice -n 10 python benchmarks/soak.py [--minutes 30] [--workers 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import print_table, proc_stat, write_json

from deepgym import AsyncDeepGym, Environment, RunResult
from deepgym.judge.blame import tree_pids
from deepgym.sandbox import cgroups
from deepgym.scheduling import TimeLimitPolicy

ADD = Environment(
    name="soak-add",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}, {"args": [5, 7], "expected": 12}],
    timeout=3.0,
    case_timeout=0.5,
    memory_mb=128,
    max_processes=16,
    max_file_mb=8,
)
CRASHING = Environment(
    name="soak-crashing-verifier",
    entry_point="add",
    test_cases=[{"args": [1, 2], "expected": 3}],
    verifier_code="def verify(solution, test_cases):\n    raise RuntimeError('broken verifier')\n",
    timeout=3.0,
)

CORRECT = "def add(a, b):\n    return a + b\n"
ANSWERS: dict[str, tuple[Environment, str]] = {
    "correct": (ADD, CORRECT),
    "wrong": (ADD, "def add(a, b):\n    return a - b\n"),
    "hang": (ADD, "def add(a, b):\n    while True:\n        pass\n"),
    "memory": (
        ADD,
        "def add(a, b):\n    x = []\n    while True:\n        x.append(bytearray(1 << 20))\n",
    ),
    "fork": (
        ADD,
        "import os\n\ndef add(a, b):\n    while True:\n        try:\n            os.fork()\n"
        "        except OSError:\n            pass\n",
    ),
    "crash": (CRASHING, CORRECT),
}
"""Each kind of answer: its environment and its text."""

MIX = ("correct",) * 6 + ("wrong",) * 4 + ("hang", "memory", "fork", "crash")
"""One batch: 14 answers, every kind in it."""


STARVABLE = ("hang", "memory", "fork")
"""Kinds that spend their whole time limit: on a host too loaded to give them the CPU, the
contract's rule (``deepgym.judge.blame``) has no verdict for them (``timeout``: the host, not the
answer, held them back), never a score."""


def starved(kind: str, r: RunResult) -> bool:
    """Whether ``r`` is a run of a starvable kind that the host held back (no verdict)."""
    return kind in STARVABLE and not r.has_verdict and r.error_type == "timeout"


def as_expected(kind: str, r: RunResult) -> bool:
    """Whether ``r`` is what an answer of ``kind`` must give under the reward contract."""
    if kind == "correct":
        return r.has_verdict and r.passed and r.score == 1.0
    if kind == "crash":  # the verifier's failure is ours: no verdict, never a 0
        return not r.has_verdict
    if starved(kind, r):
        return True
    return r.has_verdict and r.score == 0.0 and not r.passed


@dataclass
class Arm:
    """One arm's client and its tallies."""

    name: str
    client: AsyncDeepGym
    runs: int = 0
    batches: int = 0
    lost: int = 0
    unexpected: int = 0
    starved: int = 0
    """Runs of a starvable kind the loaded host held back (no verdict, as the contract says)."""
    examples: list[str] = field(default_factory=list)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while the arm may start batches; cleared to take a row between batches."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while no batch of the arm is in flight."""

    async def loop(self, until: float) -> None:
        """Send mixed batches until ``until`` (monotonic); tally what comes back."""
        envs = [ANSWERS[k][0] for k in MIX]
        texts = [ANSWERS[k][1] for k in MIX]
        while True:
            await self.go.wait()
            if time.monotonic() >= until:
                return
            self.idle.clear()
            try:
                batch = await self.client.run_batch(envs, texts, max_parallel=8)
            finally:
                self.idle.set()
            self.batches += 1
            self.runs += len(batch.results)
            self.lost += abs(len(MIX) - len(batch.results))
            for kind, r in zip(MIX, batch.results, strict=False):
                self.starved += starved(kind, r)
                if not as_expected(kind, r):
                    self.unexpected += 1
                    if len(self.examples) < 5:
                        self.examples.append(
                            f"{kind}: verdict={r.has_verdict} score={r.score} "
                            f"error_type={r.error_type} {(r.error or '')[:120]!r}"
                        )


# -- the host's figures ---------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` in MiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def fds(pid: int) -> int:
    """Open file descriptors of ``pid``."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (the judge's own reading of ``/proc``)."""
    return tree_pids(pid) - {pid}


STANDING = frozenset({"bwrap", "dg-worker", "dg-zygote", "dg-standby"})
"""The names of what a pool keeps between runs: each worker's sandbox, the worker, its zygote
and the solution process it forks ahead (a standby, named ``dg-zygote`` until it names
itself); each standby's init (``dg-init``) is counted apart."""


def strays(pids: set[int], service_pid: int) -> int:
    """How many of ``pids`` (the processes below this one) are none of what stays between runs:
    the service, a pool's standing processes (``STANDING``, or a worker not yet named: a child
    of its sandbox's ``bwrap``) and one init per standby. Between batches every process of a
    run must be gone: a solution, an init past its run, whatever an answer started. (Counting
    every process, a row read while a worker is starting or being replaced would not compare
    with the next.)"""
    info: dict[int, tuple[str, int]] = {}
    for pid in pids:
        if (stat := proc_stat(pid)) is not None:  # (None: gone meanwhile)
            info[pid] = (stat[0], int(stat[1][1]))
    standing = inits = standbys = 0
    for pid, (name, ppid) in info.items():
        parent = info.get(ppid, ("", 0))[0]
        if pid == service_pid or name in STANDING or parent == "bwrap":
            standing += 1
            if name == "dg-standby" or (name == "dg-zygote" and parent == "dg-zygote"):
                standbys += 1
        elif name == "dg-init":
            inits += 1
    return len(info) - standing - min(inits, standbys)


def held_cgroups(pids: list[int]) -> set[str]:
    """The cgroups whose control files ``pids`` hold open: each pool worker's slot
    (``cgroups.Slot`` keeps its files open for as long as the worker lives). Read from the
    descriptors, not from names: names carry a pid, and pids repeat across pid namespaces."""
    root = cgroups.V1_ROOT + "/"
    out = set()
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if target.startswith(root) and "/deepgym/" in target:
                out.add(os.path.dirname(target))
    return out


def sample(
    minute: int, service_pid: int, tmp: Path, arms: list[Arm], seen: set[str]
) -> dict[str, Any]:
    """One row of figures, taken between batches (no run in flight). Processes and cgroups are
    read ten times over four and a half seconds and the lowest kept: a worker being replaced as
    the row is read (after a hanging run) is the pool at work, not a leak, and a leak is there
    at every read. (A loaded host takes seconds to start a worker: one second of reads saw a
    replacement half done.) Every cgroup seen is added to ``seen`` (checked to be gone after
    the close)."""
    me = os.getpid()
    procs = stray = cgs = 1 << 30
    for i in range(10):
        below = descendants(me)
        procs = min(procs, len(below))
        stray = min(stray, strays(below, service_pid))
        held = held_cgroups([me, service_pid])
        seen |= held
        cgs = min(cgs, len(held))
        if i < 9:
            time.sleep(0.5)
    below = descendants(me)
    return {
        "minute": minute,
        "runs": {a.name: a.runs for a in arms},
        "unexpected": sum(a.unexpected for a in arms),
        "lost": sum(a.lost for a in arms),
        "rss_mib": rss_mib(me),
        "service_rss_mib": rss_mib(service_pid),
        "tree_rss_mib": sum(rss_mib(p) for p in below if p != service_pid),
        "fds": fds(me),
        "service_fds": fds(service_pid),
        "processes": procs,
        "strays": stray,
        "cgroups": cgs,
        "tmp_dirs": sum(1 for p in tmp.glob("deepgym-*") if p.is_dir()),
    }


# -- the service ----------------------------------------------------------------------------------


def start_server(workers: int, store: Path) -> tuple[subprocess.Popen[str], str]:
    """``deepgym serve`` on 127.0.0.1, an ephemeral port; its URL."""
    cmd = [sys.executable, "-m", "deepgym", "serve", "--host", "127.0.0.1", "--port", "0"]
    cmd += ["--workers", str(workers), "--store", str(store), "--allow-verifier-code"]
    cmd += ["--grace", "5"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "DEEPGYM_TOKEN": ""}
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", line)
    if not m:
        proc.kill()
        proc.wait()
        raise SystemExit(f"the server did not start: {line!r}")
    proc.stdout.readline()  # the console line
    return proc, m.group(1)


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


# -- the run --------------------------------------------------------------------------------------


async def soak(
    minutes: float,
    interval_s: float,
    workers: int,
    tmp: Path,
    show: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    proc, url = start_server(workers, tmp / "runs.sqlite")
    limits = TimeLimitPolicy(factor=None)
    arms = [
        Arm("pool", AsyncDeepGym(workers=workers, time_limits=limits)),
        Arm("service", AsyncDeepGym(mode="remote", url=url)),
    ]
    samples: list[dict[str, Any]] = []
    seen: set[str] = set()

    async def take(minute: int) -> None:
        for arm in arms:  # let the batches in flight finish, start none meanwhile
            arm.go.clear()
        for arm in arms:
            await arm.idle.wait()
        samples.append(await asyncio.to_thread(sample, minute, proc.pid, tmp, arms, seen))
        show(samples[-1])
        for arm in arms:
            arm.go.set()

    try:
        for arm in arms:  # warm-up: workers started, the environments staged
            await arm.client.run_batch([ADD, CRASHING], [CORRECT, CORRECT])
            arm.idle.set()
        await take(0)
        t0 = time.monotonic()
        until = t0 + minutes * 60.0
        tasks = [asyncio.ensure_future(a.loop(until)) for a in arms]
        minute = 0
        while (minute + 1) * interval_s <= minutes * 60.0 + 1e-6:
            minute += 1
            done, _ = await asyncio.wait(
                tasks, timeout=max(0.0, t0 + minute * interval_s - time.monotonic())
            )
            for t in done:
                t.result()  # an arm that failed ends the soak with its error
            await take(minute)
        await asyncio.gather(*tasks)
    finally:
        for arm in arms:
            await arm.client.close()
        await asyncio.to_thread(stop_server, proc)
    return {
        "minutes": minutes,
        "interval_s": interval_s,
        "workers": workers,
        "batch": list(MIX),
        "arms": {
            a.name: {
                "runs": a.runs,
                "batches": a.batches,
                "lost_or_duplicated": a.lost,
                "unexpected": a.unexpected,
                "starved": a.starved,
                "examples": a.examples,
            }
            for a in arms
        },
        "samples": samples,
        "cgroups_seen": sorted(seen),
    }


HEADER = [
    "min",
    "runs pool/service",
    "off kind",
    "RSS MiB",
    "service RSS",
    "tree RSS",
    "fds",
    "service fds",
    "procs",
    "strays",
    "cgroups",
    "tmp dirs",
]


def row(s: dict[str, Any]) -> list[str]:
    return [
        str(s["minute"]),
        f"{s['runs']['pool']}/{s['runs']['service']}",
        str(s["unexpected"]),
        f"{s['rss_mib']:.1f}",
        f"{s['service_rss_mib']:.1f}",
        f"{s['tree_rss_mib']:.0f}",
        str(s["fds"]),
        str(s["service_fds"]),
        str(s["processes"]),
        str(s["strays"]),
        str(s["cgroups"]),
        str(s["tmp_dirs"]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2, help="pool workers, in each arm")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between rows")
    parser.add_argument("--json", type=Path, default=None, help="default: out/soak.json")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    # this run's workspaces, and the service's, land here (DEEPGYM_TMPDIR: the workspace's own)
    os.environ["TMPDIR"] = os.environ["DEEPGYM_TMPDIR"] = str(tmp)
    tempfile.tempdir = None

    def show(s: dict[str, Any]) -> None:
        print("  ".join(row(s)), file=sys.stderr, flush=True)

    print(
        f"soak: {args.minutes:g} min, {args.workers} workers per pool, a row every "
        f"{args.interval:g} s; columns: {', '.join(HEADER)}",
        file=sys.stderr,
        flush=True,
    )
    try:
        result = asyncio.run(soak(args.minutes, args.interval, args.workers, tmp, show))
        time.sleep(1.0)  # the service's and the pool's last exits
        result["after_close"] = {
            "processes": len(descendants(os.getpid())),
            "cgroups_left": [d for d in result["cgroups_seen"] if os.path.exists(d)],
            "tmp_dirs": sum(1 for p in tmp.glob("deepgym-*") if p.is_dir()),
            "fds": fds(os.getpid()),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table([row(s) for s in result["samples"]], HEADER)
    for name, a in result["arms"].items():
        print(
            f"{name}: {a['runs']} runs in {a['batches']} batches, {a['unexpected']} off their "
            f"kind, {a['lost_or_duplicated']} lost or duplicated, {a['starved']} held back by "
            "the loaded host (no verdict)"
        )
        for line in a["examples"]:
            print(f"  {line}")
    print(f"after close: {result['after_close']}")
    path = write_json(args.json or "soak", result)
    print(f"wrote {path}")
    bad = sum(a["unexpected"] + a["lost_or_duplicated"] for a in result["arms"].values())
    left = result["after_close"]
    bad += left["processes"] + len(left["cgroups_left"]) + left["tmp_dirs"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
