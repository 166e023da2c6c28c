"""AgentBench's OS tasks as the suite ``agentbench_os``: read from the installed inspect-evals
package (``make test`` installs it without its dependencies: see the Makefile), each a session
on the Debian equivalent of the tasks' image, built once.

The pure part: the 145 tasks, and why each that does not run here does not. The corpus part
(marked ``corpus``, run by ``make test``): every task that runs, its reference action (the
task's ``example``) scores 1.0 and a no-op 0.0, except the tasks in ``KNOWN``, each with the
reason it does not (the task's own fault, or ours).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.envs.image_store import CACHE, link_shared_store

from deepgym import AsyncDeepGym, load_environment, load_suite
from deepgym.envs import agentbench
from deepgym.envs.qa.session_check import reference_actions, scripted
from deepgym.exceptions import ConfigError
from deepgym.models import Environment, RunResult


def _installed() -> bool:
    try:
        agentbench.data_dir()
    except ConfigError:
        return False
    return True


needs_data = pytest.mark.skipif(not _installed(), reason="inspect-evals is not installed")

REFUSED_BY_REASON = {
    "its init is init/": 11,
    "its init runs as user": 1,
    "its init installs packages": 2,
    "its check reads a set-uid bit": 1,
    "its check runs as other users": 1,
}
"""Why the tasks that do not run here do not: AgentBench's init scripts are files of its
repository that the package does not ship; one init runs as another user, one check as other
users (a session maps one uid); two inits install packages (no network); one check reads a
set-uid bit (never carried out of a sandbox)."""

_FIXED = "the task's: the dev split's fixed answer ({}), from AgentBench's machine"
KNOWN: dict[str, str] = {
    "agentbench_os/dev-8": _FIXED.format("35M used by /home"),
    "agentbench_os/dev-9": _FIXED.format("14 empty files in /home"),
    "agentbench_os/dev-10": _FIXED.format("15 folders in /"),
    "agentbench_os/dev-11": _FIXED.format("126 folders in /home"),
    "agentbench_os/dev-13": _FIXED.format("4 CPU cores"),
    "agentbench_os/dev-14": _FIXED.format("43 groups"),
    "agentbench_os/dev-15": _FIXED.format("8 groups past 50"),
    "agentbench_os/dev-17": _FIXED.format("21 users"),
    "agentbench_os/dev-18": _FIXED.format("23 users"),
    "agentbench_os/dev-23": _FIXED.format("30000 processes"),
    "agentbench_os/test-25": "ours: the final verifier's / holds two folders more than the "
    "session's (/judge, /snapshot), and the expected answer counts them",
    "agentbench_os/test-35": "ours: its state is outside the work dir (/data's group)",
}
"""Tasks that run here whose reference does not score 1.0, and why."""


@needs_data
def test_the_suite_reads_every_task_and_says_why_each_other_does_not_run() -> None:
    records = agentbench.records()
    assert len(records) == 145
    assert sum(name.startswith("agentbench_os/dev-") for name, _ in records) == 26
    refused = agentbench.refusals()
    for reason, count in REFUSED_BY_REASON.items():
        assert sum(why.startswith(reason) for why in refused.values()) == count, refused
    assert len(refused) == sum(REFUSED_BY_REASON.values())
    envs = load_suite("agentbench_os")
    assert len(envs) == 145 - len(refused)
    env = load_environment("agentbench_os/dev-0")
    assert env.image == agentbench.IMAGE and env.user == "root"
    assert "/work/answer.txt" in env.task and "/root" not in env.task
    with pytest.raises(ConfigError, match=r"init/stock-log\.sh"):
        load_environment("agentbench_os/test-0")
    # Every reference action is bash that parses (an example may end in a comment), and a
    # folder of /usr an example installs into is made in the home it moves to.
    for each in envs:
        for action in reference_actions(each):
            if action.tool == "bash":
                parsed = subprocess.run(["bash", "-n", "-c", action.command], capture_output=True)
                assert parsed.returncode == 0, (each.name, action.command, parsed.stderr)
    assert "mkdir -p /work/local/bin" in load_environment("agentbench_os/test-19").setup_script


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPGYM_HOME", str(CACHE))
        t0 = time.monotonic()
        ref = agentbench.build_image()
        print(f"\nagentbench_os: the image in {time.monotonic() - t0:.0f} s")
    yield ref


@pytest.fixture
def store_home(_deepgym_home: Path) -> None:
    link_shared_store(_deepgym_home)


async def _episodes(envs: list[Environment]) -> dict[str, tuple[RunResult, RunResult]]:
    out: dict[str, tuple[RunResult, RunResult]] = {}
    async with AsyncDeepGym() as dg:
        gate = asyncio.Semaphore(4)

        async def both(env: Environment) -> None:
            async with gate:
                right = await dg.run_episode(env, scripted(reference_actions(env)))
                idle = await dg.run_episode(env, scripted([]))
            out[env.name] = (right.result, idle.result)

        await asyncio.gather(*(both(env) for env in envs))
    return out


@needs_data
@pytest.mark.sandbox
@pytest.mark.corpus
@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.geteuid() != 0, reason="build steps map ids directly only as root")
@pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is absent")
def test_every_task_that_runs_scores_its_reference_one_and_a_no_op_zero(
    image: str, store_home: None
) -> None:
    envs = load_suite("agentbench_os")
    t0 = time.monotonic()
    results = asyncio.run(_episodes(envs))
    seconds = time.monotonic() - t0
    wrong = {}
    for name, (right, idle) in sorted(results.items()):
        assert idle.has_verdict and idle.score == 0.0, (name, idle)
        assert right.has_verdict, (name, right)
        if right.score != 1.0:
            wrong[name] = right.cases[0].message if right.cases else right.error
    assert set(wrong) == set(KNOWN), wrong
    print(
        f"\nagentbench_os: {len(envs)} of 145 run; references 1.0 on "
        f"{len(envs) - len(wrong)}, no-ops 0.0 on all; {2 * len(envs)} episodes in {seconds:.0f} s"
    )
