"""The run store: results committed as they come, totals that match ``Totals.of``, and resume.

The last test kills a real ``deepgym eval`` (SIGKILL) halfway, resumes it, and checks that the
totals equal an uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from deepgym import cli
from deepgym.cli import common
from deepgym.client import DeepGym
from deepgym.envs.qa.report import QaEntry
from deepgym.exceptions import ConfigError
from deepgym.models import RunResult, ServiceTime, Totals
from deepgym.scheduling import TimeLimitPolicy
from deepgym.store import (
    SCHEMA_VERSION,
    RunStore,
    default_store_path,
    record_eval,
    resume_inputs,
    save_qa,
)
from tests.envs.qa_sample import sample_entries
from tests.fakes import FakeBackend

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.sqlite") as s:
        yield s


def _result(kind: str, env: str = "e") -> RunResult:
    if kind == "nv":
        return RunResult.no_verdict("sandbox_error", "down", env_name=env)
    if kind == "pass":
        return RunResult(score=1.0, passed=True, env_name=env)
    return RunResult(score=float(kind), passed=False, env_name=env)


# --- basics -------------------------------------------------------------------------------------


def test_default_path_is_under_deepgym_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / "runs.sqlite"
    monkeypatch.delenv("DEEPGYM_HOME")
    assert default_store_path() == Path.home() / ".deepgym" / "runs.sqlite"


def test_wal_and_a_round_trip(store: RunStore) -> None:
    with contextlib.closing(sqlite3.connect(store.path)) as db:
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    run_id = store.create_run("eval", "a,b", ["a", "b"], ["x", "y"], {"max_parallel": 2})
    assert store.inputs(run_id) == [("a", "x"), ("b", "y")]
    info = store.run(run_id)
    assert (info.kind, info.source, info.status, info.total, info.recorded) == (
        "eval",
        "a,b",
        "running",
        2,
        0,
    )
    assert info.params == {"max_parallel": 2} and not info.complete
    r = _result("0.5", "b")
    store.record(run_id, 1, r)
    assert store.results(run_id) == {1: r}
    store.record(run_id, 0, _result("nv", "a"))
    store.finish(run_id, "complete", 12.0)
    info = store.run(run_id)
    assert info.complete and info.execution_time_ms == 12.0
    assert store.run_times(run_id) == {"a": [0.0], "b": [0.0]}


def test_stored_times_leave_out_the_wait_for_a_sandbox(store: RunStore) -> None:
    """The store's time is ``ServiceTime.run_ms``: a cold pool's 145 ms wait is not the run's."""
    run_id = store.create_run("batch", "e", ["e"], ["x"])
    cold = ServiceTime(queue_ms=145.0, start_ms=2.0, verifier_ms=10.0, total_ms=157.0)
    store.record(run_id, 0, RunResult(score=1.0, passed=True, env_name="e", service=cold))
    assert store.run_times(run_id) == {"e": [12.0]} == store.run_times()
    assert store.results(run_id)[0].service == cold  # the whole split is kept in the result


def test_a_second_result_for_an_index_is_refused(store: RunStore) -> None:
    run_id = store.create_run("batch", "e", ["e"], ["x"])
    store.record(run_id, 0, _result("pass"))
    with pytest.raises(ConfigError, match="index 0 already has a result"):
        store.record(run_id, 0, _result("pass"))
    assert store.run(run_id).totals.passed == 1


def test_unknown_run_and_bad_files(store: RunStore, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no run 'nope'"):
        store.run("nope")
    with pytest.raises(ConfigError, match="no such run"):
        store.record("nope", 0, _result("pass"))
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match="not a deepgym run store"):
        RunStore(junk)
    newer = tmp_path / "newer.sqlite"
    sqlite3.connect(newer).execute("PRAGMA user_version=99").connection.close()
    with pytest.raises(ConfigError, match="newer"):
        RunStore(newer)


def test_runs_are_listed_newest_first(store: RunStore) -> None:
    ids = [store.create_run("batch", f"s{i}", ["e"], ["x"]) for i in range(3)]
    assert [r.id for r in store.runs()] == ids[::-1]
    assert [r.id for r in store.runs(limit=2)] == ids[:0:-1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["pass", "nv", "0.0", "0.25", "0.5", "0.999"]), max_size=30))
def test_stored_totals_are_the_contracts(kinds: list[str]) -> None:
    results = [_result(k) for k in kinds]
    with RunStore(":memory:") as s:
        run_id = s.create_run("batch", "e", ["e"] * len(kinds), [""] * len(kinds))
        for i in reversed(range(len(results))):  # arrival order is not index order
            s.record(run_id, i, results[i])
        assert s.run(run_id).totals == Totals.of(results)


