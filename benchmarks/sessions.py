"""Agent sessions: what a step, an open and an idle session cost, against baselines of the run.

Sections, each with its baseline measured in the same run:

1. Step overhead: ``exec("true")`` in an open session (``envs/agent/fix_add``), against a bare
   ``bash -c true`` (plain subprocess) and a bare ``bash -c true`` in the plainest bwrap sandbox
   started fresh each time, interleaved round by round. Target: a session step adds <= 5 ms at
   p50 over bare ``bash -c true``.
2. Open + close of a session (no commands) against one ``DeepGym(sandbox="strict").run`` of
   ``two_sum``'s reference answer, interleaved. Target: open + close <= 1x the strict run. A
   session's sandbox keeps a standby for the next open of the same environment (a warm start),
   so the interleaved figure is a warm open; the same opens back to back, with no gap for the
   standby to start in, are printed beside it.
3. Concurrency: ``--sessions`` sessions opened at once on ``AsyncDeepGym``, one ``exec("true")``
   in each; the time to open them all, the memory of an idle session (RSS of its process tree,
   from ``/proc``), then all closed and the benchmark's own process tree checked for leftovers.

    python benchmarks/sessions.py [--steps 200] [--opens 30] [--sessions 64] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import OUT_DIR, interleaved, print_table, summarise, write_json

from deepgym import DeepGym, load_environment
from deepgym.client import AsyncDeepGym
from deepgym.envs.registry import load_folder
from deepgym.judge.blame import tree_pids
from deepgym.models import Environment
from deepgym.sandbox.host import bare_sandbox
from deepgym.sandbox.sessions import sessions_dir
from deepgym.session import AsyncSession

ENV_DIR = Path(__file__).resolve().parents[1] / "src" / "deepgym" / "envs" / "agent" / "fix_add"
TARGET_STEP_ADDED_MS = 5.0
TARGET_OPEN_RATIO = 1.0
BASH_TRUE = ["/bin/bash", "-c", "true"]


# -- /proc ---------------------------------------------------------------------------------


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return "gone"
    return raw[raw.rfind(b")") + 2 :].split()[0].decode()


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``, from ``/proc`` (``deepgym.judge.blame.tree_pids``)."""
    return tree_pids(pid) - {pid}


def rss_kib(pid: int) -> int:
    """``VmRSS`` of ``pid`` in KiB (0 once it is gone; readable for a non-dumpable process)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kib(pid: int) -> int | None:
    """``Pss`` of ``pid`` in KiB (shared pages split among their users); None where
    ``smaps_rollup`` cannot be read (a non-dumpable process of another user)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


# -- 1. step overhead ----------------------------------------------------------------------


def step_overhead(dg: DeepGym, env: Environment, steps: int) -> dict[str, Any]:
    bwrap = bare_sandbox()
    with dg.session(env) as s:

        def step() -> None:
            r = s.exec("true")
            if r.exit_code != 0:
                raise SystemExit(f"exec('true') in a session exited {r.exit_code}: {r.stderr}")

        times = interleaved(
            {
                "session exec('true')": step,
                "bash -c true": lambda: subprocess.run(BASH_TRUE, check=True),
                "bwrap + bash -c true (fresh)": lambda: subprocess.run(
                    [*bwrap, *BASH_TRUE], check=True
                ),
            },
            rounds=steps,
            warmup=10,
        )
    stats = {name: summarise(xs) for name, xs in times.items()}
    session = stats["session exec('true')"]["median_ms"]
    bare = stats["bash -c true"]["median_ms"]
    fresh = stats["bwrap + bash -c true (fresh)"]["median_ms"]
    rows = [
        [name, f"{s['median_ms']:.2f}", f"{s['p90_ms']:.2f}", f"{s['p99_ms']:.2f}"]
        for name, s in stats.items()
    ]
    print(f"1. Step overhead ({steps} steps per arm, interleaved)\n")
    print_table(rows, ["arm", "p50 ms", "p90 ms", "p99 ms"])
    added = session - bare
    met = added <= TARGET_STEP_ADDED_MS
    print(
        f"\nsession step p50 - bare bash p50 = {added:+.2f} ms "
        f"(target <= {TARGET_STEP_ADDED_MS:g} ms: {'met' if met else 'missed'})"
    )
    print(f"session step p50 - fresh bwrap + bash p50 = {session - fresh:+.2f} ms")
    return {
        "steps": steps,
        "arms": stats,
        "added_p50_ms_over_bash": added,
        "added_p50_ms_over_fresh_bwrap_bash": session - fresh,
        "target_added_ms": TARGET_STEP_ADDED_MS,
        "target_met": met,
    }


