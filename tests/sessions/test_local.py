"""Local sessions: the shell, files, the verdict, episodes, and the rule with real faults."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from deepgym import AsyncDeepGym, DeepGym
from deepgym.exceptions import ConfigError
from deepgym.models import Environment
from deepgym.sandbox.spawn import kill_tree
from deepgym.session import Action, Budget, Observation
from tests.procs import host_ignores
from tests.sessions.conftest import FIX

pytestmark = pytest.mark.sandbox


def test_the_shell_keeps_its_state_between_steps(dg: DeepGym, example: Environment) -> None:
    with dg.session(example) as s:
        assert s.sandbox_id.startswith("local-")
        s.exec("mkdir -p sub && cd sub && export GREETING=hi && COUNT=3 && f() { echo f$1; }")
        r = s.exec('pwd; echo "$GREETING $COUNT"; f 7; ls ..')
        assert r.stdout.splitlines()[:3] == ["/work/sub", "hi 3", "f7"]
        assert "calc.py" in r.stdout.splitlines()[3:]
        assert (r.exit_code, r.timed_out, r.truncated) == (0, False, False)
        r = s.exec("exit 4")
        assert r.exit_code == 4 and s.exec("pwd").stdout == "/work/sub\n"  # still there


def test_what_the_host_process_ignores_never_reaches_the_agent(example: Environment) -> None:
    """Started under ``nohup`` (SIGHUP ignored) or as a shell's background job (SIGINT and
    SIGQUIT ignored), the agent's commands still start with no signal ignored or blocked. (A
    client of its own: its sandboxes start after the host ignores them.)"""
    with host_ignores(), DeepGym() as dg, dg.session(example) as s:
        r = s.exec("grep -E '^Sig(Ign|Blk)' /proc/self/status")
    assert r.stdout == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n", r


def test_a_command_past_its_timeout_is_killed_and_the_shell_stays(
    dg: DeepGym, example: Environment
) -> None:
    with dg.session(example) as s:
        t0 = time.monotonic()
        r = s.exec("echo started; sleep 30 & sleep 30", timeout=0.5)
        assert r.timed_out and r.exit_code == 137 and r.stdout == "started\n"
        assert time.monotonic() - t0 < 5
        assert s.exec("pgrep -c sleep || true").stdout.strip() == "0"  # the group went with it
        assert s.exec("echo fine").stdout == "fine\n"


def test_output_is_capped_and_counted(dg: DeepGym, example: Environment) -> None:
    with dg.session(example) as s:
        r = s.exec("head -c 300000 /dev/zero | tr '\\0' x; echo oops >&2")
        assert r.truncated and r.stdout_bytes == 300000 and len(r.stdout) == 65536
        assert r.stderr == "oops\n" and r.stderr_bytes == 5


def test_files_in_the_work_dir(dg: DeepGym, example: Environment) -> None:
    with dg.session(example) as s:
        s.write_file("notes/a.txt", "one\ntwo\n")
        assert s.read_file("notes/a.txt") == "one\ntwo\n"
        assert s.exec("wc -l < notes/a.txt").stdout.strip() == "2"
        assert s.list_files() == ["README.md", "calc.py", "notes/a.txt"]
        assert s.list_files("notes") == ["a.txt"]
        with pytest.raises(ConfigError, match="outside the work dir"):
            s.read_file("../etc/passwd")
        with pytest.raises(ConfigError, match="outside the work dir"):
            s.write_file("/tmp/x", "x")


def test_the_final_verifier_scores_the_work_dir(dg: DeepGym, example: Environment) -> None:
    with dg.session(example) as s:
        unfixed = s.score()
    assert unfixed.has_verdict and unfixed.error_type is None and len(unfixed.cases) == 5
    assert unfixed.score == 0.0 and not unfixed.passed
    assert unfixed.sandbox_id == s.sandbox_id
    with dg.session(example) as s:
        s.exec(FIX)
        fixed = s.score()
    assert (fixed.score, fixed.passed, fixed.has_verdict) == (1.0, True, True)
    assert [c.passed for c in fixed.cases] == [True] * 5


def test_an_episode_with_a_sync_agent_and_an_async_one(dg: DeepGym, example: Environment) -> None:
    seen: list[Observation] = []

    def agent(obs: Observation) -> dict[str, str]:
        seen.append(obs)
        script = [
            {"tool": "bash", "command": "cat calc.py"},
            {"tool": "bash", "command": FIX},
            {"tool": "write_file", "path": "NOTES.md", "content": "fixed add\n"},
            {"tool": "done"},
        ]
        return script[obs.step]

    episode = dg.run_episode(example, agent, budget=Budget(turns=10))
    assert episode.result.passed and episode.result.sandbox_id == episode.sandbox_id
    assert [s.action.tool for s in episode.trajectory] == ["bash", "bash", "write_file", "done"]
    assert "a - b" in (episode.trajectory[0].output.stdout if episode.trajectory[0].output else "")
    assert seen[0].last is None and seen[0].task == example.task
    assert seen[3].note == "wrote NOTES.md (10 bytes)"
    data = episode.to_json()
    assert data["steps"][1]["action"]["command"] == FIX and data["result"]["score"] == 1.0

    async def lazy(obs: Observation) -> Action:
        return Action("bash", command="true")

    async def go() -> None:
        async with AsyncDeepGym() as adg:
            ep = await adg.run_episode(example, lazy, budget=Budget(turns=2))
        assert len(ep.trajectory) == 2 and ep.result.has_verdict and ep.result.score == 0.0

    asyncio.run(go())


def test_a_single_run_refuses_a_session_environment(dg: DeepGym, example: Environment) -> None:
    with pytest.raises(ConfigError, match="is a session"):
        dg.run(example, "x")
    with pytest.raises(ConfigError, match="not a session"):
        dg.session("two_sum")


def test_a_failed_setup_has_no_verdict(dg: DeepGym, make_env: Callable[..., Environment]) -> None:
    env = make_env(setup_script="echo setting up; exit 3")
    episode = dg.run_episode(env, lambda obs: {"tool": "done"})
    assert not episode.result.has_verdict and "setup script failed" in episode.result.error


def test_a_verifier_that_crashes_before_it_reads_has_no_verdict(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    env = make_env(verifier="import no_such_module\ndef verify(work, tests):\n    return 1.0\n")
    with dg.session(env) as s:
        s.exec(FIX)
        r = s.score()
    assert not r.has_verdict and r.error_type == "verifier_error" and "no_such_module" in r.error
    env = make_env(verifier="def verify(work, tests):\n    raise RuntimeError('broke first')\n")
    with dg.session(env) as s:
        s.exec(FIX)
        r = s.score()
    assert not r.has_verdict and "broke first" in r.error


def test_a_verifier_that_crashes_after_it_reads_is_the_agents_zero(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    verifier = (
        "def verify(work, tests):\n"
        "    (work / 'calc.py').read_text()\n"
        "    raise RuntimeError('choked on the work')\n"
    )
    with dg.session(make_env(verifier=verifier)) as s:
        s.exec(FIX)
        r = s.score()
    assert r.has_verdict and r.score == 0.0 and r.error_type == "solution_error"


def test_the_verifiers_output_is_capped_on_the_host(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    """A verifier that runs the agent's work, which floods its output, costs the host a capped
    excerpt (the host kept all of it, 1 GB here, before reading it)."""
    import resource

    verifier = (
        "import subprocess\n"
        "def verify(work, tests):\n"
        "    subprocess.run(['sh', str(work / 'flood.sh')], timeout=30)\n"
        "    return 1.0\n"
    )
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with dg.session(make_env(verifier=verifier, timeout=30.0)) as s:
        s.write_file("flood.sh", "head -c 1000000000 /dev/zero | tr '\\0' x\n")
        r = s.score()
    grown_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before_mb
    assert r.has_verdict and r.score == 1.0, r.error
    assert 0 < len(r.stdout) <= 8192 and set(r.stdout) == {"x"}
    assert grown_mb < 200, f"the host grew by {grown_mb:.0f} MB"


def test_a_report_past_a_pipes_buffer_comes_back(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    """A verdict of many cases (about 1 MB of JSON) is read as it is written: the verifier
    waited on a full pipe until the time limit, and the session had no verdict."""
    verifier = (
        "def verify(work, tests):\n"
        "    ok = 'a + b' in (work / 'calc.py').read_text()\n"
        "    cases = [{'name': f'case_{i}', 'passed': ok, 'message': 'm' * 200}\n"
        "             for i in range(4000)]\n"
        "    return {'score': float(ok), 'passed': ok, 'cases': cases}\n"
    )
    with dg.session(make_env(verifier=verifier, timeout=20.0)) as s:
        s.exec(FIX)
        r = s.score()
    assert r.has_verdict and r.passed and len(r.cases) == 4000, r.error
    assert r.evidence.in_play_by == "work_dir_read" and r.evidence.in_play_ms is not None


@pytest.mark.parametrize("status", ["sandbox_error", "timeout", "verifier_error", "bogus"])
def test_a_status_the_verifier_returns_cannot_mask_the_agents_sample(
    dg: DeepGym, make_env: Callable[..., Environment], status: str
) -> None:
    """The value a session's verifier returns follows the function task's rule: a status that
    would have no verdict is the verifier's own failure, the agent's 0 once its work was read."""
    verifier = (
        "def verify(work, tests):\n"
        "    ok = 'a + b' in (work / 'calc.py').read_text()\n"
        f"    return {{'status': {status!r}, 'score': float(ok), 'passed': ok}}\n"
    )
    with dg.session(make_env(verifier=verifier)) as s:
        s.exec(FIX)
        r = s.score()
    assert r.has_verdict and (r.score, r.passed, r.error_type) == (0.0, False, "solution_error")
    assert f"status {status!r}" in r.error


def test_a_verifier_may_report_the_agents_failure_and_return_any_value_in_its_cases(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    verifier = (
        "def verify(work, tests):\n"
        "    (work / 'calc.py').read_text()\n"
        "    return {'status': 'solution_timeout', 'score': 0.0, 'message': 'too slow',\n"
        "            'cases': [{'name': 'slow', 'passed': False, 'message': work}]}\n"
    )
    with dg.session(make_env(verifier=verifier)) as s:
        r = s.score()
    assert r.has_verdict and (r.score, r.error_type, r.error) == (
        0.0,
        "solution_timeout",
        "too slow",
    )
    assert [(c.name, c.passed, c.message) for c in r.cases] == [("slow", False, "/work")]
    verifier = "def verify(work, tests):\n    return {'score': 1.0, 'details': work}\n"
    with dg.session(make_env(verifier=verifier)) as s:  # a value JSON cannot hold is dropped
        r = s.score()
    assert r.has_verdict and r.score == 1.0


def test_a_sandbox_killed_from_outside_is_the_agents_zero(
    dg: DeepGym, example: Environment
) -> None:
    def agent(obs: Observation) -> Action:
        if obs.step == 1:  # after its first action: kill the whole sandbox, as an outage would
            inner = session_of[0]
            assert inner.proc is not None
            kill_tree(inner.proc.pid)
        return Action("bash", command="true")

    session_of: list[object] = []
    original = dg._core._engine.open_session  # type: ignore[attr-defined]

    async def spy(env: Environment) -> object:
        inner = await original(env)
        session_of.append(inner)
        return inner

    dg._core._engine.open_session = spy  # type: ignore[attr-defined]
    episode = dg.run_episode(example, agent, budget=Budget(turns=5))
    r = episode.result
    assert r.has_verdict and r.score == 0.0 and r.error_type == "policy_sandbox_failure"
    assert "SandboxDiedError" in r.error


def test_an_expired_session_with_an_idle_agent_has_no_verdict(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    env = make_env(lifetime=1.5)

    def idle(obs: Observation) -> Action:
        time.sleep(0.9)  # thinking: the agent's commands take no time
        return Action("bash", command="true")

    episode = dg.run_episode(env, idle, budget=Budget(turns=5, seconds=30))
    r = episode.result
    assert not r.has_verdict and "SandboxExpiredError" in r.error


def test_an_expired_session_with_a_busy_agent_is_its_zero(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    env = make_env(lifetime=1.5, step_timeout=5)

    def busy(obs: Observation) -> Action:
        return Action("bash", command="sleep 0.6")

    episode = dg.run_episode(env, busy, budget=Budget(turns=6, seconds=30))
    r = episode.result
    assert r.has_verdict and r.error_type == "policy_sandbox_failure"
    assert "SandboxExpiredError" in r.error


def test_closing_the_client_ends_open_sessions(example: Environment) -> None:
    from tests.procs import descendants

    before = descendants(os.getpid())
    dg = DeepGym()
    s = dg.session(example)
    s.exec("sleep 100 >/dev/null 2>&1 &")
    assert descendants(os.getpid()) - before
    dg.close()
    assert not descendants(os.getpid()) - before


def test_a_warm_start_hands_over_a_fresh_standby(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    env = make_env(lifetime=1.0)
    first = dg.session(env)
    first.exec("touch left-by-first; export X=1")
    first.close()
    time.sleep(1.5)  # the standby waits longer than the lifetime: its clock has not started
    second = dg.session(env)
    assert second.sandbox_id != first.sandbox_id
    assert second.list_files() == ["README.md", "calc.py"]  # nothing of the first session
    assert second.exec("echo ${X:-unset}").stdout == "unset\n"
    second.close()
    provider = dg._core._engine._sessions  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while not all(t.done() for t in provider._standby.values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    for task in provider._standby.values():  # a standby that died while waiting
        kill_tree(task.result().proc.pid)
    time.sleep(0.2)
    third = dg.session(env)  # is not handed out: a new sandbox starts
    assert third.exec("echo ok").stdout == "ok\n"
    third.close()
    other = dg.session(make_env(lifetime=1.0, memory_mb=128))  # other limits: its own sandbox
    assert other.exec("echo ok").stdout == "ok\n"
    other.close()


STEP_VERIFIER = """
def verify_step(work, tests):
    source = (work / "calc.py").read_text()
    return 1.0 if "a + b" in source else 0.0