# --- recording and resuming an eval -------------------------------------------------------------

ANSWERS = ["pass", "fail", "down", "pass", "fail", "pass"]


def _dg() -> tuple[DeepGym, FakeBackend]:
    fake = FakeBackend()
    dg = DeepGym(time_limits=TimeLimitPolicy(factor=None), backend=fake)
    return dg, fake


def test_record_eval_scores_only_what_is_missing(store: RunStore) -> None:
    from deepgym.envs.registry import load_suite

    envs = load_suite("builtin")[: len(ANSWERS)]
    names = [e.name for e in envs]
    dg, fake = _dg()
    with dg:
        whole = dg.eval(envs, dict(zip(names, ANSWERS, strict=True)))
    run_id = store.create_run("eval", ",".join(names), names, ANSWERS)
    for i in (0, 3):  # recorded before the process died
        store.record(run_id, i, whole.results[i])
    dg, fake = _dg()
    progress: list[tuple[int, int]] = []
    with dg:
        resumed = record_eval(
            dg, store, run_id, envs, ANSWERS, progress=lambda d, t: progress.append((d, t))
        )
    assert fake.calls == {"fail": 2, "pass": 1, "down": 2}  # indices 1, 2, 4, 5 only
    assert progress[0] == (3, 6) and progress[-1] == (6, 6)
    assert resumed.totals == whole.totals
    assert resumed.env_names == names
    info = store.run(run_id)
    assert info.complete and info.totals == whole.totals
    assert store.results(run_id) == dict(enumerate(resumed.results))


def test_a_resumed_eval_scores_again_what_has_no_verdict_and_keeps_every_verdict(
    store: RunStore,
) -> None:
    """A run stored without a verdict (a service that died with it in flight) is ours: the
    resume scores it again, and the totals become an uninterrupted eval's."""
    from deepgym.envs.registry import load_suite

    envs = load_suite("builtin")[: len(ANSWERS)]
    names = [e.name for e in envs]
    dg, fake = _dg()
    with dg:
        whole = dg.eval(envs, dict(zip(names, ANSWERS, strict=True)))
    run_id = store.create_run("eval", ",".join(names), names, ANSWERS)
    lost = RunResult.no_verdict("sandbox_error", "the service died", env_name=names[5])
    for i, r in enumerate(whole.results[:5]):
        store.record(run_id, i, r)
    store.record(run_id, 5, lost)  # "pass", taken by the dead service: no verdict
    store.finish(run_id)
    assert store.run(run_id).complete  # every index has a result...
    assert store.run(run_id).totals != whole.totals  # ...and the totals are not the eval's
    envs_again, answers = resume_inputs(store, run_id, lambda s: envs)  # still resumable
    assert answers == ANSWERS
    dg, fake = _dg()
    with dg:
        resumed = record_eval(dg, store, run_id, envs_again, answers)
    assert fake.calls == {"pass": 1, "down": 2}  # index 5, and index 2 ("down") once more
    assert resumed.totals == whole.totals
    after = store.results(run_id)
    assert after[5].passed and after[5].has_verdict
    assert {i: after[i] for i in (0, 1, 3, 4)} == {i: whole.results[i] for i in (0, 1, 3, 4)}
    info = store.run(run_id)
    assert info.complete and info.recorded == 6 and info.totals == whole.totals
    assert not after[2].has_verdict  # "down" stays without a verdict: resumable, never complete
    resume_inputs(store, run_id, lambda s: envs)
    with pytest.raises(ConfigError, match="has a verdict"):  # a verdict is never replaced
        store.replace_no_verdict(run_id, 5, lost)
    with pytest.raises(ConfigError, match="already has a result"):
        store.record(run_id, 2, lost)


def test_a_complete_eval_with_every_verdict_has_nothing_to_resume(store: RunStore) -> None:
    from deepgym.envs.registry import load_suite

    envs = load_suite("builtin")[:2]
    names = [e.name for e in envs]
    dg, _ = _dg()
    run_id = store.create_run("eval", ",".join(names), names, ["pass", "fail"])
    with dg:
        record_eval(dg, store, run_id, envs, ["pass", "fail"])
    with pytest.raises(ConfigError, match="is complete, every run with a verdict"):
        resume_inputs(store, run_id, lambda s: envs)


