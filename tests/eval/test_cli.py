"""``deepgym eval --model-url``: the report, the files, the store, and resume of a model run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from deepgym.cli import cli, common
from deepgym.client import DeepGym
from deepgym.envs.registry import load_environment
from deepgym.store import RunStore
from tests.eval.child_eval import client
from tests.eval.openai_server import serve
from tests.procs import sigint_as_a_terminal_has_it

NAMES = ["add_duration_format", "bipartite_coloring", "coin_change"]


@pytest.fixture(autouse=True)
def fake_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    def make_client(sandbox: str | None) -> DeepGym:
        return client()

    monkeypatch.setattr(common, "make_client", make_client)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)


def scripts() -> dict[str, list[str]]:
    easy, mixed, hard = (load_environment(n).task for n in NAMES)
    return {
        easy: ["text:pass"],
        mixed: ["text:pass", "text:fail"],
        hard: ["400"],
    }  # not retried: a generation failure at once


def test_eval_a_model(tmp_path: Path) -> None:
    out, keep, store = tmp_path / "s.jsonl", tmp_path / "keep.jsonl", tmp_path / "r.sqlite"
    with serve(scripts()) as (url, _):
        r = invoke(
            "eval", ",".join(NAMES), "--model-url", url, "--model", "m", "-n", "4",
            "--k", "1,2", "--pass-hat", "2", "--out", out, "--filter", keep, "--store", store,
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "pass@1: 0.7500" in r.output  # (1 + 0.5) / 2: the third problem has no verdict
    assert "no verdict: 4 (4 not generated, 0 not judged; left out of n)" in r.output
    assert "pass^2: " in r.output and "(1 problems with < 1 judged)" in r.output
    assert "filter: 1 problems" in r.output and "too easy 1, too hard 0" in r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 12 and sum(row["text"] is None for row in rows) == 4
    assert [json.loads(x)["env"] for x in keep.read_text().splitlines()] == [NAMES[1]]


def test_json_and_resume(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    with serve(scripts()) as (url, server):
        r = invoke(
            "eval", ",".join(NAMES), "--model-url", url, "--model", "m", "-n", "2",
            "--json", "--store", store,
        )  # fmt: skip
        assert r.exit_code == 0, r.output
        report = json.loads(r.output)
        assert report["generation_failed"] == 2 and report["difficulty"]["learnable"] == 1
        assert report["generation_failures"] == {"http_error": 2}
        asked = server.total
        server.scripts[load_environment(NAMES[2]).task] = ["text:fail"]
        r = invoke("eval", "--resume", report["run_id"], "--store", store, "--json")
        assert r.exit_code == 0, r.output
        assert server.total - asked == 2  # only the two samples the server did not give
    again = json.loads(r.output[r.output.index("{") :])
    assert again["generation_failed"] == 0 and again["difficulty"]["too_hard"] == 1
    with RunStore(store) as s:
        assert s.run(report["run_id"]).complete


def test_model_url_needs_a_model() -> None:
    r = invoke("eval", NAMES[0], "--model-url", "http://127.0.0.1:9/v1")
    assert r.exit_code == 2 and "--model" in r.output


def test_ctrl_c_prints_the_resume_line(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    with serve(default=["slow:0.1:pass", "slow:5:pass"]) as (url, _):
        child = subprocess.Popen(
            [sys.executable, "-m", "deepgym", "eval", NAMES[0], "--model-url", url,
             "--model", "m", "-n", "4", "--store", str(store)],
            env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=sigint_as_a_terminal_has_it,
        )  # fmt: skip
        # Ctrl-C once a sample is stored (the next ones take 5 s each): a loaded host may hold
        # the child's start back for long, so wait for that as long as the test's own timeout
        # allows, never interrupt a run that has not begun.
        deadline = time.monotonic() + 80
        stored = False
        while not stored and time.monotonic() < deadline and child.poll() is None:
            if store.exists():
                with RunStore(store) as s:
                    runs = s.runs()
                    stored = bool(runs and s.samples(runs[0].id))
            time.sleep(0.02)
        if not stored:
            child.kill()
            _, err = child.communicate()
        assert stored, f"no sample stored in 80 s: {err[-2000:]}"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    assert child.returncode == 130, err
    assert "sample texts stored in run" in err and "deepgym eval --resume" in err
    with RunStore(store) as s:
        assert s.runs()[0].status == "stopped"


def test_a_hostile_server_is_reported_by_cause(tmp_path: Path) -> None:
    """A reply over --max-reply-mb and one past --timeout: counted by cause, the run finished,
    and the cap and the deadline kept in the store for --resume."""
    easy, mixed, hard = (load_environment(n).task for n in NAMES)
    hostile = {easy: ["text:pass"], mixed: ["huge:200000"], hard: ["trickle:0.05:" + "x" * 200]}
    store, out = tmp_path / "r.sqlite", tmp_path / "s.jsonl"
    with serve(hostile) as (url, server):
        r = invoke(
            "eval", ",".join(NAMES), "--model-url", url, "--model", "m", "--store", store,
            "--max-reply-mb", "0.0625", "--timeout", "0.5", "--out", out,
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "no verdict: 2 (2 not generated, 0 not judged; left out of n)" in r.output
    assert "Not generated: 1 reply_too_large, 1 deadline" in r.output
    assert server.requests == {easy: 1, mixed: 1, hard: 1}  # neither is asked again
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [row["cause"] for row in rows] == [None, "reply_too_large", "deadline"]
    with RunStore(store) as s:
        model = s.run(s.runs()[0].id).params["model"]
    assert (model["max_reply_bytes"], model["timeout"]) == (65536, 0.5)


@pytest.mark.parametrize(
    ("option", "value"), [("--max-reply-mb", "0"), ("--max-reply-mb", "nan"), ("--timeout", "0")]
)
def test_bad_limits_name_the_option(option: str, value: str) -> None:
    r = invoke(
        "eval",
        NAMES[0],
        "--model-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        option,
        value,
        "--no-store",
    )
    assert r.exit_code == 2 and option in r.output, r.output


def test_no_sample_generated_names_the_cause_and_exits_3() -> None:
    with serve(default=["400"]) as (url, _):
        r = invoke("eval", NAMES[0], "--model-url", url, "--model", "m", "-n", "2", "--no-store")
    assert r.exit_code == 3, r.output
    assert f"Error: no sample was generated by {url}: 2 http_error (first: HTTP 400" in r.output


def test_resume_keeps_the_files_the_run_started_with(tmp_path: Path) -> None:
    store, out, keep = tmp_path / "r.sqlite", tmp_path / "s.jsonl", tmp_path / "k.jsonl"
    with serve(scripts()) as (url, server):
        r = invoke(
            "eval", ",".join(NAMES), "--model-url", url, "--model", "m", "-n", "2", "--json",
            "--store", store, "--out", out, "--filter", keep,
        )  # fmt: skip
        run_id = json.loads(r.stdout)["run_id"]
        out.unlink()
        keep.unlink()  # as if the first call had been stopped before writing them
        server.scripts[load_environment(NAMES[2]).task] = ["text:fail"]
        r = invoke("eval", "--resume", run_id, "--store", store)
    assert r.exit_code == 0, r.output
    assert len(out.read_text().splitlines()) == 6 and keep.exists()


def test_runs_shows_a_model_eval_with_its_model_pass_at_k_and_whole_time(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    with serve(scripts()) as (url, server):
        r = invoke(
            "eval", ",".join(NAMES), "--model-url", url, "--model", "m", "-n", "2", "--json",
            "--store", store,
        )  # fmt: skip
        run_id = json.loads(r.output)["run_id"]
        with RunStore(store) as s:
            first = s.run(run_id).execution_time_ms or 0.0
        server.scripts[load_environment(NAMES[2]).task] = ["slow:0.2:fail"]
        r = invoke("eval", "--resume", run_id, "--store", store, "--json")
        again = json.loads(r.output[r.output.index("{") :])["execution_time_ms"]
    with RunStore(store) as s:
        assert s.run(run_id).execution_time_ms == pytest.approx(first + again)
    r = invoke("runs", run_id, "--store", store)
    assert r.exit_code == 0, r.output
    assert f"Model m at {url}: 3 problems x 2 samples" in r.output
    assert "pass@1: 0.5000" in r.output and "Judged: 6/6 samples" in r.output
    assert f"Time: {(first + again) / 1000:.1f} s for 6 samples" in r.output


def test_the_progress_label_leaves_room_for_the_rate_on_80_columns() -> None:
    import io

    from rich.console import Console

    from deepgym.cli import model_eval
    from deepgym.eval.evaluate import Sample
    from deepgym.models import RunResult

    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system=None)
    title = ",".join(f"environment_number_{i}" for i in range(20))
    with model_eval._progress(title, console) as advance:
        advance(Sample("p", 0, "x", result=RunResult(score=1.0, passed=True)))
        console.print()  # a frame of the bar, as the terminal shows it
    assert "pass@1 1.000" in buf.getvalue(), buf.getvalue()
