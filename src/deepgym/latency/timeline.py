"""Named spans per training step, GPU idle from their union, and a JSON-lines record.

A ``Timeline`` records steps; each step holds spans (``generation``, ``reward``, ``training`` or
any name). Spans may overlap (per-group pipelining trains while the reward phase still runs), so
a step's busy time is the length of the *union* of its busy spans, never their sum:

    GPU idle = 1 - |union of busy spans, clipped to the step| / step wall time

Which names count as busy is the timeline's choice (``generation`` and ``training`` by default);
one span can say otherwise with ``busy=``. On a GPU, pass ``sync`` (``torch.cuda.synchronize``)
so a span ends when the device's work does, not when the host queued it.

``profile_check`` cross-checks the spans against what the device really ran: torch's profiler
sees every CUDA kernel (on a CPU, every top-level operator), and the share of that activity
outside the busy spans says whether the spans can be trusted. torch is imported only there.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym.exceptions import ConfigError

__all__ = [
    "BUSY",
    "ProfileCheck",
    "Span",
    "Step",
    "Timeline",
    "cross_check",
    "idle_fraction",
    "merge",
    "profile_check",
    "read_jsonl",
    "union_length",
    "write_jsonl",
]

BUSY = frozenset({"generation", "training"})
"""Span names that keep the GPU busy unless a timeline says otherwise."""

MARK = "deepgym"
"""Prefix of the profiler annotations a timeline emits (``deepgym:<busy|wait>:<name>``)."""

Interval = tuple[float, float]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same points (empty ones dropped)."""
    out: list[Interval] = []
    for start, end in sorted((s, e) for s, e in intervals if e > s):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def union_length(intervals: Iterable[Interval]) -> float:
    """Length of the union of intervals: overlaps count once."""
    return sum(e - s for s, e in merge(intervals))


def idle_fraction(start: float, end: float, busy: Iterable[Interval]) -> float:
    """Share of ``[start, end]`` that no busy interval covers (busy time is clipped to it)."""
    if end <= start:
        raise ConfigError(f"a step must end after it starts, got [{start}, {end}]")
    covered = union_length((max(s, start), min(e, end)) for s, e in busy)
    return min(1.0, max(0.0, 1.0 - covered / (end - start)))