def test_resume_checks_the_run(store: RunStore) -> None:
    from deepgym.envs.registry import load_environment

    batch = store.create_run("batch", "two_sum", ["two_sum"], ["x"])
    with pytest.raises(ConfigError, match="is a batch, not an eval"):
        resume_inputs(store, batch, lambda s: [])
    ev = store.create_run("eval", "two_sum,fizzbuzz", ["two_sum", "fizzbuzz"], ["x", "y"])
    with pytest.raises(ConfigError, match="no longer names"):
        resume_inputs(store, ev, lambda s: [load_environment("two_sum")])
    envs, answers = resume_inputs(store, ev, lambda s: [load_environment(n) for n in s.split(",")])
    assert [e.name for e in envs] == ["two_sum", "fizzbuzz"] and answers == ["x", "y"]


# --- the CLI ------------------------------------------------------------------------------------


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    fake = FakeBackend()
    monkeypatch.setattr(common, "make_client", lambda sandbox: DeepGym(backend=fake))
    return fake


def invoke(*args: str | Path) -> tuple[int, str, str]:
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli.cli, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def test_cli_eval_records_and_runs_lists(fake_backend: FakeBackend, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"two_sum": "pass", "fizzbuzz": "down"}))
    code, out, err = invoke("eval", "two_sum,fizzbuzz,coin_change", "--answers", answers)
    assert code == 0, err
    (run_line,) = [line for line in err.splitlines() if line.startswith("run ")]
    run_id = run_line.split()[1]
    with RunStore(default_store_path()) as s:
        info = s.run(run_id)
    assert info.complete and info.totals.no_verdict_count == 1 and info.totals.passed == 2
    code, out, _ = invoke("runs")
    (line,) = [line for line in out.splitlines() if run_id in line]
    assert code == 0 and "66.67%" in line and "100.00%" in line  # headline 2/3, judged 2/2
    code, out, _ = invoke("runs", "--json")
    (row,) = json.loads(out)
    assert row["id"] == run_id and row["totals"]["judged_pass_rate"] == 1.0
    code, _, err = invoke("eval", "--resume", run_id)  # fizzbuzz had no verdict: again
    assert code == 0, err
    assert "(0 to score, 1 without a verdict to score again)" in err
    assert fake_backend.calls["down"] == 4 and fake_backend.calls["pass"] == 1  # verdicts kept
    answers.write_text(json.dumps({"two_sum": "pass", "fizzbuzz": "fail"}))
    code, _, err = invoke("eval", "two_sum,fizzbuzz", "--answers", answers)
    assert code == 0, err
    (run_line,) = [line for line in err.splitlines() if line.startswith("run ")]
    code, _, err = invoke("eval", "--resume", run_line.split()[1])
    assert code == 2 and "is complete" in err


def test_cli_eval_no_store_and_argument_checks(fake_backend: FakeBackend, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"two_sum": "pass"}))
    code, _, err = invoke("eval", "two_sum", "--answers", answers, "--no-store")
    assert code == 0 and "run " not in err
    assert not default_store_path().exists()
    code, _, err = invoke("eval", "two_sum")
    assert code == 2 and "--answers" in err
    code, _, err = invoke("eval", "two_sum", "--answers", answers, "--resume", "x")
    assert code == 2 and "from the store" in err
    code, _, err = invoke("eval", "--resume", "nope", "--store", tmp_path / "s.sqlite")
    assert code == 2 and "no run 'nope'" in err
    code, out, _ = invoke("runs", "--store", tmp_path / "none.sqlite")
    assert code == 0 and "no runs yet" in out


# --- kill a real eval halfway, resume it --------------------------------------------------------

SLOW = "import time\ntime.sleep(0.25)\n"


def _deepgym(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "deepgym", *map(str, args)]


def _totals(stdout: str) -> dict[str, object]:
    data = json.loads(stdout)
    return {k: data[k] for k in Totals.model_fields}