"""


def test_a_per_step_verifier_rewards_each_step_and_never_decides_the_verdict(
    dg: DeepGym, make_env: Callable[..., Environment]
) -> None:
    env = make_env(step_verifier_code=STEP_VERIFIER)
    plan = [
        Action("bash", command="sleep 1000 >/dev/null 2>&1 & echo started"),
        Action("bash", command=FIX),
        Action("bash", command="pgrep -c sleep"),  # the agent's processes went on
        Action("done"),
    ]
    seen: list[float | None] = []

    def agent(obs: Observation) -> Action:
        seen.append(obs.reward)
        return plan[obs.step]

    episode = dg.run_episode(env, agent)
    assert [s.reward for s in episode.trajectory] == [0.0, 1.0, 1.0, None]
    assert seen == [None, 0.0, 1.0, 1.0]
    assert episode.trajectory[2].output is not None
    assert episode.trajectory[2].output.stdout.strip() == "1"
    assert episode.result.passed and episode.to_json()["steps"][1]["reward"] == 1.0
    with dg.session(make_env()) as s:  # no per-step verifier: no reward
        assert s.step_reward() is None


def test_a_folders_step_verifier_is_loaded(tmp_path: Path) -> None:
    import shutil

    from deepgym.envs.registry import load_folder
    from tests.sessions.conftest import EXAMPLE

    folder = tmp_path / "env"
    shutil.copytree(EXAMPLE, folder)
    (folder / "step_verifier.py").write_text(STEP_VERIFIER)
    env = load_folder(folder)
    assert env.kind == "session" and env.step_verifier_code == STEP_VERIFIER
    assert env.tests_path == folder / "tests" and env.repo_path == folder / "repo"


# Unclosed on purpose: asyncio says so of the transports the collected provider held.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_client_collected_without_close_leaves_no_sandbox(example: Environment) -> None:
    import gc

    from tests.procs import descendants

    before = descendants(os.getpid())

    async def go() -> None:
        dg = AsyncDeepGym()
        s = await dg.session(example)
        await s.exec("sleep 100 >/dev/null 2>&1 &")
        await asyncio.sleep(0.5)  # the standby for the next open has started too
        assert len(descendants(os.getpid()) - before) >= 4
        del s, dg
        gc.collect()  # no close(): the provider's finaliser ends its sandboxes
        deadline = time.monotonic() + 5
        while descendants(os.getpid()) - before and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not descendants(os.getpid()) - before

    asyncio.run(go())
    for _ in range(3):  # what the collected provider held goes here, inside this test's filters
        gc.collect()
        time.sleep(0.1)
