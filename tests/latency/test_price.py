"""``deepgym price``: the pure report, the command over a fake backend, and one real run."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from deepgym import DeepGym, cli, load_environment
from deepgym.cli import common
from deepgym.exceptions import ConfigError
from deepgym.latency import model, plots
from deepgym.latency.price import build_report, cycle, service_samples
from deepgym.models import RunResult, ServiceTime
from deepgym.sandbox.base import Job, RawRun
from deepgym.verdict import Outcome

# -- the pure report -------------------------------------------------------------------------------


def _seed_samples(n: int = 128, late: int = 1) -> tuple[list[float], list[bool]]:
    return [2.0] * (n - late) + [30.0] * late, [False] * (n - late) + [True] * late


def test_report_from_the_seeds_shape() -> None:
    samples, timed_out = _seed_samples()
    r = build_report(
        samples, timed_out, env="e", batch=128, group=8, busy=24.5, timeout=30.0,
        derived_limit=5.0, training=12.2,
    )  # fmt: skip
    p = 1 / 128
    assert r.timeout_rate == p
    assert r.p_stall == model.p_stall(p, 128)
    assert r.corrupted_group_share == model.corrupted_group_share(p, 8)
    assert r.barrier.step_s == pytest.approx(24.5 + 2 + 28 * model.p_stall(p, 128))
    assert r.barrier.idle == pytest.approx(model.gpu_idle(24.5, r.barrier.step_s))
    # The reference-derived limit: a timeout costs 5 s, not 30.
    assert r.derived.step_s == pytest.approx(24.5 + 2 + 3 * model.p_stall(p, 128))
    # Pipelining hides up to 15/16 of training, but only when a step stalls.
    gain = r.barrier.step_s - r.pipelined.step_s
    assert 0 < gain <= 12.2 * 15 / 16
    assert [f.gain_s for f in r.fixes] == sorted((f.gain_s for f in r.fixes), reverse=True)
    assert {f.name for f in r.fixes} == {
        "lower the timeout",
        "push the rate below the knee",
        "per-group pipelining",
    }
    assert r.quantiles_s["p50"] == 2.0 and r.quantiles_s["max"] == 30.0
    assert r.knee_rate == model.knee_rate(128)


def test_a_clean_reward_has_nothing_to_fix_but_the_barrier() -> None:
    r = build_report(
        [0.5] * 16, [False] * 16, env="e", batch=16, group=8, busy=10.0, timeout=30.0,
        derived_limit=1.0,
    )  # fmt: skip
    assert (r.timeout_rate, r.p_stall, r.corrupted_group_share) == (0.0, 0.0, 0.0)
    assert r.barrier.step_s == pytest.approx(10.5)
    rate = next(f for f in r.fixes if f.name == "push the rate below the knee")
    assert rate.gain_s == 0.0 and "already below" in rate.detail


def test_a_limit_below_real_answers_is_priced_as_timeouts() -> None:
    r = build_report(
        [2.0] * 8, [False] * 8, env="e", batch=8, group=8, busy=1.0, timeout=30.0,
        derived_limit=1.0,
    )  # fmt: skip
    assert r.derived.timeout_rate == 1.0  # every 2 s answer would be cut at 1 s
    lower = next(f for f in r.fixes if f.name == "lower the timeout")
    assert "cuts off 100.0% of answers that finish now" in lower.detail


def test_fewer_slots_queue_the_reward() -> None:
    kw = {"env": "e", "batch": 16, "group": 8, "busy": 1.0, "timeout": 30.0, "derived_limit": 9.0}
    wide = build_report([1.0] * 16, [False] * 16, **kw)  # type: ignore[arg-type]
    narrow = build_report([1.0] * 16, [False] * 16, slots=4, **kw)  # type: ignore[arg-type]
    assert wide.barrier.step_s == pytest.approx(2.0)
    assert narrow.barrier.step_s == pytest.approx(1.0 + 4.0)


@pytest.mark.parametrize(
    "kw",
    [
        {"batch": 10, "group": 3},
        {"training": 50.0},
        {"slots": 0},
    ],
)
def test_report_rejects_bad_shapes(kw: dict[str, object]) -> None:
    base: dict[str, object] = {
        "env": "e", "batch": 16, "group": 8, "busy": 1.0, "timeout": 2.0, "derived_limit": 1.0,
    }  # fmt: skip
    with pytest.raises(ConfigError):
        build_report([1.0] * 16, [False] * 16, **{**base, **kw})  # type: ignore[arg-type]


def test_service_time_leaves_queueing_out() -> None:
    r = RunResult(score=1.0, passed=True, service=ServiceTime(queue_ms=900.0, total_ms=1000.0))
    t = RunResult.no_verdict("timeout", "late", service=ServiceTime(total_ms=2000.0))
    assert service_samples([r, t]) == ([0.1, 2.0], [False, True])


def test_cycle() -> None:
    assert cycle(["a", "b"], 5) == ["a", "b", "a", "b", "a"]
    with pytest.raises(ConfigError):
        cycle([], 3)


# -- the command over a fake backend ---------------------------------------------------------------


class TimedBackend:
    """``ok <ms>``: passes after <ms> of service; ``late <ms>``: the answer's time ran out."""

    name = "fake"

    async def run(self, job: Job) -> RawRun:
        if job.answer == job.env.reference_solution:
            word, ms = "ok", 100.0
        else:
            word, _, rest = job.answer.partition(" ")
            ms = float(rest)
        report = (
            {"status": "ok", "score": 1.0, "elapsed_ms": ms}
            if word == "ok"
            else {"status": "solution_timeout", "message": "too slow"}
        )
        return RawRun(
            outcome=Outcome(report=report, in_play=True, verifier_exit_code=0),
            report=report,
            isolation="fake",
            exit_code=0,
            total_ms=ms,
        )

    async def close(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "make_client", lambda sandbox: DeepGym(backend=TimedBackend()))


