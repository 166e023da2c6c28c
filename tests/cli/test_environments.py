"""``deepgym list``, ``deepgym check`` and ``deepgym qa``: what they print and their exit codes.

The check logic is tested in ``tests/envs/test_check.py``; here it is replaced by canned reports,
except in the one test marked ``sandbox``.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from deepgym import cli
from deepgym.cli import environments
from deepgym.envs.qa.augment import Augmentation
from deepgym.envs.qa.check import Check, CheckReport
from deepgym.envs.qa.mutants import MUTATION_THRESHOLD, MutationReport
from deepgym.envs.qa.report import Equivalent, QaReport, Survivor, Undecided, validate_entries
from deepgym.envs.registry import (
    BUILTIN_DIR,
    list_environments,
    list_session_environments,
    load_environment,
)
from deepgym.models import Environment
from deepgym.store import RunStore


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli.cli, list(args), catch_exceptions=False)


def report(env: Environment, *failed: str) -> CheckReport:
    checks = [Check("reference", "reference" not in failed, "scored 1.00")]
    checks += [Check(name, False, f"{name} went wrong") for name in failed if name != "reference"]
    checks.append(Check("time_limits", True, "reference 12 ms of 10s"))
    return CheckReport(env.name, checks)


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every environment checked, by name; ``constant[0]`` fails for names holding ``bad``."""
    seen: list[str] = []

    def fake(env: Environment, dg: Any, *, max_parallel: int = 8) -> CheckReport:
        seen.append(env.name)
        return report(env, *(["constant[0]"] if "bad" in env.name else []))

    def fake_many(
        envs: list[Environment],
        dg: Any,
        *,
        max_parallel: int = 8,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[CheckReport]:
        out = [fake(e, dg) for e in envs]
        if progress is not None:
            progress(len(envs), len(envs))
        return out

    monkeypatch.setattr(environments, "check_environment", fake)
    monkeypatch.setattr(environments, "check_environments", fake_many)
    return seen


def test_check_passes(checked: list[str]) -> None:
    r = invoke("check", "coin_change")
    assert r.exit_code == 0, r.output
    assert checked == ["coin_change"]
    assert "all 2 checks passed" in r.output
    assert "time_limits" in r.output


def test_check_a_folder_by_path(checked: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "bad_copy"
    shutil.copytree(BUILTIN_DIR / "coin_change", folder)
    (folder / "metadata.json").write_text(
        json.dumps({"name": "bad_copy", "kind": "function", "entry_point": "coin_change"})
    )
    r = invoke("check", str(folder))
    assert r.exit_code == 1, r.output
    assert checked == ["bad_copy"]
    assert "1 of 3 checks failed: constant[0]" in r.output
    assert "constant[0] went wrong" in r.output


def test_check_json(checked: list[str]) -> None:
    r = invoke("check", "two_sum", "--json")
    assert r.exit_code == 0
    (data,) = json.loads(r.output)
    assert data["env"] == "two_sum" and data["ok"] is True
    assert [c["name"] for c in data["checks"]] == ["reference", "time_limits"]


def test_check_unknown_environment_suggests(checked: list[str]) -> None:
    r = CliRunner().invoke(cli.cli, ["check", "coin_chnge"])
    assert r.exit_code == 2
    assert "did you mean 'coin_change'" in r.output
    assert checked == []


EVERY = list_environments() + list_session_environments()


def test_list_names_every_environment_with_its_kind() -> None:
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli.cli, ["list"])
    assert r.exit_code == 0, r.output
    for name in EVERY:
        kind = load_environment(name).kind
        assert re.search(rf"^\S+ {re.escape(name)} +\S+ {kind} ", r.output, re.MULTILINE), name
    data = json.loads(invoke("list", "--json").output)
    assert [d["name"] for d in data] == EVERY
    kinds = {d["name"]: d["kind"] for d in data}
    assert {kinds[n] for n in list_session_environments()} == {"session"}
    assert len(list_session_environments()) >= 6
    assert {kinds[n] for n in list_environments()} <= {"function", "script", "patch"}


def test_qa_checks_every_builtin_sessions_included(checked: list[str]) -> None:
    r = invoke("qa")
    assert r.exit_code == 0, r.output
    assert checked == EVERY
    assert f"{len(EVERY)}/{len(EVERY)} environments pass every check" in r.output
    assert "agent/fix_add" in r.output


def test_qa_suite_takes_a_folder_of_ones_own_environments(
    checked: list[str], tmp_path: Path
) -> None:
    for name in ("mine_b", "mine_a"):
        shutil.copytree(BUILTIN_DIR / "coin_change", tmp_path / name)
        meta = json.loads((tmp_path / name / "metadata.json").read_text())
        (tmp_path / name / "metadata.json").write_text(json.dumps({**meta, "name": name}))
    (tmp_path / "notes").mkdir()  # a folder that is no environment is passed over
    r = invoke("qa", "--suite", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert checked == ["mine_a", "mine_b"]
    empty = tmp_path / "notes"
    r = CliRunner().invoke(cli.cli, ["qa", "--suite", str(empty)])
    assert r.exit_code == 2 and "not an environment folder, nor a folder of them" in r.output


def test_qa_fails_when_one_environment_fails(
    checked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = Environment(name="fine", entry_point="f", test_cases=[{"expected": 1}])
    bad = good.model_copy(update={"name": "bad_one"})
    monkeypatch.setattr(environments, "shipped", lambda: [good, bad])
    r = invoke("qa")
    assert r.exit_code == 1
    assert "1/2 environments pass every check" in r.output
    assert "constant[0]: constant[0] went wrong" in r.output
    r = invoke("qa", "--json")
    assert [d["ok"] for d in json.loads(r.output)] == [True, False]


@pytest.mark.sandbox
def test_check_a_patch_environment_for_real() -> None:
    r = invoke("check", "fix_word_count", "--sandbox", "pool")
    assert r.exit_code == 0, r.output
    for name in ("reference", "empty", "tampering", "garbled", "stale_context", "noop"):
        assert name in r.output
    assert "all 16 checks passed" in r.output  # 8, and 8 exploit probes


@pytest.mark.sandbox
def test_qa_checks_a_session_environment_for_real(monkeypatch: pytest.MonkeyPatch) -> None:
    """``qa``'s whole path, sandboxes and all, over an answer environment and a session one."""
    envs = [load_environment("fizzbuzz"), load_environment("agent/fix_add")]
    monkeypatch.setattr(environments, "shipped", lambda: envs)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli.cli, ["qa", "--json"])
    assert r.exit_code == 0, r.output
    fizzbuzz, fix_add = json.loads(r.output)
    assert fizzbuzz["ok"] and fix_add["ok"], r.output
    assert [c["name"] for c in fix_add["checks"]] == [
        "reference",
        "deterministic",
        "no-op",
        "busy",
        "random",
        *(
            f"exploit[{name}]"
            for name in (
                "forge_result_files", "delete_tests", "edit_tests", "forged_output",
                "always_equal", "patch_modules",
            )
        ),
    ]  # fmt: skip


def mutation(env: Environment, *, score_ok: bool) -> MutationReport:
    m = {
        "id": "comparison-L2-abcd1234",
        "operator": "comparison",
        "line": 2,
        "description": "line 2: `<` -> `<=`",
    }
    survivor = Survivor(
        **m, diff="--- reference\n+++ reference\n", killing_input='{"args": [9], "expected": 9}'
    )
    equivalent = Equivalent(
        **m, diff="--- reference\n", why="agrees with the reference on 600 inputs", agreed=600
    )
    undecided = Undecided(
        **{**m, "id": "constant-L3-ef567890", "description": "line 3: `1` -> `2`"},
        diff="--- reference\n+++ reference\n-    x = 1\n+    x = 2\n",
        why="no input told it apart, but it agreed on only 17 distinct inputs",
        agreed=17,
    )
    killed = 20 if score_ok else 5
    return MutationReport(
        env=env.name,
        kind=env.kind,
        mutants=killed + 3,
        killed=killed,
        no_verdict=0,
        survivors=(survivor,),
        equivalents=(equivalent,),
        undecideds=(undecided,),
        seconds=1.5,
    )


@pytest.fixture
def mutated(monkeypatch: pytest.MonkeyPatch, checked: list[str]) -> list[str]:
    """Every environment mutation-tested, by name; the score is low for names holding ``weak``."""
    seen: list[str] = []

    def fake(env: Environment, dg: Any, **kwargs: Any) -> MutationReport:
        seen.append(env.name)
        return mutation(env, score_ok="weak" not in env.name)

    def fake_many(envs: list[Environment], dg: Any, **kwargs: Any) -> list[MutationReport]:
        return [fake(e, dg) for e in envs]

    monkeypatch.setattr(environments, "mutation_test", fake)
    monkeypatch.setattr(environments, "mutation_tests", fake_many)
    return seen


def test_check_mutants_json_shape(mutated: list[str]) -> None:
    r = invoke("check", "--mutants", "two_sum", "--json")
    assert r.exit_code == 0, r.output
    (data,) = json.loads(r.output)
    assert list(data) == ["env", "ok", "checks", "kind", "mutation"]
    assert data["kind"] == "function"
    m = data["mutation"]
    assert list(m) == [
        "env", "kind", "mutants", "killed", "equivalent", "survived", "undecided", "no_verdict",
        "score", "seconds", "threshold", "ok", "gated", "survivors", "undecideds", "equivalents",
    ]  # fmt: skip
    # 20 killed of 23 - 1 equivalent: the undecided counts against the score like the survivor
    assert m["score"] == 20 / 22 and m["ok"] is True and m["threshold"] == MUTATION_THRESHOLD
    assert m["survivors"][0]["killing_input"] == '{"args": [9], "expected": 9}'
    assert m["undecided"] == 1 and m["undecideds"][0]["agreed"] == 17
    assert m["equivalents"][0]["why"].startswith("agrees")


def test_check_mutants_prints_the_table_survivors_and_undecided(
    mutated: list[str], tmp_path: Path
) -> None:
    shutil.copytree(BUILTIN_DIR / "two_sum", tmp_path / "weak_two")
    meta = json.loads((tmp_path / "weak_two" / "metadata.json").read_text())
    (tmp_path / "weak_two" / "metadata.json").write_text(json.dumps({**meta, "name": "weak_two"}))
    args = ["check", "--mutants", str(tmp_path / "weak_two")]
    r = CliRunner(env={"COLUMNS": "200"}).invoke(cli.cli, args)
    assert r.exit_code == 1, r.output
    columns = ("environment", "kind", "mutants", "equivalent", "killed", "survived", "undecided")
    for header in (*columns, "score"):
        assert header in r.output
    assert "survivor comparison-L2-abcd1234" in r.output
    assert 'killed by this test case: {"args": [9], "expected": 9}' in r.output
    assert "undecided constant-L3-ef567890 (line 3: `1` -> `2`): no input told it apart" in r.output
    assert "below: weak_two (1 undecided)" in r.output


def test_qa_mutants_fails_below_the_threshold(
    mutated: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = Environment(name="fine", entry_point="f", test_cases=[{"expected": 1}])
    weak = good.model_copy(update={"name": "weak_one"})
    monkeypatch.setattr(environments, "shipped", lambda: [good, weak])
    r = invoke("qa", "--mutants")
    assert r.exit_code == 1
    assert "1/2 environments reach the mutation threshold 0.9; below: weak_one" in r.output
    data = json.loads(invoke("qa", "--mutants", "--json").output)
    assert [(d["env"], d["mutation"]["ok"]) for d in data] == [("fine", True), ("weak_one", False)]
    assert invoke("qa").exit_code == 0  # without --mutants, the score is not measured
    assert "mutation" not in json.loads(invoke("qa", "--json").output)[0]


def test_a_session_below_the_threshold_fails_too(
    mutated: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's read-only actions are told apart by the digests of its work dir: its score
    decides the exit like any other kind's."""
    good = Environment(name="fine", entry_point="f", test_cases=[{"expected": 1}])
    session = load_environment("agent/fix_add").model_copy(update={"name": "agent/weak_s"})
    monkeypatch.setattr(environments, "shipped", lambda: [good, session])
    r = invoke("qa", "--mutants")
    assert r.exit_code == 1, r.output
    assert "1/2 environments reach the mutation threshold 0.9; below: agent/weak_s" in r.output
    (_, data) = json.loads(invoke("qa", "--mutants", "--json").output)
    assert data["mutation"]["ok"] is False and data["mutation"]["gated"] is True


def test_qa_suite_reports_a_registered_suites_scores_as_they_are(
    mutated: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    weak = Environment(name="weak_suite_1", entry_point="f", test_cases=[{"expected": 1}])
    monkeypatch.setattr(environments, "load_targets", lambda name: [weak])
    r = invoke("qa", "--mutants", "--suite", "humaneval")
    assert r.exit_code == 0, r.output
    assert mutated == ["weak_suite_1"]
    assert "below: weak_suite_1" in r.output


def test_qa_suite_of_ones_own_folders_fails_below_the_threshold(
    mutated: list[str], tmp_path: Path
) -> None:
    for name in ("weak_mine", "fine_mine"):
        shutil.copytree(BUILTIN_DIR / "coin_change", tmp_path / name)
        meta = json.loads((tmp_path / name / "metadata.json").read_text())
        (tmp_path / name / "metadata.json").write_text(json.dumps({**meta, "name": name}))
    r = invoke("qa", "--mutants", "--suite", str(tmp_path))
    assert r.exit_code == 1, r.output
    assert "below: weak_mine (1 undecided)\n" in r.output
    assert 'killed by this test case: {"args": [9]' in r.output


def test_augment_adds_the_killing_inputs_and_reports_what_they_kill(
    mutated: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[tuple[str, Path | None]] = []

    def fake(env: Environment, report: MutationReport, dg: Any, **kwargs: Any) -> Augmentation:
        seen.append((env.name, kwargs.get("path")))
        return Augmentation(
            env.name, (), added=2, survivors=1, killed=1, written=tmp_path / "humaneval.json"
        )

    monkeypatch.setattr(environments.augmentation, "augment", fake)
    side = tmp_path / "side.json"
    r = invoke("check", "--augment", "--augment-file", str(side), "two_sum")
    assert seen == [("two_sum", side)]
    assert f"two_sum: 2 test case(s) added to {tmp_path / 'humaneval.json'}" in r.output
    assert (
        "--augment: 1/1 environments gained tests (2 cases); the amplified tests kill 1 of 1"
        in (r.output)
    )
    (data,) = json.loads(invoke("check", "--augment", "two_sum", "--json").output)
    assert data["augmented"]["added"] == 2 and data["mutation"]["mutants"] == 23
    kept = _kept()[0]
    assert kept.meta["augment"] is True and kept.meta["mutants"] is True


def _kept(path: Path | None = None) -> list[QaReport]:
    with RunStore(path) as s:
        return [s.qa_report(r.id) for r in s.qa_reports()]


def test_qa_and_check_keep_their_report_for_the_console(checked: list[str]) -> None:
    r = invoke("qa", "--json")
    printed = json.loads(r.output)  # the note stays off a --json output
    (kept,) = _kept()
    assert kept.meta == {"command": "qa", "sandbox": None, "suite": None, "mutants": None}
    assert kept.entries is not None
    assert [e.model_dump() for e in kept.entries] == [
        e.model_dump() for e in validate_entries(printed)
    ]
    r = invoke("check", "coin_change")
    newest = _kept()[0]
    assert f"QA report {newest.id} kept: 'deepgym console' shows it" in r.output
    assert newest.meta == {
        "command": "check", "env": "coin_change", "sandbox": None, "mutants": None
    }  # fmt: skip
    assert newest.summary.environments == newest.summary.passed == 1


def test_no_store_keeps_nothing_and_store_picks_the_file(
    checked: list[str], tmp_path: Path
) -> None:
    invoke("check", "coin_change", "--no-store")
    invoke("qa", "--no-store")
    assert _kept() == []
    path = tmp_path / "elsewhere.sqlite"
    assert invoke("check", "two_sum", "--json", "--store", str(path)).exit_code == 0
    assert [k.meta["env"] for k in _kept(path)] == ["two_sum"] and _kept() == []


def test_a_default_store_that_cannot_open_is_a_note(
    checked: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "home").write_text("a file where the folder goes")
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))
    r = invoke("check", "coin_change")
    assert r.exit_code == 0 and "note: QA report not kept" in r.output


def test_a_mutation_run_is_kept_with_its_scores(mutated: list[str]) -> None:
    r = invoke("check", "--mutants", "two_sum", "--json")
    (printed,) = json.loads(r.output)
    newest = _kept()[0]
    assert newest.meta["mutants"] is True
    assert newest.entries is not None
    (entry,) = newest.entries
    assert entry.mutation is not None and entry.mutation.score == printed["mutation"]["score"]
    assert newest.summary.scored == 1
