"""Harbor tasks: task folders written here in Harbor's layout are imported as session
environments (or refused, in one line, when they need a container image), score through their
own ``tests/test.sh``, and the built-in session environments go out to Harbor's layout and come
back scoring as before."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepgym import DeepGym, load_environment
from deepgym.cli import cli
from deepgym.envs.harbor import export_harbor_task, import_harbor_task, path_map, rewrite
from deepgym.envs.harbor import plan as host_plan
from deepgym.envs.harbor.verifier import read_reward
from deepgym.envs.qa.check import check_environment
from deepgym.envs.qa.exploits import session_exploits
from deepgym.envs.qa.session_check import reference_actions, scripted
from deepgym.envs.registry import list_session_environments
from deepgym.exceptions import ConfigError
from deepgym.images.dockerfile import parse as parse_dockerfile
from deepgym.models import Environment, RunResult

TEST_CANARY = "HARBOR-TESTS-CANARY-3b7e"
SOLVE_CANARY = "HARBOR-SOLUTION-CANARY-9d41"

HELLO: dict[str, str] = {
    "task.toml": """\
schema_version = "1.1"

[task]
name = "example/hello"
description = "Write a greeting."

[metadata]
difficulty = "easy"
tags = ["trivial"]

[verifier]
timeout_sec = 20.0

[agent]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 1024
""",
    "instruction.md": "Create `/app/hello.txt` holding the line in `/app/greeting.txt`.\n",
    "environment/Dockerfile": """\
FROM ubuntu:24.04
WORKDIR /app
ENV GREETING="Hello, world!"
COPY greeting.txt /app/greeting.txt
RUN mkdir -p notes && echo seeded > notes/seed.txt
CMD ["sleep", "infinity"]
""",
    "environment/greeting.txt": "Hello, world!\n",
    "tests/test.sh": f"""\
