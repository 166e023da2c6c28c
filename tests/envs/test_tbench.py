"""terminal-bench's first format, without an image: what the import refuses in one line, and
the pytest parser its tasks name (``parser_name: pytest``) read from the test script's output.
The real tasks, on their images, are ``test_corpus_tbench.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym.envs.harbor import import_task
from deepgym.envs.harbor.verifier import parse_pytest, parsed_report
from deepgym.exceptions import ConfigError

COMPOSE = """services:
  client:
    build:
      context: .
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
"""


def _task(root: Path, **replace: str) -> Path:
    """A terminal-bench task folder of the first format, with ``replace``'s files instead."""
    task = root / "a-task"
    files = {
        "task.yaml": 'instruction: "Write hello to out.txt."\nparser_name: pytest\n'
        "max_agent_timeout_sec: 60.0\nmax_test_timeout_sec: 30.0\n",
        "docker-compose.yaml": COMPOSE,
        "Dockerfile": "FROM debian:bookworm\nWORKDIR /app\n",
        "run-tests.sh": "#!/bin/bash\nbash $TEST_DIR/check.sh\n",
        "solution.sh": "#!/bin/bash\necho hello > out.txt\n",
        "tests/check.sh": "echo '=== short test summary info ==='\necho 'PASSED test_hello'\n",
        **replace,
    }
    for rel, text in files.items():
        if text:
            (task / rel).parent.mkdir(parents=True, exist_ok=True)
            (task / rel).write_text(text)
    return task


@pytest.mark.parametrize(
    ("files", "why"),
    [
        (
            {"docker-compose.yaml": COMPOSE + "  db:\n    image: postgres\n"},
            "docker-compose.yaml defines 2 services (client, db); only a task of one container",
        ),
        (
            {"docker-compose.yaml": "services:\n  client:\n    image: ubuntu\n"},
            "service 'client' has no build (a prebuilt image)",
        ),
        (
            {"task.yaml": 'instruction: "x"\nparser_name: swebench\n'},
            "parser 'swebench', which deepgym does not read",
        ),
        (
            {"solution.sh": "", "solution.yaml": "- command: echo hello > out.txt\n"},
            "solution.yaml (commands typed into its terminal), which is not imported",
        ),
        (
            {"docker-compose.yaml": COMPOSE.replace("T_BENCH_TEST_DIR", "OPENAI_API_KEY")},
            "reads ${OPENAI_API_KEY} from the host",
        ),
    ],
)
def test_what_the_import_refuses_it_says_in_one_line(
    tmp_path: Path, files: dict[str, str], why: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        import_task(_task(tmp_path, **files), tmp_path / "out")
    message = str(caught.value)
    assert why in message and "\n" not in message, message
    assert not (tmp_path / "out").exists()


SUMMARY = """\
============================= test session starts ==============================
collected 3 items
tests/test_outputs.py ..F
=========================== short test summary info ============================
PASSED tests/test_outputs.py::test_one
PASSED tests/test_outputs.py::test_two
FAILED tests/test_outputs.py::test_three - AssertionError: assert 1 == 2
SKIPPED [1] tests/test_outputs.py:9: no network
========================= 1 failed, 2 passed in 0.12s ==========================
"""


def test_the_pytest_parser_reads_the_last_short_summary_one_case_a_test() -> None:
    results = parse_pytest(SUMMARY)
    assert results == [
        ("PASSED", "tests/test_outputs.py::test_one"),
        ("PASSED", "tests/test_outputs.py::test_two"),
        ("FAILED", "tests/test_outputs.py::test_three"),
        ("SKIPPED", "[1] tests/test_outputs.py:9: no network"),
    ]
    report = parsed_report(results, "tests/run-tests.sh", "tail")
    assert report["score"] == 0.0 and len(report["cases"]) == 4
    assert [c["passed"] for c in report["cases"]] == [True, True, False, False]
    # A summary printed by the answer before the real one does not count: the last one does.
    forged = "=== short test summary info ===\nPASSED test_everything\n" + SUMMARY
    assert parse_pytest(forged) == results
    assert parse_pytest("no summary here\n") is None


def test_a_pass_needs_a_test_that_ran_and_the_scripts_exit_zero() -> None:
    passed = [("PASSED", "test_one")]
    assert parsed_report(passed, "run-tests.sh", "")["score"] == 1.0
    # The answer's code printed a passing summary, then killed the script: no pass.
    killed = parsed_report(passed, "run-tests.sh", "", exit_code=137)
    assert killed["score"] == 0.0 and "run-tests.sh exited 137" in killed["message"]
    only_skipped = parsed_report([("SKIPPED", "test_one")], "run-tests.sh", "")
    assert only_skipped["score"] == 0.0 and "lists no test that passed" in only_skipped["message"]
    none = parsed_report(None, "run-tests.sh", "tail")
    assert (none["status"], none["score"]) == ("solution_error", 0.0)