# -- 2. open + close -----------------------------------------------------------------------


def open_close(dg: DeepGym, env: Environment, opens: int) -> dict[str, Any]:
    two_sum = load_environment("two_sum")
    reference = two_sum.reference_solution or ""

    opened: list[float] = []
    closed: list[float] = []

    def session() -> None:
        t0 = time.perf_counter()
        s = dg.session(env)
        t1 = time.perf_counter()
        s.close()
        opened.append((t1 - t0) * 1000.0)
        closed.append((time.perf_counter() - t1) * 1000.0)

    def strict() -> None:
        r = dg.run(two_sum, reference)
        if not r.passed:
            raise SystemExit(f"two_sum's reference failed under strict: {r.error}")

    times = interleaved(
        {"session open + close": session, "strict run (two_sum reference)": strict},
        rounds=opens,
    )
    stats = {name: summarise(xs) for name, xs in times.items()}
    base = stats["strict run (two_sum reference)"]["median_ms"]
    rows = [
        [name, f"{s['median_ms']:.1f}", f"{s['p90_ms']:.1f}", f"{s['median_ms'] / base:.2f}x"]
        for name, s in stats.items()
    ]
    print(f"\n2. Open + close ({opens} of each, interleaved)\n")
    print_table(rows, ["arm", "median ms", "p90 ms", "vs strict run"])
    ratio = stats["session open + close"]["median_ms"] / base
    met = ratio <= TARGET_OPEN_RATIO
    split = {"open": summarise(opened[-opens:]), "close": summarise(closed[-opens:])}
    print(
        f"\nof which: open {split['open']['median_ms']:.1f} ms, "
        f"close {split['close']['median_ms']:.1f} ms (medians)"
    )
    print(
        f"\nopen + close / strict run = {ratio:.2f}x "
        f"(target <= {TARGET_OPEN_RATIO:g}x: {'met' if met else 'missed'})"
    )
    # Back to back, nothing between: each open waits for the standby the last one started
    # (a cold start's cost, less what the close overlapped).
    back: list[float] = []
    for _ in range(opens):
        t0 = time.perf_counter()
        dg.session(env).close()
        back.append((time.perf_counter() - t0) * 1000.0)
    back_stats = summarise(back)
    print(
        f"back to back, no gap ({opens}): open + close {back_stats['median_ms']:.1f} ms median "
        f"({back_stats['median_ms'] / base:.2f}x the strict run): the standby sandbox is still "
        "starting when the next open comes"
    )
    return {
        "opens": opens,
        "arms": stats,
        "back_to_back": back_stats,
        "session_split": split,
        "ratio": ratio,
        "target_ratio": TARGET_OPEN_RATIO,
        "target_met": met,
    }


# -- 3. concurrency ------------------------------------------------------------------------


