"""The sweep harness: arms, blocks, the GRPO step's gradient, and a tiny end-to-end sweep."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym import cli
from deepgym.exceptions import ConfigError
from deepgym.latency.arms import DEFAULT_ARMS, Arm, Draws, parse_arm
from deepgym.latency.lmconfig import TinyLMConfig
from deepgym.latency.predictions import load_predictions
from deepgym.latency.sweep import SweepConfig
from deepgym.latency.timeline import read_jsonl

TINY_LM = TinyLMConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, d_ff=32)
TINY = {
    "blocks": 1, "prompts": 2, "group": 4, "prompt_len": 4, "new_tokens": 4, "model": TINY_LM,
    "warmup": 1, "settle": 0.0,
}  # fmt: skip


def test_parse_arm() -> None:
    assert parse_arm("const:2.5") == Arm("const:2.5", "dial", median=2.5)
    assert parse_arm("stall:1") == Arm("stall:1", "dial", stragglers=1)
    assert parse_arm("rate:0.01") == Arm("rate:0.01", "dial", rate=0.01)
    assert parse_arm("pipe:1") == Arm("pipe:1", "dial", stragglers=1, pipelined=True)
    assert parse_arm("sandbox-pipe") == Arm("sandbox-pipe", "sandbox", pipelined=True)
    for bad in ("const:-1", "rate:2", "stall:x", "pipe:-1", "bogus", "const:nan"):
        with pytest.raises(ConfigError, match="unknown arm"):
            parse_arm(bad)
    assert all(parse_arm(a) for a in DEFAULT_ARMS)


@pytest.mark.parametrize(
    "kw",
    [{"blocks": 0}, {"arms": ()}, {"arms": ("const:2", "const:2")}, {"arms": ("nope",)},
     {"device": "tpu"}, {"model": {"d_model": 10, "n_heads": 4}}, {"threads": 0},
     {"threads": True}, {"settle": -1.0}, {"model": {"n_layers": 0}}],
)  # fmt: skip
def test_config_validation(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        if isinstance(kw.get("model"), dict):
            kw = {**kw, "model": TinyLMConfig(**kw["model"])}  # type: ignore[arg-type]
        SweepConfig(**kw)  # type: ignore[arg-type]


def test_blocks_are_randomised_complete_and_reproducible() -> None:
    arms = list(DEFAULT_ARMS)
    a, b, c = (Draws.of(0, 0, arms, 64), Draws.of(0, 0, arms, 64), Draws.of(0, 1, arms, 64))
    assert sorted(a.order) == sorted(arms)  # every arm once
    assert a == b  # the same seed and block: the same order and draws
    assert a.order != c.order
    assert sorted(a.stragglers) == list(range(64))


def test_per_group_backward_gives_the_barriers_gradient() -> None:
    torch = pytest.importorskip("torch", reason="the sweep needs torch (the 'sweep' extra)")
    from deepgym.latency.tinylm import TinyCausalLM, TinyLMConfig, generate, group_loss

    torch.manual_seed(0)
    m = TinyCausalLM(TinyLMConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, d_ff=32))
    seqs = generate(m, torch.randint(0, 32, (12, 4)), 5, torch.Generator().manual_seed(1))
    adv = [1.0, -1.0, None, 0.5, -0.5, 0.0, 1.2, -1.2, 0.3, None, -0.3, 0.0]

    def grads(order: list[int]) -> list[torch.Tensor]:
        m.zero_grad()
        for g in order:
            loss = group_loss(m, seqs[g * 4 : (g + 1) * 4], 4, adv[g * 4 : (g + 1) * 4], 12)
            assert loss is not None
            loss.backward()
        return [p.grad.clone() for p in m.parameters() if p.grad is not None]

    whole = grads([0, 1, 2])
    m.zero_grad()
    loss = group_loss(m, seqs, 4, adv, 12)
    assert loss is not None
    loss.backward()
    one_batch = [p.grad.clone() for p in m.parameters() if p.grad is not None]
    arrival = grads([2, 0, 1])  # the order groups finish in
    for x, y, z in zip(whole, one_batch, arrival, strict=True):
        assert torch.allclose(x, y, atol=1e-6) and torch.allclose(x, z, atol=1e-6)
    assert group_loss(m, seqs[:2], 4, [None, None], 12) is None


def test_generation_is_identical_for_identical_weights_and_seed() -> None:
    torch = pytest.importorskip("torch", reason="the sweep needs torch (the 'sweep' extra)")
    from deepgym.latency.tinylm import TinyCausalLM, TinyLMConfig, generate

    m = TinyCausalLM(TinyLMConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2, d_ff=32))
    prompts = torch.randint(0, 32, (4, 3))
    one = generate(m, prompts, 6, torch.Generator().manual_seed(7))
    two = generate(m, prompts, 6, torch.Generator().manual_seed(7))
    assert one.shape == (4, 9) and torch.equal(one, two)
    with pytest.raises(ConfigError, match="max_len"):
        m(torch.zeros((1, 200), dtype=torch.long))


def test_a_tiny_sweep_of_the_dial_arms(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the sweep needs torch (the 'sweep' extra)")
    from deepgym.latency.sweep import run_sweep

    arms = ("const:2", "stall:1", "pipe:1", "rate:0.05")
    cfg = SweepConfig(**TINY, arms=arms, out=tmp_path / "out")  # type: ignore[arg-type]
    seen: list[str] = []
    # (its speed is no test's business: a loaded host took 23 s; pytest's timeout bounds it)
    result = run_sweep(cfg, load_predictions(), progress=lambda d, t, label: seen.append(label))
    assert sorted(seen) == sorted(arms) and len(result.rows) == 4
    assert [r.position for r in result.rows] == [0, 1, 2, 3]
    assert {r.arm for r in result.rows} == set(arms)
    # Generation was exactly fixed; the dial's timeout shows up as idle, at the same median.
    assert result.metrics["generation.distinct_outputs"] == 1.0
    assert result.arms["stall:1"].idle > result.arms["const:2"].idle
    assert result.arms["stall:1"].stall_share == 1.0 and result.arms["const:2"].stall_share == 0
    assert result.arms["pipe:1"].mode == "pipelined"
    for a in result.arms.values():  # the barrier model was fed each dial step's own timings
        assert a.model_step > 0
    assert "step_ratio.pipe:1/stall:1" in result.metrics
    assert len(result.profile) == 2 and all(p.device in ("cpu", "cuda") for p in result.profile)
    # Every prediction got a verdict; the sandbox ones have no data in this sweep.
    status = {v.prediction.id: v.status for v in result.verdicts}
    assert set(status.values()) <= {"held", "refuted", "no data"}
    assert status["sandbox-is-only-service-time"] == "no data"
    assert status["generation-exactly-fixed"] == "held"
    # Outputs: a raw shard per block, the timeline, the summary, a plot.
    out = tmp_path / "out"
    with (out / "shards" / "block-000.csv").open() as f:
        shard = list(csv.DictReader(f))
    assert [row["arm"] for row in shard] == [r.arm for r in result.rows]
    steps = read_jsonl(out / "timeline.jsonl")
    assert [s.meta["arm"] for s in steps] == [r.arm for r in result.rows]
    assert steps[0].idle == pytest.approx(result.rows[0].idle)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"].keys() == set(arms) and summary["verdicts"]
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "summary.csv").exists()


def test_sweep_command_tiny(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the sweep needs torch (the 'sweep' extra)")
    r = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli.cli,
        ["sweep", "--blocks", "1", "--prompts", "2", "--group", "4", "--tokens", "3",
         "--d-model", "16", "--layers", "1", "--arms", "const:2,stall:1,sandbox",
         "--no-sandbox", "--no-profile", "--no-plot", "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "pre-registered predictions" in r.stdout
    assert "const:2" in r.stdout and "sandbox" not in r.stdout.split("pre-registered")[0]
    assert (tmp_path / "o" / "summary.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arms", "bogus"], "unknown arm 'bogus'"),
        (["--blocks", "0"], "blocks must be a positive int"),
        (["--arms", ","], "--arms must name at least one arm"),
        (["--arms", "sandbox", "--no-sandbox"], "arms must name at least one arm"),
    ],
)
def test_sweep_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    pytest.importorskip("torch", reason="the sweep needs torch (the 'sweep' extra)")
    r = CliRunner().invoke(cli.cli, ["sweep", *args, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert len(r.stderr.splitlines()) == 1 and message in r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("missing", "flags", "message"),
    [
        ("torch", ["--no-plot"], "the sweep needs the sweep extra (torch is not installed): "
         "pip install -e '.[sweep]' in deepgym's checkout"),
        ("matplotlib", [], "plotting the sweep needs the latency extra (matplotlib is not "
         "installed): pip install -e '.[latency]' in deepgym's checkout, or give --no-plot"),
    ],
)  # fmt: skip
def test_sweep_without_an_extra_is_one_line_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: str, flags: list[str], message: str
) -> None:
    if missing != "torch":
        pytest.importorskip("torch", reason="the sweep needs torch (the 'sweep' extra)")
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as when not installed
    r = CliRunner().invoke(cli.cli, ["sweep", *flags, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == [f"Error: {message}"]
    assert not (tmp_path / "o").exists()
