"""What the pool's init costs a run: a process forks an empty child into a new pid namespace,
with the init of ``deepgym.judge.init.Maker`` made first (its clone, the namespace entered and
left, its kill and reap), and without it (the answer pid 1, as before the init), in turns.

    unshare --user --map-root-user --pid --fork --mount-proc \\
        .venv/bin/python benchmarks/init_cost.py [--cycles 1000] [--rounds 5]

CPU per cycle is this process's and its reaped children's (the init included), from
``getrusage``: the forked child here is a small process, so the figure is the init's own cost,
not a zygote's fork.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable

from _common import print_table, write_json

from deepgym.judge import init, isolate


def _cpu_s() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _fork_empty(maker: init.Maker) -> int:
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0)
    finally:
        maker.leave()
    return pid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000, help="forks per arm and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.cycles < 1 or args.rounds < 1:
        parser.error("--cycles and --rounds must be at least 1")
    # What an init needs of the process that makes it (as the zygote has it).
    isolate.dumpable(False)
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    maker = init.Maker()

    def with_init() -> None:
        pidfd = maker(b"init_cost")
        os.waitpid(_fork_empty(maker), 0)
        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)
        maker.reap(pidfd)

    def without() -> None:
        if maker.unshare(isolate.CLONE_NEWPID) != 0:
            raise isolate.c_error("unshare")
        os.waitpid(_fork_empty(maker), 0)

    arms: dict[str, Callable[[], None]] = {"without an init": without, "with the init": with_init}
    cpu_us: dict[str, list[float]] = {name: [] for name in arms}
    wall_us: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, fn in arms.items():
            c, t = _cpu_s(), time.perf_counter()
            for _ in range(args.cycles):
                fn()
            wall_us[name].append((time.perf_counter() - t) / args.cycles * 1e6)
            cpu_us[name].append((_cpu_s() - c) / args.cycles * 1e6)
    base = statistics.median(cpu_us["without an init"])
    rows = [
        [
            name,
            f"{statistics.median(cpu_us[name]):.0f}",
            f"{statistics.median(cpu_us[name]) - base:+.0f}",
            f"{statistics.median(wall_us[name]):.0f}",
        ]
        for name in arms
    ]
    print_table(rows, ["arm", "CPU us/cycle", "vs without", "wall us/cycle"])
    data = {"cycles": args.cycles, "rounds": args.rounds, "cpu_us": cpu_us, "wall_us": wall_us}
    print(f"wrote {write_json('init_cost', data)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