async def concurrency(env: Environment, n: int) -> dict[str, Any]:
    me = os.getpid()
    before = descendants(me)
    async with AsyncDeepGym(sandbox="strict") as dg:
        warm = await dg.session(env)  # the provider's one-time setup, outside the timing
        await warm.close()

        t0 = time.perf_counter()
        got = await asyncio.gather(*(dg.session(env) for _ in range(n)), return_exceptions=True)
        open_s = time.perf_counter() - t0
        sessions: list[AsyncSession] = [s for s in got if isinstance(s, AsyncSession)]
        failed = [s for s in got if not isinstance(s, AsyncSession)]
        try:
            t0 = time.perf_counter()
            results = await asyncio.gather(*(s.exec("true") for s in sessions))
            exec_s = time.perf_counter() - t0
            ok = sum(r.exit_code == 0 for r in results)
            alive = [s for s in sessions if s._inner.proc and s._inner.proc.returncode is None]
            await asyncio.sleep(0.2)  # idle: every step's bash has exited
            per_session: list[float] = []
            pss: list[float] = []
            procs: list[int] = []
            for s in sessions:
                assert s._inner.proc is not None
                pids = tree_pids(s._inner.proc.pid)
                procs.append(len(pids))
                per_session.append(sum(rss_kib(p) for p in pids) / 1024.0)
                shares = [pss_kib(p) for p in pids]
                if all(x is not None for x in shares):
                    pss.append(sum(x or 0 for x in shares) / 1024.0)
            open_at_once = len(alive)
            seen_open = len(descendants(me) - before)  # the leftover check sees these
        finally:
            t0 = time.perf_counter()
            await asyncio.gather(*(s.close() for s in sessions))
            close_s = time.perf_counter() - t0
    # Checked once the client is closed: it keeps a standby sandbox for the next open until then.
    for _ in range(50):  # a process being reaped may still be listed for a moment
        left = descendants(me) - before
        if not left:
            break
        await asyncio.sleep(0.02)
    left = descendants(me) - before
    left_desc = [f"{p} [{_state(p)}] {_cmd(p)}" for p in sorted(left)]
    records = [s.sandbox_id for s in sessions if (sessions_dir() / f"{s.sandbox_id}.json").exists()]
    for exc in failed[:3]:
        print(f"a session failed to open: {type(exc).__name__}: {exc}")

    total = sum(per_session)
    rows = [
        ["sessions opened", f"{len(sessions)}/{n}"],
        ["time to open all", f"{open_s * 1000:.0f} ms ({open_s * 1000 / n:.1f} ms per session)"],
        ["exec('true') in each, at once", f"{exec_s * 1000:.0f} ms ({ok}/{len(sessions)} exit 0)"],
        ["open at once after the step", f"{open_at_once}"],
        ["processes per idle session", f"{statistics.median(procs):g} (median)"],
        ["processes below the benchmark, while open", f"{seen_open} more than before"],
        ["RSS per idle session", f"{statistics.median(per_session):.1f} MiB (median)"],
        ["RSS of all sessions", f"{total:.0f} MiB"],
        [
            "PSS per idle session",
            f"{statistics.median(pss):.1f} MiB (median)" if pss else "n/a (unreadable)",
        ],
        ["time to close all", f"{close_s * 1000:.0f} ms"],
        ["processes left after close", f"{len(left)}"],
        ["session records left", f"{len(records)}"],
    ]
    print(f"\n3. Concurrency ({n} sessions at once)\n")
    print_table(rows, ["figure", "value"])
    for line in left_desc:
        print(f"  left: {line}")
    all_open = open_at_once >= n and not failed
    clean = not left and not records
    print(
        f"\n>= {n} sessions open at once: {'yes' if all_open else 'no'}; "
        f"nothing left after close: {'yes' if clean else 'no'}"
    )
    return {
        "sessions": n,
        "opened": len(sessions),
        "failed_to_open": [f"{type(e).__name__}: {e}" for e in failed],
        "open_all_ms": open_s * 1000,
        "exec_all_ms": exec_s * 1000,
        "exec_ok": ok,
        "open_at_once": open_at_once,
        "processes_per_session_median": statistics.median(procs),
        "processes_seen_while_open": seen_open,
        "rss_mib_per_idle_session": {
            "median": statistics.median(per_session),
            "min": min(per_session),
            "max": max(per_session),
        },
        "rss_mib_all_sessions": total,
        "pss_mib_per_idle_session_median": statistics.median(pss) if pss else None,
        "close_all_ms": close_s * 1000,
        "processes_left": left_desc,
        "records_left": records,
        "all_open_at_once": all_open,
        "nothing_left": clean,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per arm in section 1")
    parser.add_argument("--opens", type=int, default=30, help="rounds per arm in section 2")
    parser.add_argument("--sessions", type=int, default=64, help="sessions at once in section 3")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "sessions.json")
    args = parser.parse_args()

    env = load_folder(ENV_DIR)
    with DeepGym(sandbox="strict") as dg:
        steps = step_overhead(dg, env, args.steps)
        opens = open_close(dg, env, args.opens)
    many = asyncio.run(concurrency(env, args.sessions))
    write_json(args.out, {"step": steps, "open_close": opens, "concurrency": many})
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