#!/bin/bash
# {TEST_CANARY}
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "$GREETING" ] && [ -f /app/notes/seed.txt ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
""",
    "solution/solve.sh": f"""\
#!/bin/bash
# {SOLVE_CANARY}
cp /app/greeting.txt /app/hello.txt
""",
}
"""A host-runnable task: a seeded work dir, a variable and a RUN line; reward.txt."""


def write_task(root: Path, files: dict[str, str | None], name: str = "hello") -> Path:
    """A task folder in Harbor's layout: ``HELLO``'s files, with ``files`` over them (None
    leaves one out)."""
    task = root / name
    for rel, text in {**HELLO, **files}.items():
        if text is None:
            continue
        path = task / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return task


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def reference(dg: DeepGym, env: Environment) -> RunResult:
    return dg.run_episode(env, scripted(reference_actions(env))).result


def noop(dg: DeepGym, env: Environment) -> RunResult:
    return dg.run_episode(env, scripted([])).result


# ---------------------------------------------------------------------------------------------
# What is read, and what is refused (no sandbox)
# ---------------------------------------------------------------------------------------------


def test_a_host_runnable_dockerfile_is_planned() -> None:
    text = """\
# syntax=docker/dockerfile:1
FROM docker.io/library/python:3.12-slim AS base
ARG SUB=data
ENV A=1 \\
    B="two words" PATH="/opt/x:$PATH"
WORKDIR /srv/app
COPY ["a.txt", "b.txt", "${SUB}/"]
COPY --chmod=755 run.sh .
RUN ["bash", "-c", "echo hi"]
USER nobody
"""
    plan = host_plan.plan(parse_dockerfile(text))
    assert plan.workdir == "/srv/app"
    assert plan.env["A"] == "1" and plan.env["B"] == "two words"
    assert plan.env["PATH"].startswith("/opt/x:/usr/local/sbin:")
    assert [(c.sources, c.dest, c.into, c.chmod) for c in plan.copies] == [
        (("a.txt", "b.txt"), "/srv/app/data", True, None),
        (("run.sh",), "/srv/app", True, 0o755),
    ]
    assert [(r.line, r.cwd, r.command) for r in plan.runs] == [(9, "/srv/app", "bash -c 'echo hi'")]


@pytest.mark.parametrize(
    ("image", "host"),
    [
        ("python:3.12", True),
        ("docker.io/library/python:3.12-slim", True),
        ("index.docker.io/library/ubuntu", True),
        ("registry-1.docker.io/library/debian:12", True),
        (f"buildpack-deps@sha256:{'0' * 64}", True),
        ("library/ubuntu:24.04", True),
        ("someone/python:3", False),
        ("ghcr.io/library/python:3", False),
        ("127.0.0.1:5000/python:3", False),
        ("Python:3", False),
        ("scratch", False),
    ],
)
def test_a_host_base_is_read_as_an_image_reference(image: str, host: bool) -> None:
    assert host_plan.host_base(image) is host


@pytest.mark.parametrize(
    ("docker", "why"),
    [
        ("FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\n", "(apt-get)"),
        ("FROM python:3.12\nRUN python3 -m pip install numpy\n", "(pip)"),
        ("FROM ubuntu:24.04\nRUN curl -fsSL https://x.invalid/i.sh | sh\n", "(curl)"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nRUN git clone https://x.invalid/r .\n", "git clone"),
        ("FROM node:20\nWORKDIR /app\n", "node:20 is not a plain base"),
        ("FROM ghcr.io/org/base:1\n", "is not a plain base"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY tool /usr/local/bin/tool\n", "outside the work"),
    ],
)
def test_a_dockerfile_the_host_does_not_stand_in_for_needs_its_image(docker: str, why: str) -> None:
    """Within the build subset, but not the host's: such a task imports on its image (built:
    tests/envs/test_harbor_images.py)."""
    with pytest.raises(ConfigError) as info:
        host_plan.plan(parse_dockerfile(docker))
    assert why in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("docker", "why"),
    [
        ("FROM python:3 AS b\nFROM ubuntu:24.04\n", "line 2: FROM ubuntu:24.04: a second FROM"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY --from=b /x /app/x\n", "line 3: COPY --from"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nADD https://x.invalid/f /app/f\n", "fetches"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nADD data.tar.gz /app/\n", "unpacks"),
        ("FROM ubuntu:24.04\nWORKDIR /app\nCOPY ../tests/test.sh /app/\n", "build context"),
        ("FROM ubuntu:24.04\nRUN --mount=type=cache,target=/c make\n", "line 2: RUN --mount"),
        ('FROM ubuntu:24.04\nRUN apt-get install -y jq\nSHELL ["/bin/bash"]\n', "line 3: SHELL"),
        ("FROM ubuntu:24.04\nWORKDIR /logs\n", "WORKDIR /logs: not a folder"),
    ],
)
def test_a_dockerfile_outside_the_build_subset_is_refused_in_one_line(
    tmp_path: Path, docker: str, why: str
) -> None:
    task = write_task(tmp_path, {"environment/Dockerfile": docker})
    with pytest.raises(ConfigError) as info:
        import_harbor_task(task, tmp_path / "out")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("hello: environment/Dockerfile ")
    assert why in message
    assert not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize(
    ("files", "why"),
    [
        (
            {"task.toml": HELLO["task.toml"] + 'docker_image = "org/image:1"\n'},
            "needs a container image (task.toml docker_image = 'org/image:1')",
        ),
        (
            {"environment/docker-compose.yaml": "services:\n  main:\n    build: .\n"},
            "needs a container image (environment/docker-compose.yaml defines its services)",
        ),
        ({"task.toml": HELLO["task.toml"] + "gpus = 1\n"}, "needs 1 GPU(s)"),
        ({"steps/one/instruction.md": "x\n"}, "steps/ but no [[steps]] in task.toml"),
        ({"tests/test.sh": None}, "not a Harbor task folder (no tests/test.sh)"),
        ({"task.toml": "[verifier\n"}, "malformed TOML"),
        ({"task.toml": "[verifier]\ntimeout_sec = -1\n"}, "timeout_sec must be a positive"),
        (
            {"task.toml": '[verifier]\nenv = { KEY = "${OPENAI_API_KEY}" }\n'},
            "passes none of the host's variables",
        ),
    ],
)
def test_other_tasks_that_cannot_run_here_are_refused_in_one_line(
    tmp_path: Path, files: dict[str, str | None], why: str
) -> None:
    with pytest.raises(ConfigError) as info:
        import_harbor_task(write_task(tmp_path, files), tmp_path / "out")
    assert why in str(info.value) and "\n" not in str(info.value)
    if why.startswith("needs a container image"):
        assert str(info.value).endswith("cannot run on the host sandbox")


def test_a_link_out_of_the_task_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    task = write_task(tmp_path, {})
    (task / "environment" / "greeting.txt").unlink()
    (task / "environment" / "greeting.txt").symlink_to(secret)
    with pytest.raises(ConfigError, match="a link out of the task folder"):
        import_harbor_task(task, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written stays


def test_harbors_paths_are_rewritten_where_a_session_has_them() -> None:
    mapping = path_map("/app")
    text = (
        "cd /app; cat /app/a.txt /application ./tests/x $HOME/tests /tests/t.py "
        '"/solution/solve.sh" > /logs/verifier/reward.txt PYTHONPATH=/app:/tests'
    )
    assert rewrite(text, mapping) == (
        "cd /work; cat /work/a.txt /application ./tests/x $HOME/tests /tmp/harbor/tests/t.py "
        '"/tmp/harbor/solution/solve.sh" > /tmp/harbor/logs/verifier/reward.txt '
        "PYTHONPATH=/work:/tmp/harbor/tests"
    )
    assert "/work" not in path_map("/work").values()  # the work dir already is /work


@pytest.mark.parametrize(
    ("files", "score", "status", "said"),
    [
        ({"reward.txt": " 0.25\n"}, 0.25, "ok", ""),
        ({"reward.json": '{"reward": 1, "accuracy": 0.5, "note": "x"}'}, 1.0, "ok", ""),
        ({"reward.json": '{"reward": 0.5}', "reward.txt": "1"}, 0.5, "ok", ""),
        ({"reward.json": '{"accuracy": 0.5}', "reward.txt": "1"}, 1.0, "ok", ""),
        ({}, 0.0, "solution_error", "wrote no reward"),
        ({"reward.txt": "abc"}, 0.0, "solution_error", "reward.txt holds 'abc', not a number"),
        ({"reward.txt": ""}, 0.0, "solution_error", "not a number"),
        ({"reward.txt": "nan"}, 0.0, "solution_error", "not a finite number in [0, 1]"),
        ({"reward.txt": "1.5"}, 0.0, "solution_error", "not a finite number in [0, 1]"),
        ({"reward.json": "[1]"}, 0.0, "solution_error", "not a JSON object"),
        ({"reward.json": "{"}, 0.0, "solution_error", "not JSON"),
        ({"reward.json": '{"reward": true}'}, 0.0, "solution_error", "not a number"),
        ({"reward.json": '{"a": 1, "note": "x"}'}, 0.0, "solution_error", "has no 'reward'"),
        ({"reward.json": "{}"}, 0.0, "solution_error", "has no 'reward'"),
        # several named scores and no total (harbor-cookbook's multi-reward): their mean
        ({"reward.json": '{"correctness": 1, "performance": 0}'}, 0.5, "ok", ""),
        ({"reward.json": '{"accuracy": 0.5}'}, 0.5, "ok", ""),
    ],
)
def test_the_reward_is_read_as_harbor_reads_it(
    tmp_path: Path, files: dict[str, str], score: float, status: str, said: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    report = read_reward(tmp_path)
    assert (report["score"], report["status"]) == (score, status)
    assert said in report.get("message", "")
    if "accuracy" in files.get("reward.json", "") and status == "ok":
        assert report["reward_components"] == {"accuracy": 0.5}
    if "correctness" in files.get("reward.json", ""):
        assert report["reward_components"] == {"correctness": 1.0, "performance": 0.0}


def test_an_export_is_a_harbor_task(tmp_path: Path) -> None:
    out = export_harbor_task("agent/merge_conflict", tmp_path / "mc")
    config = tomllib.loads((out / "task.toml").read_text())
    assert config["verifier"]["timeout_sec"] == 30.0 and config["agent"]["timeout_sec"] == 300.0
    assert config["environment"]["memory_mb"] == 1024
    assert config["metadata"]["deepgym_env"] == "agent/merge_conflict"
    assert config["task"]["name"] == "deepgym/agent-merge_conflict"
    docker = (out / "environment" / "Dockerfile").read_text()
    assert "FROM python:3.12\nWORKDIR /work\n" in docker
    assert "RUN bash .deepgym-setup.sh && rm .deepgym-setup.sh" in docker
    assert (out / "environment" / "setup.sh").read_text().startswith("set -e")
    test_sh = (out / "tests" / "test.sh").read_text()
    assert "/logs/verifier/reward.txt" in test_sh and os.access(out / "tests" / "test.sh", os.X_OK)
    assert (out / "tests" / "hidden" / "expect.json").is_file()
    solve = (out / "solution" / "solve.sh").read_text()
    assert "cat > /work/greet.py <<'HARBOR_EOF'\n" in solve
    with pytest.raises(ConfigError, match="is a function task, not a session"):
        export_harbor_task("two_sum", tmp_path / "x")
    with pytest.raises(ConfigError, match="exists and is not an empty folder"):
        export_harbor_task("agent/fix_add", out)


# ---------------------------------------------------------------------------------------------
# Imported tasks in real sessions
# ---------------------------------------------------------------------------------------------


@pytest.mark.sandbox
def test_a_host_runnable_task_imports_and_passes_deepgym_check(tmp_path: Path, dg: DeepGym) -> None:
    env = import_harbor_task(write_task(tmp_path, {}), tmp_path / "hello-env")
    assert load_environment(tmp_path / "hello-env") == env  # a folder like any other
    assert env.kind == "session" and env.name == "hello" and env.difficulty == "easy"
    assert env.task == "Create `/work/hello.txt` holding the line in `/work/greeting.txt`.\n"
    assert (env.lifetime, env.step_timeout, env.timeout) == (60.0, 60.0, 35.0)
    report = check_environment(env, dg)
    assert report.ok, report.summary()
    assert [c.name for c in report.checks] == [
        "reference",
        "deterministic",
        "no-op",
        "busy",
        "random",
        *[f"exploit[{x.name}]" for x in session_exploits(env)],
    ]


@pytest.mark.sandbox
def test_reward_json_is_the_score_and_its_other_numbers_components(
    tmp_path: Path, dg: DeepGym
) -> None:
    test_sh = """\
