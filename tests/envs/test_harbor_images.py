"""Harbor tasks on their images: real tasks (``tests/data/harbor``, sources in its SOURCES.md)
import by building their Dockerfile, and in real sessions their reference solution scores 1.0 and
a no-op agent 0; a folder of tasks imports with a report.

The image store is ``~/.cache/deepgym-harbor-tests/images``, shared by every test and kept
between runs: the Debian base (mmdebstrap) and each task's layers are built once, and a
later run finds them cached. Each test is bounded in time; each session by its task's limits.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.envs.image_store import link_shared_store

from deepgym import DeepGym
from deepgym.cli import cli
from deepgym.envs.harbor import import_harbor_task
from deepgym.envs.harbor.image import context_hash, image_ref
from deepgym.envs.qa.session_check import reference_actions, scripted
from deepgym.models import Environment, RunResult

DATA = Path(__file__).resolve().parents[1] / "data" / "harbor"
REAL_TASKS = sorted(d.name for d in DATA.iterdir() if (d / "task.toml").is_file())

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason="build steps map ids directly only as root"),
    pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is absent"),
]


@pytest.fixture(autouse=True)
def store_home(_deepgym_home: Path) -> Path:
    """Each test's private ``DEEPGYM_HOME`` (``tests/conftest.py``) with one image store for all,
    kept between runs: its ``images`` is a link to ``CACHE``."""
    return link_shared_store(_deepgym_home)


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def _episode(dg: DeepGym, env: Environment, reference: bool) -> RunResult:
    actions = reference_actions(env) if reference else []
    return dg.run_episode(env, scripted(actions)).result


@pytest.mark.parametrize("task", REAL_TASKS)
def test_a_real_task_runs_on_its_image(
    task: str, tmp_path: Path, store_home: Path, dg: DeepGym
) -> None:
    lines: list[str] = []
    env = import_harbor_task(DATA / task, tmp_path / task, progress=lines.append)
    assert env.image == image_ref(task, DATA / task / "environment")
    assert lines  # the build's progress (or the store's hit)
    assert (tmp_path / task / "image" / "Dockerfile").is_file()  # rebuildable elsewhere
    right = _episode(dg, env, reference=True)
    assert (right.has_verdict, right.score) == (True, 1.0), right
    idle = _episode(dg, env, reference=False)
    assert (idle.has_verdict, idle.score) == (True, 0.0), idle


def test_a_changed_environment_is_a_new_image_name(tmp_path: Path) -> None:
    context = tmp_path / "environment"
    shutil.copytree(DATA / "hello-world" / "environment", context)
    before = image_ref("Hello World", context)
    assert before.startswith("harbor/hello-world:") and before == image_ref("hello-world", context)
    (context / "extra.txt").write_text("x\n")
    assert context_hash(context) != before.rpartition(":")[2]


def test_the_image_work_dir_is_the_tasks_workdir_mapped_to_work(
    tmp_path: Path, store_home: Path, dg: DeepGym
) -> None:
    """A file the image's build leaves in its WORKDIR is in the session's work dir; the agent's
    shell starts there; a change made there reaches the final verifier."""
    task = tmp_path / "made"
    shutil.copytree(DATA / "hello-world", task)
    docker = task / "environment" / "Dockerfile"
    docker.write_text(docker.read_text() + "RUN echo built > /app/made.txt\n")
    (task / "tests" / "test_outputs.py").write_text(
        "from pathlib import Path\n\n\ndef test_made():\n"
        '    assert Path("/app/made.txt").read_text() == "built\\nagent\\n"\n'
    )
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho agent >> made.txt\n")
    env = import_harbor_task(task, tmp_path / "env")
    assert (tmp_path / "env" / "repo" / "made.txt").read_text() == "built\n"
    assert (
        "/work/made.txt" in (tmp_path / "env" / "tests" / "harbor" / "test_outputs.py").read_text()
    )
    assert (_episode(dg, env, True).score, _episode(dg, env, False).score) == (1.0, 0.0)


def test_deepgym_harbor_import_reports_a_folder(tmp_path: Path, store_home: Path) -> None:
    folder = tmp_path / "tasks"
    shutil.copytree(DATA / "hello-world", folder / "hello-world")
    shutil.copytree(DATA / "hello-world", folder / "staged")
    (folder / "staged" / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm AS build\nFROM debian:bookworm\n"
    )
    shutil.copytree(DATA / "hello-world", folder / "gpu")
    with (folder / "gpu" / "task.toml").open("a") as f:
        f.write("\n[environment]\ngpus = 1\n")
    (folder / "notes").mkdir()  # not a task: not counted
    runner = CliRunner()
    r = runner.invoke(cli, ["harbor", "import", str(folder), str(tmp_path / "out")])
    assert r.exit_code == 1, r.output
    report = r.stdout.splitlines()
    assert report[0] == "imported 1 of 3 Harbor tasks"
    assert report[1] == "not imported: gpu: needs 1 GPU(s), which the host sandbox does not give"
    assert report[2].startswith("not imported: staged: environment/Dockerfile line 2: FROM")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["hello-world"]
    shutil.rmtree(folder / "gpu")
    shutil.rmtree(folder / "staged")
    r = runner.invoke(cli, ["harbor", "import", str(folder), str(tmp_path / "all")])
    assert r.exit_code == 0 and r.stdout.startswith("imported 1 of 1 Harbor tasks"), r.output
    r = runner.invoke(cli, ["harbor", "import", str(folder / "notes"), str(tmp_path / "none")])
    assert r.exit_code == 2 and "holds no Harbor task" in r.output, r.output