@pytest.mark.sandbox
def test_a_killed_eval_resumes_to_the_same_totals(tmp_path: Path) -> None:
    from deepgym.envs.registry import load_suite

    broken = tmp_path / "broken_verifier"  # never judges: a no-verdict result every time
    broken.mkdir()
    (broken / "metadata.json").write_text(json.dumps({"name": "broken_verifier", "timeout": 5}))
    (broken / "verifier.py").write_text(
        "def verify(solution, test_cases):\n    raise RuntimeError('the verifier is broken')\n"
    )
    envs = [e for e in load_suite("builtin") if e.kind == "function" and e.reference_solution][:14]
    answers = {}
    for i, e in enumerate(envs):  # right, wrong, right, ... each slowed a little
        answers[e.name] = SLOW + (e.reference_solution or "" if i % 2 == 0 else "x = 1\n")
    answers["broken_verifier"] = SLOW
    spec = ",".join([e.name for e in envs[:7]] + [str(broken)] + [e.name for e in envs[7:]])
    answers_file = tmp_path / "answers.json"
    answers_file.write_text(json.dumps(answers))
    store = tmp_path / "runs.sqlite"
    base = ["eval", spec, "--answers", answers_file, "--store", store, "--max-parallel", "2"]

    whole = subprocess.run(_deepgym(*base, "--json"), capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr
    expected = _totals(whole.stdout)
    assert expected["no_verdict_count"] == 1 and 0 < expected["passed"] < 15  # type: ignore[operator]

    victim = subprocess.Popen(
        _deepgym(*base), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    run_id = None
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            with RunStore(store) as s:
                running = [r for r in s.runs() if not r.complete]
                if running and running[0].recorded >= 4:
                    run_id = running[0].id
                    break
            time.sleep(0.02)
        assert run_id is not None, "the eval recorded nothing"
        os.kill(victim.pid, signal.SIGKILL)
    finally:
        victim.kill()
        victim.wait(30)
        assert victim.stderr is not None
        victim.stderr.close()
    assert victim.returncode == -signal.SIGKILL
    with RunStore(store) as s:
        killed = s.run(run_id)
        kept = s.results(run_id)
    assert 4 <= killed.recorded < killed.total == 15, "killed too late to test a resume"

    resumed = subprocess.run(
        _deepgym("eval", "--resume", run_id, "--store", store, "--json"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert _totals(resumed.stdout) == expected
    with RunStore(store) as s:
        info = s.run(run_id)
        assert info.complete and info.recorded == 15
        assert info.totals.model_dump() == expected
        after = s.results(run_id)
    verdicts = {i: r for i, r in kept.items() if r.has_verdict}
    assert {i: after[i] for i in verdicts} == verdicts  # a verdict stored before the kill stays


def test_cli_run_batch_records_each_result(fake_backend: FakeBackend, tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(json.dumps(a) for a in ["pass", "fail", "down"]))
    store = tmp_path / "s.sqlite"
    code, out, err = invoke("run-batch", "two_sum", answers, "--store", store, "--json")
    assert code == 0, err
    batch = json.loads(out)
    with RunStore(store) as s:
        (info,) = s.runs()
        run_id = info.id
        stored = s.results(run_id)
        assert s.inputs(run_id) == [("two_sum", "pass"), ("two_sum", "fail"), ("two_sum", "down")]
    assert info.kind == "batch" and info.complete and info.source == "two_sum"
    assert [stored[i].model_dump(mode="json") for i in range(3)] == batch["results"]
    assert info.totals.no_verdict_count == batch["no_verdict_count"] == 1


def test_a_run_whose_process_is_gone_reads_as_stopped(store: RunStore) -> None:
    mine = store.create_run("eval", "builtin", ["a"], ["x"])
    assert store.run(mine).status == "running"  # this process is recording it
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    gone = store.create_run("eval", "builtin", ["a"], ["x"])
    with contextlib.closing(sqlite3.connect(store.path)) as db, db:
        owner = f"{store_owner_host()}:{dead.stdout.strip()}:1"
        db.execute("UPDATE runs SET owner = ? WHERE id = ?", (owner, gone))
    assert store.run(gone).status == "stopped"
    store.claim(gone)  # a resume takes it over
    assert store.run(gone).status == "running"


def store_owner_host() -> str:
    import socket

    return socket.gethostname()


def test_an_interrupted_recording_marks_the_run_stopped(store: RunStore) -> None:
    class Stop(KeyboardInterrupt):
        """What SIGTERM raises in the command line: a KeyboardInterrupt."""

    def stop(signum: int, frame: object) -> None:
        raise Stop()

    from deepgym.envs.registry import load_suite

    envs = load_suite("builtin")[:6]
    run_id = store.create_run("eval", "builtin", [e.name for e in envs], ["x"] * 6)
    dg, _ = _dg()
    previous = signal.signal(signal.SIGUSR1, stop)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(Stop):
            record_eval(dg, store, run_id, envs, ["sleep:0.2"] * 6, max_parallel=1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
        dg.close()
    info = store.run(run_id)
    assert info.status == "stopped" and 1 <= info.recorded < 6


def test_a_version_1_store_gains_the_owner_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.executescript(
            "CREATE TABLE runs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, source TEXT NOT NULL, "
            "created REAL NOT NULL, finished REAL, status TEXT NOT NULL, total INTEGER NOT NULL, "
            "params TEXT NOT NULL, execution_time_ms REAL);"
            "INSERT INTO runs VALUES ('r1', 'eval', 'builtin', 0, NULL, 'running', 1, '{}', NULL);"
            "PRAGMA user_version=1;"
        )
    with RunStore(path) as s:
        assert s.run("r1").status == "running"  # no owner recorded: it cannot be told apart
        assert s.create_run("eval", "builtin", ["a"], ["x"])


def test_a_version_2_store_gets_run_times_without_the_wait(tmp_path: Path) -> None:
    """Version 2 kept ``service_ms`` with the wait for a sandbox in it: recomputed on opening."""
    path = tmp_path / "v2.sqlite"
    cold = RunResult(
        score=1.0, passed=True, env_name="e", service=ServiceTime(queue_ms=145.0, total_ms=157.0)
    )
    with RunStore(path) as s:  # today's schema, taken back to version 2
        run_id = s.create_run("batch", "e", ["e", "e"], ["x", "y"])
        s.record(run_id, 0, cold)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("ALTER TABLE results RENAME COLUMN run_ms TO service_ms")
        db.execute("UPDATE results SET service_ms = 157.0")
        db.execute("PRAGMA user_version=2")
    with RunStore(path) as s:
        assert s.run_times(run_id) == {"e": [12.0]}
        s.record(run_id, 1, cold)  # written under the new column name
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT run_ms FROM results ORDER BY idx").fetchall() == [(12.0,)] * 2


# --- QA reports ---------------------------------------------------------------------------------


def test_a_qa_report_round_trips_with_its_summary(store: RunStore) -> None:
    entries = sample_entries()
    entries[0]["probes_seconds"] = 2.0  # a field of a newer report: kept
    first = store.save_qa_report([{"env": "a", "ok": False, "checks": []}], {"command": "check"})
    second = store.save_qa_report(entries, {"command": "qa", "sandbox": None})
    assert [r.id for r in store.qa_reports()] == [second, first]  # newest first
    listed = store.qa_reports()[0]
    assert listed.entries is None and listed.meta == {"command": "qa", "sandbox": None}
    s = listed.summary
    assert (s.environments, s.passed, s.scored, s.min_score) == (3, 2, 2, 0.8)
    assert s.mean_score == pytest.approx(0.875)
    back = store.qa_report(second)
    assert back.entries is not None and back.summary == s and back.created == listed.created
    # what the report's model reads: an older report's missing fields at their defaults
    assert back.entries == [QaEntry.model_validate(e) for e in entries]
    assert back.entries[0].model_dump()["probes_seconds"] == 2.0
    assert store.qa_reports(limit=1) == [listed]


def test_a_bad_qa_report_is_refused_and_nothing_is_kept(store: RunStore) -> None:
    entries = sample_entries()
    entries[1]["mutation"]["score"] = "0.8"
    with pytest.raises(ConfigError, match=r"entries\[1\]\.mutation\.score"):
        store.save_qa_report(entries)
    entries = sample_entries()
    entries[0]["extra"] = float("nan")  # JSON cannot hold it
    with pytest.raises(ConfigError, match="entries: not plain JSON"):
        store.save_qa_report(entries)
    with pytest.raises(ConfigError, match=r"meta\.who: a string"):
        store.save_qa_report(sample_entries(), {"who": {"nested": 1}})
    assert store.qa_reports() == []


def test_an_unknown_qa_report_is_a_config_error(store: RunStore) -> None:
    with pytest.raises(ConfigError, match="no QA report 'qa-nope'"):
        store.qa_report("qa-nope")


def test_save_qa_keeps_a_report_in_the_default_store() -> None:
    report_id = save_qa(sample_entries(), {"command": "qa"})
    with RunStore(default_store_path()) as s:
        assert [r.id for r in s.qa_reports()] == [report_id]


def test_a_version_4_store_gains_the_qa_reports(tmp_path: Path) -> None:
    path = tmp_path / "v4.sqlite"
    with RunStore(path) as s:
        run_id = s.create_run("eval", "builtin", ["a"], ["x"])
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DROP TABLE qa_reports")
        db.execute("PRAGMA user_version=4")
    with RunStore(path) as s:
        assert s.run(run_id).total == 1
        assert s.qa_report(s.save_qa_report(sample_entries())).summary.environments == 3