#!/bin/bash
if [ -f /app/hello.txt ]; then
  echo '{"reward": 0.75, "accuracy": 0.5}' > /logs/verifier/reward.json
else
  echo '{"reward": 0}' > /logs/verifier/reward.json
fi
"""
    env = import_harbor_task(write_task(tmp_path, {"tests/test.sh": test_sh}), tmp_path / "e")
    got = reference(dg, env)
    assert got.has_verdict and got.error_type is None
    assert (got.score, got.passed, got.reward_components) == (0.75, False, {"accuracy": 0.5})
    assert noop(dg, env).score == 0.0


@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("test_sh", "error_type", "said"),
    [
        ("echo abc > /logs/verifier/reward.txt\n", "solution_error", "reward.txt holds 'abc'"),
        ("echo 2 > /logs/verifier/reward.txt\n", "solution_error", "not a finite number"),
        (
            "set -e\ntest -f /app/hello.txt\necho 1 > /logs/verifier/reward.txt\n",
            "solution_error",
            "wrote no reward",
        ),
        ("sleep 30\n", "solution_timeout", "ran past its timeout of 1 s"),
    ],
)
def test_a_test_script_that_gives_no_good_reward_is_the_agents_zero(
    tmp_path: Path, dg: DeepGym, test_sh: str, error_type: str, said: str
) -> None:
    toml = HELLO["task.toml"].replace("timeout_sec = 20.0", "timeout_sec = 1.0")
    task = write_task(tmp_path, {"tests/test.sh": "#!/bin/bash\n" + test_sh, "task.toml": toml})
    got = noop(dg, import_harbor_task(task, tmp_path / "e"))
    # The script ran over the agent's work: its failure is a judged 0, never a masked sample.
    assert got.has_verdict and (got.score, got.passed) == (0.0, False)
    assert got.error_type == error_type and said in got.error


@pytest.mark.sandbox
def test_the_agent_cannot_read_the_tests_or_the_solution(tmp_path: Path, dg: DeepGym) -> None:
    env = import_harbor_task(write_task(tmp_path, {}), tmp_path / "e")
    assert SOLVE_CANARY in (env.reference_solution or "")  # the reference agent's alone
    with dg.session(env) as s:
        # Everything but the host's read-only system (/usr, the interpreter under /root).
        r = s.exec(
            f"grep -rsl -e {TEST_CANARY} -e {SOLVE_CANARY} / --exclude-dir=proc --exclude-dir=sys"
            " --exclude-dir=usr --exclude-dir=.pyenv; find / \\( -path /proc -o -path /usr -o "
            "-path /root \\) -prune -o \\( -name test.sh -o -name solve.sh -o -name harbor.json "
            "\\) -print; ls /tmp/harbor /tests /solution /judge 2>&1",
            timeout=30,
        )
        assert not r.timed_out
        assert s.exec("echo $GREETING; cat notes/seed.txt").stdout == "Hello, world!\nseeded\n"
    assert TEST_CANARY not in r.stdout and SOLVE_CANARY not in r.stdout
    assert "test.sh" not in r.stdout and "solve.sh" not in r.stdout
    assert "harbor.json" not in r.stdout


@pytest.mark.sandbox
@pytest.mark.parametrize("name", list_session_environments())
def test_a_built_in_goes_to_harbor_and_back_scoring_as_before(
    tmp_path: Path, dg: DeepGym, name: str
) -> None:
    harbor = export_harbor_task(name, tmp_path / "harbor")
    assert {p.name for p in harbor.iterdir()} == {
        "task.toml", "instruction.md", "environment", "tests", "solution",
    }  # fmt: skip
    env = import_harbor_task(harbor, tmp_path / "back")
    assert env.task == load_environment(name).task
    got = reference(dg, env)
    assert got.has_verdict and (got.score, got.passed) == (1.0, True), got.error
    none = noop(dg, env)
    assert none.has_verdict and none.score == 0.0, none.error


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def test_deepgym_harbor_import_and_export(tmp_path: Path) -> None:
    runner = CliRunner()
    task = write_task(tmp_path, {})
    r = runner.invoke(cli, ["harbor", "import", str(task), str(tmp_path / "env")])
    assert r.exit_code == 0, r.output
    assert "check it with: deepgym check" in r.output
    assert json.loads((tmp_path / "env" / "metadata.json").read_text())["kind"] == "session"
    r = runner.invoke(cli, ["harbor", "export", str(tmp_path / "env"), str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "tests" / "test.sh").is_file()
    r = runner.invoke(cli, ["harbor", "export", "agent/log_counts", str(tmp_path / "lc")])
    assert r.exit_code == 0 and (tmp_path / "lc" / "solution" / "solve.sh").is_file()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["import", "{image}", "{tmp}/o"], "needs a container image"),
        (["import", "{tmp}/nowhere", "{tmp}/o"], "not a Harbor task folder"),
        (["import", "{task}", "{task}"], "exists and is not an empty folder"),
        (["export", "agent/fix_ad", "{tmp}/o"], "did you mean 'agent/fix_add'?"),
        (["export", "two_sum", "{tmp}/o"], "not a session"),
    ],
)
def test_deepgym_harbor_refuses_bad_input_in_one_line(
    tmp_path: Path, args: list[str], said: str
) -> None:
    task = write_task(tmp_path, {})
    image = write_task(
        tmp_path, {"task.toml": HELLO["task.toml"] + 'docker_image = "org/image:1"\n'}, "image"
    )
    argv = [a.format(tmp=tmp_path, task=task, image=image) for a in args]
    r = CliRunner().invoke(cli, ["harbor", *argv])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and said in lines[0]


def test_the_files_shipped_into_sandboxes_resolve_and_need_only_the_standard_library() -> None:
    """``verifier.py`` (an import's final verifier) and ``runner.py`` (an export's
    ``tests/deepgym_verify.py``) run outside deepgym: found by path, importing no package."""
    import ast
    import sys

    from deepgym.envs.harbor.export_task import RUNNER
    from deepgym.envs.harbor.import_task import VERIFIER

    for shipped in (VERIFIER, RUNNER):
        assert shipped.is_file() and shipped.parent.name == "harbor"
        tree = ast.parse(shipped.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        outside = {n.split(".")[0] for n in names} - set(sys.stdlib_module_names)
        assert outside == set(), f"{shipped.name} imports {sorted(outside)}"
