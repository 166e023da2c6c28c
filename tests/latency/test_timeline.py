"""Timeline arithmetic on hand-made spans, the JSON-lines record, and the profiler cross-check."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError
from deepgym.latency.timeline import (
    Span,
    Step,
    Timeline,
    cross_check,
    idle_fraction,
    merge,
    read_jsonl,
    union_length,
    write_jsonl,
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _step(tl: Timeline, clock: Clock, spans: list[tuple[str, float, float]], end: float) -> Step:
    with tl.step(arm="x") as step:
        for name, start, stop in spans:
            tl.record(name, start, stop)
        clock.t = end
    return step


def test_barrier_step_idle_is_the_uncovered_share() -> None:
    clock = Clock()
    tl = Timeline(clock=clock)
    step = _step(tl, clock, [("generation", 0, 3), ("reward", 3, 8), ("training", 8, 10)], 10)
    assert (step.wall, step.busy, step.idle) == (10, 5, 0.5)
    assert step.total("reward") == 5 and not tl.steps[0].spans[1].busy


def test_overlapping_busy_spans_count_once() -> None:
    clock = Clock()
    tl = Timeline(clock=clock)
    # Pipelined: training runs inside the reward wait; two training spans overlap each other.
    spans = [
        ("generation", 0, 3),
        ("reward", 3, 9),
        ("training", 4, 5),
        ("training", 4.5, 6),
        ("training", 9, 10),
    ]
    step = _step(tl, clock, spans, 10)
    assert step.busy == pytest.approx(3 + 2 + 1)
    assert step.idle == pytest.approx(0.4)
    assert step.total("training") == pytest.approx(3.5)  # summed, not united
    assert step.covered("training") == pytest.approx(3.0)


def test_busy_time_outside_the_step_is_clipped() -> None:
    assert idle_fraction(0, 10, [(-5, 2), (9, 20)]) == pytest.approx(0.7)
    assert idle_fraction(0, 10, []) == 1.0
    assert idle_fraction(0, 10, [(0, 10), (2, 3)]) == 0.0
    with pytest.raises(ConfigError):
        idle_fraction(5, 5, [])


def test_a_span_can_override_its_names_busy_flag() -> None:
    clock = Clock()
    tl = Timeline(busy=["generation"], clock=clock)
    with tl.step():
        tl.record("training", 0, 1)  # not busy on this timeline
        tl.record("custom", 1, 2, busy=True)
        clock.t = 4
    assert tl.steps[0].busy == 1.0
    assert tl.gpu_idle() == 0.75


def test_gpu_idle_is_time_weighted_across_steps() -> None:
    clock = Clock()
    tl = Timeline(clock=clock)
    _step(tl, clock, [("generation", 0, 1)], 2)  # 50% idle over 2 s
    clock.t = 10
    _step(tl, clock, [("generation", 10, 11)], 18)  # 87.5% idle over 8 s
    assert tl.gpu_idle() == pytest.approx(1 - 2 / 10)
    assert tl.gpu_idle(tl.steps[:1]) == pytest.approx(0.5)


def test_context_manager_spans_use_the_clock_and_sync() -> None:
    clock = Clock()
    synced: list[float] = []
    tl = Timeline(clock=clock, sync=lambda: synced.append(clock.t))
    with tl.step():
        with tl.span("generation"):
            clock.t = 2
        clock.t = 3
        with tl.span("training"):
            clock.t = 4
    s = tl.steps[0]
    assert [(x.name, x.start, x.end, x.busy) for x in s.spans] == [
        ("generation", 0, 2, True),
        ("training", 3, 4, True),
    ]
    assert synced == [0, 0, 2, 3, 4, 4]  # before every clock read
    assert s.idle == pytest.approx(0.25)


def test_misuse_is_a_config_error() -> None:
    tl = Timeline()
    with pytest.raises(ConfigError, match="outside a step"):
        tl.record("generation", 0, 1)
    with tl.step(), pytest.raises(ConfigError, match="do not nest"), tl.step():
        pass
    with tl.step(), pytest.raises(ConfigError, match="ends before it starts"):
        tl.record("x", 2, 1)
    with pytest.raises(ConfigError, match="no recorded step"):
        Timeline().gpu_idle()


def test_a_span_that_raises_is_still_recorded() -> None:
    tl = Timeline()
    with pytest.raises(RuntimeError), tl.step(), tl.span("generation"):
        raise RuntimeError("boom")
    assert [s.name for s in tl.steps[0].spans] == ["generation"]


def test_jsonl_round_trip(tmp_path: Path) -> None:
    clock = Clock()
    tl = Timeline(clock=clock)
    _step(tl, clock, [("generation", 0, 3), ("reward", 3, 8), ("training", 4, 10)], 10)
    clock.t = 11
    _step(tl, clock, [("generation", 11, 12)], 15)
    path = tl.to_jsonl(tmp_path / "t.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["idle"] == pytest.approx(0.1) and first["meta"] == {"arm": "x"}
    back = read_jsonl(path)
    assert back == tl.steps
    assert [s.idle for s in back] == [s.idle for s in tl.steps]


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 0, "start": 0, "end": 1, "spans": []}\n{"step": 1\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: malformed JSON"):
        read_jsonl(bad)
    bad.write_text('{"step": 0, "start": 0, "end": 1, "spans": [{"name": "x"}]}\n')
    with pytest.raises(ConfigError, match="span needs"):
        read_jsonl(bad)
    bad.write_text("[1, 2]\n")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        read_jsonl(bad)


def test_write_jsonl_of_no_steps(tmp_path: Path) -> None:
    assert read_jsonl(write_jsonl(tmp_path / "e.jsonl", [])) == []


intervals = st.lists(
    st.tuples(st.floats(-100, 100), st.floats(0, 50)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=20,
)


@given(intervals)
def test_union_is_no_longer_than_the_sum_and_order_free(xs: list[tuple[float, float]]) -> None:
    u = union_length(xs)
    assert u <= sum(e - s for s, e in xs) + 1e-9
    assert u == pytest.approx(union_length(list(reversed(xs))))
    m = merge(xs)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(m))


@given(intervals, st.floats(-100, 100), st.floats(0.001, 100))
def test_idle_is_a_fraction(xs: list[tuple[float, float]], start: float, wall: float) -> None:
    assert 0.0 <= idle_fraction(start, start + wall, xs) <= 1.0


def test_span_and_step_dicts_round_trip() -> None:
    s = Span("generation", 1.0, 2.5, True)
    assert Span.from_dict(s.to_dict()) == s and s.duration == 1.5
    step = Step(3, 0.0, 4.0, [s], {"k": 1})
    assert Step.from_dict(step.to_dict()) == step


# -- the profiler cross-check ------------------------------------------------------------------


def test_cross_check_by_hand() -> None:
    steps = [(0.0, 10.0)]
    busy = [(0.0, 4.0), (6.0, 10.0)]
    # Activity: 3 s inside busy spans, 1 s in the gap (outside every busy span).
    activity = [(0.5, 2.0), (2.5, 4.0), (6.5, 6.5), (4.5, 5.5), (-3.0, -1.0)]
    c = cross_check(steps, busy, activity, "cpu")
    assert c.window == 10.0
    assert c.span_idle == pytest.approx(0.2)
    assert c.activity_idle == pytest.approx(1 - 4 / 10)
    assert c.outside_share == pytest.approx(1 / 4)
    with pytest.raises(ConfigError):
        cross_check([], busy, activity, "cpu")


def _work(device: str, tl: Timeline, last: str, first_ops: int = 20, last_ops: int = 20) -> None:
    import torch

    x = torch.randn(256, 256, device=device)
    with tl.step():
        with tl.span("generation"):
            for _ in range(first_ops):
                x = torch.tanh(x @ x)
        with tl.span("reward"):
            time.sleep(0.02)
        with tl.span(last):
            for _ in range(last_ops):
                x = torch.tanh(x @ x)


def test_profile_check_cpu_path() -> None:
    """The path that needs no CUDA: the profiler's CPU operators against the spans."""
    torch = pytest.importorskip("torch", reason="the profiler cross-check needs torch")
    from deepgym.latency.timeline import profile_check

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the CUDA test covers profile_check here")
    _work("cpu", Timeline(), "training")  # warm up: first calls pay one-off set-up costs
    # Two clocks over a few hundred ms of work on a shared machine: a stall in one attempt can
    # put them apart by chance, so the best of three attempts must agree (a real disagreement
    # shows in all three).
    gaps = []
    for _ in range(3):
        tl = Timeline()
        check = profile_check(lambda t: _work("cpu", t, "training"), tl)
        assert check.device == "cpu"
        assert check.outside_share < 0.01  # every operator ran inside a busy span
        assert check.activity_idle >= check.span_idle - 0.01
        assert tl.annotate is None  # restored
        gaps.append(abs(check.span_idle - tl.steps[0].idle))
        if gaps[-1] <= 0.05:
            break
    assert min(gaps) <= 0.05, gaps  # two clocks agree