@dataclass(frozen=True)
class Span:
    """One named interval of a step, in seconds on the timeline's clock."""

    name: str
    start: float
    end: float
    busy: bool

    @property
    def duration(self) -> float:
        """Seconds from start to end."""
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        """The span as one JSON object (a line of the timeline's JSONL)."""
        return {"name": self.name, "start": self.start, "end": self.end, "busy": self.busy}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Span:
        """The span ``to_dict`` wrote; ``ConfigError`` naming what is missing."""
        try:
            return cls(str(d["name"]), float(d["start"]), float(d["end"]), bool(d["busy"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"a span needs name, start, end and busy: {exc}") from None


@dataclass
class Step:
    """One training step: its wall-clock interval, its spans, and free-form ``meta``."""

    index: int
    start: float
    end: float = float("nan")
    spans: list[Span] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def wall(self) -> float:
        """The step's wall time in seconds."""
        return self.end - self.start

    @property
    def busy(self) -> float:
        """Seconds covered by the union of busy spans, inside the step."""
        return union_length(
            (max(s.start, self.start), min(s.end, self.end)) for s in self.spans if s.busy
        )

    @property
    def idle(self) -> float:
        """GPU idle: the share of the step's wall time outside every busy span."""
        return idle_fraction(self.start, self.end, ((s.start, s.end) for s in self.spans if s.busy))

    def total(self, name: str) -> float:
        """Summed duration of the spans called ``name`` (0.0 if none)."""
        return sum(s.duration for s in self.spans if s.name == name)

    def covered(self, name: str) -> float:
        """Wall time covered by the spans called ``name`` (their union)."""
        return union_length((s.start, s.end) for s in self.spans if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The step, its figures and its spans as one JSON object."""
        return {
            "step": self.index,
            "start": self.start,
            "end": self.end,
            "wall": self.wall,
            "busy": self.busy,
            "idle": self.idle,
            "meta": self.meta,
            "spans": [s.to_dict() for s in self.spans],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        """The step ``to_dict`` wrote; ``ConfigError`` naming what is missing."""
        try:
            spans = [Span.from_dict(s) for s in d["spans"]]
            meta = d.get("meta") or {}
            if not isinstance(meta, dict):
                raise TypeError("meta must be an object")
            return cls(int(d["step"]), float(d["start"]), float(d["end"]), spans, dict(meta))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"a step needs step, start, end and spans: {exc}") from None


class Timeline:
    """Records steps and their spans; ``gpu_idle`` over every step, time-weighted.

    ``clock`` returns seconds (``time.perf_counter``); ``sync`` runs before each clock read
    (``torch.cuda.synchronize`` on a GPU); ``annotate(label)`` returns a context manager that
    wraps each span (``torch.profiler.record_function`` for ``profile_check``).
    """

    def __init__(
        self,
        busy: Iterable[str] = BUSY,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sync: Callable[[], object] | None = None,
        annotate: Callable[[str], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.busy_names = frozenset(busy)
        self.clock = clock
        self.sync = sync
        self.annotate = annotate
        self.steps: list[Step] = []
        self._current: Step | None = None

    def _now(self) -> float:
        if self.sync is not None:
            self.sync()
        return self.clock()

    def _wrap(self, label: str) -> AbstractContextManager[Any]:
        return self.annotate(label) if self.annotate is not None else nullcontext()

    @contextmanager
    def step(self, **meta: Any) -> Iterator[Step]:
        """Record one step; spans recorded inside belong to it."""
        if self._current is not None:
            raise ConfigError("steps do not nest: end the current step first")
        with self._wrap(f"{MARK}:step"):
            current = Step(index=len(self.steps), start=self._now(), meta=dict(meta))
            self._current = current
            try:
                yield current
            finally:
                current.end = self._now()
                self._current = None
                self.steps.append(current)

    @contextmanager
    def span(self, name: str, *, busy: bool | None = None) -> Iterator[None]:
        """Record the ``name`` span around the block (busy by name unless ``busy`` says)."""
        is_busy = name in self.busy_names if busy is None else busy
        with self._wrap(f"{MARK}:{'busy' if is_busy else 'wait'}:{name}"):
            start = self._now()
            try:
                yield
            finally:
                self.record(name, start, self._now(), busy=is_busy)

    def record(self, name: str, start: float, end: float, *, busy: bool | None = None) -> Span:
        """Add a span measured elsewhere (same clock) to the current step."""
        if self._current is None:
            raise ConfigError(f"span {name!r} is outside a step: record it inside step()")
        if end < start:
            raise ConfigError(f"span {name!r} ends before it starts: [{start}, {end}]")
        span = Span(name, start, end, name in self.busy_names if busy is None else busy)
        self._current.spans.append(span)
        return span

    def gpu_idle(self, steps: Sequence[Step] | None = None) -> float:
        """Share of all steps' wall time outside busy spans (long steps weigh more)."""
        chosen = self.steps if steps is None else steps
        wall = sum(s.wall for s in chosen)
        if wall <= 0:
            raise ConfigError("no recorded step time to measure idle over")
        return 1.0 - sum(s.busy for s in chosen) / wall

    def to_jsonl(self, path: str | Path) -> Path:
        """Write one JSON object per step (see ``read_jsonl``)."""
        return write_jsonl(path, self.steps)


def write_jsonl(path: str | Path, steps: Iterable[Step]) -> Path:
    """One JSON object per step: index, interval, busy, idle, meta and spans."""
    out = Path(path)
    with out.open("w", encoding="utf-8") as f:
        for s in steps:
            f.write(json.dumps(s.to_dict(), sort_keys=True) + "\n")
    return out


def read_jsonl(path: str | Path) -> list[Step]:
    """The steps of a file ``write_jsonl`` wrote (derived fields are recomputed, not read)."""
    steps = []
    text = Path(path).read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{lineno}: malformed JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}:{lineno}: expected a JSON object")
        steps.append(Step.from_dict(data))
    return steps


# -- profiler cross-check ----------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileCheck:
    """Instrumented spans against the device activity the profiler saw, over one window."""

    device: str
    window: float
    """Seconds from the first step's start to the last step's end (profiler clock)."""
    span_idle: float
    """GPU idle from the busy spans."""
    activity_idle: float
    """Idle from the union of device activity (kernels; operators on a CPU): at least
    ``span_idle`` when the spans are right, since launch gaps inside a span count here."""
    outside_share: float
    """Share of device activity outside every busy span: near 0 when the spans are right."""


def cross_check(
    steps: Sequence[Interval], busy: Sequence[Interval], activity: Sequence[Interval], device: str
) -> ProfileCheck:
    """Compare busy spans with device activity, all on one clock (pure)."""
    if not steps:
        raise ConfigError("no step in the profiled window")
    lo, hi = min(s for s, _ in steps), max(e for _, e in steps)
    window = merge((max(s, lo), min(e, hi)) for s, e in steps)
    wall = union_length(window)
    busy_m = merge(busy)
    act = merge((max(s, lo), min(e, hi)) for s, e in activity)
    act_total = union_length(act)
    inside = union_length(_intersect(act, busy_m))
    return ProfileCheck(
        device=device,
        window=hi - lo,
        span_idle=max(0.0, 1.0 - union_length(_intersect(busy_m, window)) / wall) if wall else 0.0,
        activity_idle=max(0.0, 1.0 - act_total / wall) if wall else 0.0,
        outside_share=(1.0 - inside / act_total) if act_total else 0.0,
    )


def _intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Intersection of two merged interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def profile_check(run: Callable[[Timeline], object], timeline: Timeline) -> ProfileCheck:
    """Run ``run(timeline)`` under torch's profiler and cross-check its spans.

    On a machine with CUDA the activity is every CUDA kernel and the timeline should have
    ``sync=torch.cuda.synchronize``; elsewhere it is every top-level CPU operator.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    options: dict[str, Any] = {}
    if "acc_events" in inspect.signature(profile).parameters:
        # One profiling cycle, so nothing to accumulate; without it torch 2.11 warns, on CUDA,
        # that events are cleared at the end of each cycle.
        options["acc_events"] = True
    previous = timeline.annotate
    timeline.annotate = record_function
    try:
        with profile(activities=activities, **options) as prof:
            run(timeline)
    finally:
        timeline.annotate = previous
    steps: list[Interval] = []
    busy: list[Interval] = []
    activity: list[Interval] = []
    for ev in prof.events():
        interval = (ev.time_range.start / 1e6, ev.time_range.end / 1e6)
        on_cuda = ev.device_type.name == "CUDA"
        if ev.name == f"{MARK}:step" and not on_cuda:
            steps.append(interval)
        elif ev.name.startswith(f"{MARK}:busy:") and not on_cuda:
            busy.append(interval)
        elif ev.is_user_annotation or ev.name.startswith(f"{MARK}:"):
            continue
        elif on_cuda if cuda else (ev.cpu_parent is None or ev.cpu_parent.is_user_annotation):
            activity.append(interval)  # a kernel; on a CPU, a top-level operator
    return cross_check(steps, busy, activity, "cuda" if cuda else "cpu")