def invoke(*args: str | Path) -> Result:
    runner = CliRunner(env={"COLUMNS": "200"})
    return runner.invoke(cli.cli, [str(a) for a in args], catch_exceptions=True)


def _answers(tmp_path: Path, answers: list[str]) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"answer": a}) + "\n" for a in answers))
    return path


def test_price_json_over_a_fake_backend(fake: None, tmp_path: Path) -> None:
    answers = _answers(tmp_path, ["ok 2000"] * 15 + ["late 30000"])
    r = invoke(
        "price", "two_sum", "--answers", answers, "--batch", "32", "--group", "8",
        "--busy", "24.5", "--training", "12.2", "--timeout", "30", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["runs"] == 32 and data["timeout_rate"] == 2 / 32
    assert data["p_stall"] == pytest.approx(model.p_stall(2 / 32, 32))
    assert data["corrupted_group_share"] == pytest.approx(model.corrupted_group_share(2 / 32, 8))
    expected = 24.5 + 2.0 + 28.0 * model.p_stall(2 / 32, 32)
    assert data["barrier"]["step_s"] == pytest.approx(expected)
    assert data["derived_limit_s"] == 1.0  # 10 x the reference's 0.1 s
    assert data["derived"]["step_s"] < data["barrier"]["step_s"]
    assert len(data["fixes"]) == 3
    assert data["quantiles_s"]["p50"] == pytest.approx(2.0)


def test_price_text_and_plot(fake: None, tmp_path: Path) -> None:
    answers = _answers(tmp_path, ["ok 500", "ok 700", "late 30000"])
    png = tmp_path / "price.png"
    r = invoke("price", "two_sum", "--answers", answers, "--batch", "16", "--plot", png)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "timeout rate: 31.2% (5/16 timed out)" in out
    assert "P(step stalls)" in out and "corrupted groups" in out
    for name in ("barrier", "per-group pipelining", "reference-derived limit"):
        assert name in out
    assert "fixes, in order of predicted gain" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("missing", ["matplotlib", "numpy"])
def test_price_plot_without_the_plotting_extra_is_one_line_before_any_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as when not installed
    ran = []
    monkeypatch.setattr(common, "make_client", lambda sandbox: ran.append(sandbox))
    answers = _answers(tmp_path, ["ok 1"])
    r = invoke("price", "two_sum", "--answers", answers, "--plot", tmp_path / "p.png")
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and ran == []  # nothing measured
    assert r.stderr.splitlines() == [
        f"Error: --plot needs the latency extra ({missing} is not installed): "
        "pip install -e '.[latency]' in deepgym's checkout, or leave out --plot"
    ]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_plot_that_fails_after_the_measurement_keeps_the_report(
    fake: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, as_json: bool
) -> None:
    def broken(report: object, path: object) -> None:
        raise RuntimeError("no backend")

    monkeypatch.setattr(plots, "plot_price", broken)
    answers = _answers(tmp_path, ["ok 500", "late 30000"])
    png = tmp_path / "p.png"
    r = invoke(
        "price", "two_sum", "--answers", answers, "--batch", "16", "--plot", png,
        *(["--json"] if as_json else []),
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    if as_json:
        assert json.loads(r.stdout)["runs"] == 16
    else:
        assert "fixes, in order of predicted gain" in r.stdout and "plot:" not in r.stdout
    assert r.stderr.splitlines() == [
        f"Error: --plot {png}: not written (RuntimeError: no backend); the report is above"
    ]
    assert not png.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--batch", "10", "--group", "3"], r"--batch \(10\) must be a multiple of --group \(3\)"),
        (["--busy", "0"], "--busy must be a positive number"),
        (["--timeout", "-1"], "--timeout must be a positive number"),
        (["--batch", "0"], "--batch must be a positive int"),
        (["--training", "99"], "--training must be between 0 and --busy"),
        (["--slots", "0"], "--slots must be a positive int"),
        (["--plot", "/no/such/dir/p.png"], "no such directory"),
    ],
)
def test_price_bad_options_are_one_line(
    fake: None, tmp_path: Path, extra: list[str], message: str
) -> None:
    answers = _answers(tmp_path, ["ok 1"])
    r = invoke("price", "two_sum", "--answers", answers, *extra)
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["price", "two_sm", "--answers", "x.jsonl"], "did you mean 'two_sum'"),
        (["price", "two_sum", "--answers", "none.jsonl"], "no such file"),
    ],
)
def test_price_bad_input_is_one_line(
    fake: None, tmp_path: Path, args: list[str], message: str
) -> None:
    r = invoke(*[str(tmp_path / a) if a.endswith(".jsonl") else a for a in args])
    assert r.exit_code == 2
    assert len(r.stderr.splitlines()) == 1 and message in r.stderr