def test_profile_check_sees_work_outside_busy_spans() -> None:
    torch = pytest.importorskip("torch", reason="the profiler cross-check needs torch")
    from deepgym.latency.timeline import profile_check

    cuda = torch.cuda.is_available()
    tl = Timeline(sync=torch.cuda.synchronize if cuda else None)
    device = "cuda" if cuda else "cpu"
    _work(device, Timeline(), "training")  # warm up: first calls pay one-off set-up costs
    # Most of the work (40 of 42 operators) runs in a span that is not busy: the check must say
    # so, whatever a noisy neighbour does to the timing of single operators.
    check = profile_check(lambda t: _work(device, t, "not-busy", 2, 40), tl)
    assert check.outside_share > 0.5


def test_profile_check_cuda_kernels() -> None:
    torch = pytest.importorskip("torch", reason="the profiler cross-check needs torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: torch.cuda.is_available() is False")
    from deepgym.latency.timeline import profile_check

    tl = Timeline(sync=torch.cuda.synchronize)
    _work("cuda", Timeline(sync=torch.cuda.synchronize), "training")  # warm up
    check = profile_check(lambda t: _work("cuda", t, "training"), tl)
    assert check.device == "cuda"
    assert check.outside_share < 0.05
    assert check.activity_idle >= check.span_idle - 0.01
