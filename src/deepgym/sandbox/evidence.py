"""What a run left behind, read into a ``RawRun``: the judge's events, the verifier's exit code
and output, and the cgroup evidence (which limit fired, peak memory, which mechanism enforced
each limit). Shared by every backend; classification is ``deepgym.verdict``'s, not this module's.
"""

from __future__ import annotations

import json
import time
from typing import Any

from deepgym.sandbox import cgroups, host
from deepgym.sandbox.base import RawRun
from deepgym.verdict import Outcome

Evidence = tuple[str | None, float | None, dict[str, str]]
"""(the limit that fired, peak memory in MiB, which mechanism enforced each limit)."""

TIME_LIMITS = frozenset({"case_time", "wall_time", "cpu_time"})
"""Limits that fire on the clock. A run that reached its memory limit first is named for the
memory limit: at the limit the kernel reclaims and retries, and the answer crawls until a clock
runs out (or the OOM killer acts after the clock did)."""


def parse_event(line: bytes) -> dict[str, Any] | None:
    """One line of the result channel as an event, or None where it is not a JSON object (the
    verifier's process writes that channel: any bytes may come, none may raise here)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return msg if isinstance(msg, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ms(value: Any) -> float | None:
    """A duration the judge reported, or None where it is no number of milliseconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < 1e15 else None  # NaN compares false


def read_run(
    events: list[dict[str, Any]],
    code: int | None,
    out: bytes,
    err: bytes,
    timed_out: bool,
    isolation: str,
) -> RawRun:
    """A run's ``RawRun`` from the judge's ``events``, the verifier's exit ``code`` and output,
    and whether the host's wall limit fired; ``isolation`` is reported as given."""
    events = [e for e in events if isinstance(e, dict)]
    in_play = next((e for e in events if e.get("event") == "in_play"), None)
    report = next((e for e in events if e.get("event") == "report"), None)
    stderr = err.decode("utf-8", "replace")
    start_failed = report is None and in_play is None and stderr.startswith("bwrap:")
    died = code is not None and (code < 0 or code >= 128)
    sol = (report or {}).get("solution")
    sol = sol if isinstance(sol, dict) else {}
    detail = ""
    if report is None and not timed_out:
        detail = (stderr.strip().splitlines() or [f"verifier exited {code}"])[-1][:300]
    outcome = Outcome(
        report=report,
        in_play=in_play is not None,
        verifier_exit_code=code,
        sandbox_died=died,
        wall_timeout=timed_out,
        start_failed=start_failed,
        detail=detail,
    )
    return RawRun(
        outcome=outcome,
        report=report,
        isolation=isolation,
        exit_code=code,
        stdout=_text(sol.get("stdout")) if report else out.decode("utf-8", "replace"),
        stderr=_text(sol.get("stderr")) + ("" if report else stderr),
        in_play_ms=_ms(in_play.get("in_play_ms")) if in_play else None,
        in_play_by=_name(in_play.get("by")) if in_play else None,
        limit_fired=_name(sol.get("limit")),
        solution_cpu_ms=_ms(sol.get("cpu_ms")),
        signal=-code if code is not None and code < 0 else None,
    )


def take_evidence(group: cgroups.RunCgroup, work_dir: str) -> Evidence:
    """Read the run's cgroup evidence, then remove the groups: (limit fired, peak MiB, which
    mechanism enforced each limit)."""
    limit, peak = group.evidence()
    used = mechanisms(group, work_dir)
    group.remove()
    return limit, peak, used


def mechanisms(group: cgroups.RunCgroup | cgroups.Slot, work_dir: str) -> dict[str, str]:
    """Which mechanism enforced each limit of a run on ``group`` (``time``: what measured the
    answer's CPU time for its time limits) and, for a bwrap sandbox, the bwrap that ran it when
    it was not the first choice (``host.Bwrap.note``)."""
    used = {**group.mechanisms(), "work_dir": work_dir}
    if work_dir == "tmpfs" and host.find_bwrap().note:  # bwrap-backed runs only
        bw = host.find_bwrap()
        used["bwrap"] = f"{bw.path} ({bw.note})"
    return used


def apply_evidence(raw: RawRun, evidence: Evidence, t0: float) -> RawRun:
    """``raw`` with the cgroup evidence and the run's total time (since ``t0``) filled in; the
    memory limit, when the cgroup saw it reached, outranks a clock limit the judge saw fire."""
    limit, peak, mechanisms = evidence
    raw.limit_mechanism = mechanisms
    raw.peak_memory_mb = peak
    if limit and (not raw.limit_fired or (limit == "memory" and raw.limit_fired in TIME_LIMITS)):
        raw.limit_fired = limit
    raw.total_ms = (time.monotonic() - t0) * 1000.0
    return raw