# -- a real sandbox ------------------------------------------------------------------------------


@pytest.mark.sandbox
def test_price_a_builtin_environment_end_to_end(tmp_path: Path) -> None:
    env = load_environment("two_sum")
    never = "def two_sum(nums, target):\n    while True:\n        pass\n"
    wrong = "def two_sum(nums, target):\n    return [0, 1]\n"
    answers = _answers(tmp_path, [env.reference_solution or "", wrong, never])
    r = invoke(
        "price", "two_sum", "--answers", answers, "--batch", "16", "--group", "8",
        "--busy", "1", "--timeout", "2", "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["runs"] == 16
    hits = sum(data["timed_out"])
    assert hits == 5  # the never-returning answer, cycled: indices 2, 5, 8, 11, 14
    assert data["timeout_rate"] == 5 / 16
    assert data["p_stall"] == pytest.approx(1 - (11 / 16) ** 16)
    assert data["corrupted_group_share"] == pytest.approx(1 - (11 / 16) ** 8)
    for t, late in zip(data["service_s"], data["timed_out"], strict=True):
        assert (t >= 1.0) if late else (t < 2.0)
    assert data["quantiles_s"]["p50"] < 1.0
    assert 0 < data["derived_limit_s"] <= 10.0
    assert data["barrier"]["step_s"] > 1.0
    assert 0.0 <= data["barrier"]["idle"] <= 1.0
