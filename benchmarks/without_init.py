"""A copy of a source tree whose pool runs each answer without its init, to price the init.

Since issue 39 (item 4) a pool's solution is pid 2 of its pid namespace, under an init the zygote
clones for each run (``deepgym.judge.init.Maker``). This copies TREE's ``src`` and ``benchmarks``
to OUT and changes three things in the copy only: the zygote's ``Maker`` enters the new pid
namespace and makes no init (the answer is pid 1 again, as before item 4), hands the worker
``/dev/null`` where the init's pidfd went, and a kill of that stand-in is a no-op (where the
zygote would keep a run's init for the next run, it keeps none). Everything
else (the CPU-time rule, the cleanups, the set-up of a solution) is TREE's own, so
``benchmarks/trees.py BASE OUT TREE`` splits TREE's cost over BASE into the init's and the rest.

    .venv/bin/python benchmarks/without_init.py TREE OUT
    .venv/bin/python benchmarks/trees.py --rounds 16 --repeat 4 BASE OUT TREE

For measuring only: the copy's answers ignore signals as a pid 1 does, the very thing item 4
fixed (it fails ``tests/languages/test_signals.py``).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

CALL_START = "    def __call__(self, name: bytes) -> int:\n"
CALL_END = "\n    def "  # (the method after it)
NO_INIT_CALL = '''    def __call__(self, name: bytes) -> int:
        """(without_init.py) The new pid namespace, no init: the next child is its pid 1."""
        if self.unshare(isolate.CLONE_NEWPID) != 0:
            raise isolate.c_error("unshare")
        fd = os.open("/dev/null", os.O_RDONLY)  # where the init's pidfd went
        self.pids[fd] = 0
        return fd

'''
REAP_START = "    def reap(self, pidfd: int) -> None:\n"
REAP_END = "def supervise("
NO_INIT_REAP = '''    def reap(self, pidfd: int) -> None:
        """(without_init.py) Nothing to wait for."""
        self.pids.pop(pidfd)
        os.close(pidfd)


'''
KILL = "        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)\n    except ProcessLookupError:\n"
NO_INIT_KILL = "        _signal.pidfd_send_signal(pidfd, _signal.SIGKILL)\n    except OSError:\n"
NO_RUN_LEFT = "    def _no_run_left(self) -> bool:\n"
NO_SPARE = NO_RUN_LEFT + "        return False  # (without_init.py: no init to keep)\n"


def _replace_span(text: str, start: str, end: str, new: str, where: Path) -> str:
    """``text`` with the span from ``start`` up to ``end`` replaced by ``new``."""
    if text.count(start) != 1 or end not in text[text.find(start) :]:
        raise SystemExit(f"{where}: {start.strip()!r} not found once: a tree this does not know")
    i = text.index(start)
    j = text.index(end, i + len(start)) + end.startswith("\n")  # (from the line ``end`` opens)
    return text[:i] + new + text[j:]


def make(tree: Path, out: Path) -> None:
    """Copy ``tree``'s ``src`` and ``benchmarks`` to ``out`` and take the init out there."""
    if out.exists():
        raise SystemExit(f"{out} exists: name a new folder")
    for part in ("src", "benchmarks"):
        ignore = shutil.ignore_patterns("__pycache__", "out")
        shutil.copytree(tree / part, out / part, ignore=ignore)
    init = out / "src/deepgym/judge/init.py"
    text = _replace_span(init.read_text(), CALL_START, CALL_END, NO_INIT_CALL, init)
    init.write_text(_replace_span(text, REAP_START, REAP_END, NO_INIT_REAP, init))
    worker = out / "src/deepgym/judge/worker.py"
    text = worker.read_text()
    if text.count(KILL) != 1:
        raise SystemExit(f"{worker}: the init's kill not found once: a tree this does not know")
    text = text.replace(KILL, NO_INIT_KILL)
    # (a tree whose zygote keeps a run's init for the next run, where it left nothing: none)
    worker.write_text(text.replace(NO_RUN_LEFT, NO_SPARE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="a checkout (git worktree add --detach DIR REV)")
    parser.add_argument("out", type=Path, help="a new folder for the copy")
    args = parser.parse_args()
    make(args.tree, args.out)
    print(f"wrote {args.out} (src and benchmarks of {args.tree}, the pool's init left out)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
