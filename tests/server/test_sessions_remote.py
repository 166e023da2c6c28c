"""Agent sessions over HTTP: a real server on 127.0.0.1 over real sandboxes, driven by the
remote client with local mode's API.

The example environment travels by name (``agent/fix_add``): a session's repository and hidden
tests are folders, which an environment sent by value cannot carry. Every failure comes back as
the class local mode raises, so ``failure_result`` reads it as it reads a local session's: the
service stopped or the session lost is ``TransportError`` (no verdict), the sandbox killed is
``SandboxDiedError`` (the agent's 0), the lifetime over is ``SandboxExpiredError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deepgym import DeepGym, Environment, is_misconfiguration
from deepgym.engines.remote import RemoteEngine, RemoteSession, env_spec
from deepgym.envs.registry import AGENT_DIR, load_environment, load_folder
from deepgym.exceptions import (
    ConfigError,
    SandboxDiedError,
    SandboxExpiredError,
    TransportError,
    UnknownSessionError,
)
from deepgym.models import ExecResult, RunResult
from deepgym.sandbox.sessions import leftover_pids
from deepgym.server import sessions as server_sessions
from deepgym.server.app import create_app
from deepgym.server.inputs import Limits
from deepgym.server.runner import ThreadedServer
from deepgym.server.sessions import REAP_GRACE_S
from deepgym.session import Action, AsyncSession, Observation, failure_result
from tests.fakes import SILENT_EXEC
from tests.server.conftest import TOKEN, fake_service

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(90)]

ENV = "agent/fix_add"
FIX = "sed -i 's/a - b/a + b/' calc.py"


def serve(**kw: Any) -> ThreadedServer:
    """The app over the service's own local client (sessions need no backend), on loopback."""
    return ThreadedServer(create_app(token=TOKEN, **kw), grace_s=1.0)


@pytest.fixture
def server() -> Iterator[ThreadedServer]:
    with serve() as s:
        yield s


@pytest.fixture
def dg(server: ThreadedServer) -> Iterator[DeepGym]:
    with DeepGym(mode="remote", url=server.url, token=TOKEN) as client:
        yield client


def sandbox_pids(server: ThreadedServer, sid: str) -> set[int]:
    """The processes of session ``sid``'s sandbox on the service (the test shares its host)."""
    entry = server.service.sessions[sid]
    return leftover_pids(entry.session._inner)


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.add(pid)
        except OSError:
            pass
    return out


def wait_until(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


def test_the_example_travels_by_name_and_its_folders_never_by_value() -> None:
    assert env_spec(ENV) == ENV
    assert env_spec(load_environment(ENV)) == ENV
    assert load_environment(ENV).name == ENV
    with pytest.raises(ConfigError, match="repo/ and tests/ folders cannot be sent"):
        env_spec(load_folder(AGENT_DIR / "fix_add"))


def test_a_session_over_http_acts_carries_state_and_scores(
    server: ThreadedServer, dg: DeepGym
) -> None:
    with dg.session(ENV) as s:
        assert isinstance(s._core._inner, RemoteSession)
        assert s.sandbox_id in server.service.sessions
        assert not s.acted
        assert sorted(s.list_files()) == ["README.md", "calc.py"]
        first = s.exec("export GREETING=hello; mkdir -p notes && cd notes")
        assert first.exit_code == 0 and s.acted
        then = s.exec('echo "$GREETING"; pwd')  # the shell's variables and working dir carry
        assert then.stdout == "hello\n/work/notes\n"
        failing = s.exec("echo oops >&2; exit 3")
        assert failing.exit_code == 3 and failing.stderr == "oops\n"
        slow = s.exec("sleep 5", timeout=0.5)
        assert slow.timed_out
        s.write_file("notes/plan.txt", "fix add\n")
        assert s.read_file("notes/plan.txt") == "fix add\n"
        assert "notes/plan.txt" in s.list_files()
        assert s.list_files("notes") == ["plan.txt"]
        assert "return a - b" in s.read_file("calc.py")
        assert s.exec(f"cd /work && {FIX}").exit_code == 0
        result = s.score()
        assert result.has_verdict and result.passed and result.score == 1.0
        assert result.sandbox_id == s.sandbox_id
        assert result.env_name == ENV
        assert "+    return a + b" in s._core._inner.diff  # the work dir's changes come back
        sid = s.sandbox_id
    assert wait_until(lambda: sid not in server.service.sessions)
    agent_s = s._core.agent_share * s._core.env.lifetime
    assert agent_s >= 0.5  # the command that timed out counts as the agent's time


def test_a_bad_request_in_a_session_is_config_error_as_in_local_mode(dg: DeepGym) -> None:
    with dg.session(ENV) as s:
        with pytest.raises(ConfigError):
            s.read_file("no/such/file")
        with pytest.raises(ConfigError, match="timeout"):
            s.exec("true", timeout=-1)
        assert s.exec("echo still here").stdout == "still here\n"
    with pytest.raises(ConfigError, match="is closed"):
        s.exec("true")


def test_an_episode_runs_over_http(dg: DeepGym) -> None:
    script = [Action("bash", command="cat calc.py"), Action("bash", command=FIX)]

    def agent(obs: Observation) -> Action:
        return script[obs.step] if obs.step < len(script) else Action("done")

    episode = dg.run_episode(ENV, agent)
    assert episode.result.score == 1.0 and episode.result.passed
    assert "a - b" in (episode.trajectory[0].output.stdout if episode.trajectory[0].output else "")
    assert len(episode.trajectory) == 3


def test_a_wrong_token_is_refused_with_401(server: ThreadedServer) -> None:
    with (
        DeepGym(mode="remote", url=server.url, token="not-the-token") as dg,
        pytest.raises(TransportError) as info,
    ):
        dg.session(ENV)
    assert info.value.status_code == 401
    assert is_misconfiguration(info.value)
    assert not server.service.sessions


def test_an_unknown_session_is_a_clear_404(server: ThreadedServer, dg: DeepGym) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30.0) as http:
        r = http.post("/v1/sessions/local-nope/exec", json={"command": "true"})
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "unknown_session"
        assert "local-nope" in r.json()["error"]["message"]
        assert http.delete("/v1/sessions/local-nope").status_code == 404
        assert http.post("/v1/sessions/local-nope/score").status_code == 404
        assert http.post("/v1/sessions/local-nope/other", json={}).status_code == 404
        metrics = http.get("/metrics").text  # counted by route template, never by session id
        assert 'route="/v1/sessions/{sandbox_id}/exec",code="404"' in metrics
        assert 'route="/v1/sessions/{sandbox_id}",code="404"' in metrics
        assert "local-nope" not in metrics
    # Through the client, an id the service does not have is a session lost: ours, no verdict.
    lost = RemoteSession(RemoteEngine(server.url, TOKEN), load_environment(ENV), "local-nope")

    async def go() -> None:
        try:
            with pytest.raises(UnknownSessionError, match="lost the session") as info:
                await lost.exec("true")
            assert not failure_result(info.value, "local-nope").has_verdict
        finally:
            await lost.close()  # never raises
            await lost.engine.close()

    asyncio.run(asyncio.wait_for(go(), 30.0))


def test_the_service_stopped_mid_session_has_no_verdict() -> None:
    server = serve().start()
    try:
        with DeepGym(mode="remote", url=server.url, token=TOKEN) as dg:
            s = dg.session(ENV)
            assert s.exec(FIX).exit_code == 0
            pids = sandbox_pids(server, s.sandbox_id)
            assert alive(pids)
            server.stop()
            with pytest.raises(TransportError) as info:
                s.exec("true")
            result = failure_result(info.value, s.sandbox_id)
            assert not result.has_verdict and result.error_type == "sandbox_error"
            s.close()  # never raises, though the service is gone
    finally:
        server.stop()
    assert wait_until(lambda: not alive(pids))  # the service ended the sandbox as it stopped


def test_a_sandbox_killed_under_a_session_is_sandbox_died_and_the_agents_zero(
    server: ThreadedServer, dg: DeepGym
) -> None:
    with dg.session(ENV) as s:
        assert s.exec("echo working").exit_code == 0
        pids = sandbox_pids(server, s.sandbox_id)
        assert pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # gone with one killed before it
                os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not alive(pids))
        with pytest.raises(SandboxDiedError) as info:
            s.exec("true")
        zero = failure_result(info.value, s.sandbox_id)
        assert zero.has_verdict and zero.score == 0.0
        assert zero.error_type == "policy_sandbox_failure"
        scored = s.score()  # the service read the same failure the same way
        assert scored.error_type == "policy_sandbox_failure" and scored.score == 0.0
        assert scored.sandbox_id == s.sandbox_id


TINY = Environment(
    name="tiny-session",
    kind="session",
    verifier_code="def verify(work, tests):\n    return {'score': 1.0, 'passed': True}\n",
    lifetime=1.5,
    step_timeout=5.0,
)


def test_a_session_past_its_lifetime_is_reaped_and_answers_expired() -> None:
    with (
        serve(allow_verifier_code=True) as server,
        DeepGym(mode="remote", url=server.url, token=TOKEN) as dg,
        dg.session(TINY) as s,
    ):
        assert s.exec("true").exit_code == 0
        sid = s.sandbox_id
        pids = sandbox_pids(server, sid)
        assert wait_until(lambda: sid not in server.service.sessions, 1.5 + REAP_GRACE_S + 10)
        assert not alive(pids)
        with pytest.raises(SandboxExpiredError) as info:
            s.exec("true")
        # The agent's commands took a sliver of the lifetime: ours, no verdict.
        assert not failure_result(info.value, sid, agent_share=0.0).has_verdict
        assert not s.score().has_verdict


def test_sessions_past_the_services_limit_are_refused_with_429() -> None:
    with (
        serve(limits=Limits(max_sessions=1)) as server,
        DeepGym(mode="remote", url=server.url, token=TOKEN) as dg,
    ):
        with dg.session(ENV):
            with pytest.raises(TransportError) as info:
                dg.session(ENV)
            assert info.value.status_code == 429
        assert wait_until(lambda: not server.service.sessions)
        with dg.session(ENV) as again:  # a slot again once the first closed
            assert again.exec("true").exit_code == 0


class HeldProvider:
    """A provider session whose ``exec`` waits until released (the reaper's busy case)."""

    def __init__(self, env: Environment, sid: str) -> None:
        self.env = env
        self.sandbox_id = sid
        self.acted = False
        self.agent_s = 0.0
        self.closed = False
        self.release = asyncio.Event()

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        self.acted = True
        await self.release.wait()
        return SILENT_EXEC

    async def write_file(self, path: str, content: str | bytes) -> None:
        self.acted = True

    async def read_file(self, path: str) -> str:
        return ""

    async def list_files(self, path: str = ".") -> list[str]:
        return []

    async def score(self) -> RunResult:
        return RunResult(score=1.0, passed=True, sandbox_id=self.sandbox_id)

    async def close(self) -> None:
        self.closed = True


def test_a_session_busy_at_its_lifetime_is_reaped_once_its_request_is_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_sessions, "REAP_GRACE_S", 0.05)
    env = TINY.model_copy(update={"lifetime": 0.2})
    providers: list[HeldProvider] = []

    async def go() -> None:
        service, _ = fake_service()

        async def open_session(e: Any) -> AsyncSession:
            providers.append(HeldProvider(env, f"fake-{len(providers)}"))
            return AsyncSession(providers[-1])

        monkeypatch.setattr(service.client, "session", open_session)
        sid = await service.open_session(env)
        held = providers[0]
        busy = asyncio.ensure_future(service.in_session(sid, lambda s: s.exec("sleep")))
        await asyncio.sleep(0.5)
        assert sid in service.sessions and not held.closed  # a request in flight: kept
        with pytest.raises(SandboxExpiredError):  # but no new request is taken
            await service.in_session(sid, lambda s: s.list_files())
        held.release.set()
        await asyncio.wait_for(busy, 5.0)
        for _ in range(100):
            if held.closed:
                break
            await asyncio.sleep(0.01)
        assert held.closed and sid not in service.sessions
        with pytest.raises(SandboxExpiredError):  # its id still says what became of it
            await service.in_session(sid, lambda s: s.score())
        await service.close_session(sid)  # closed already: quiet
        with pytest.raises(UnknownSessionError):
            await service.in_session("fake-unknown", lambda s: s.score())
        other = await service.open_session(TINY)
        assert other in service.sessions
        await service.close()  # closes every session still open
        assert providers[1].closed and not service.sessions

    asyncio.run(asyncio.wait_for(go(), 30.0))


INLINE = Environment(
    name="inline",
    kind="session",
    task="Set x to 1 in state.py.",
    setup_script="printf 'x = 0\\n' > state.py",
    verifier_code=(
        "def verify(work, tests):\n    return (work / 'state.py').read_text().strip() == 'x = 1'\n"
    ),
    step_verifier_code=(
        "def verify_step(work, tests):\n"
        "    return 1.0 if 'x = 1' in (work / 'state.py').read_text() else 0.0\n"
    ),
    lifetime=60,
)


def test_a_per_step_verifier_over_http() -> None:
    with (
        serve(allow_verifier_code=True) as server,
        DeepGym(mode="remote", url=server.url, token=TOKEN) as dg,
    ):
        plan = [
            Action("bash", command="cat state.py"),
            Action("write_file", path="state.py", content="x = 1\n"),
            Action("done"),
        ]
        episode = dg.run_episode(INLINE, lambda obs: plan[obs.step])
    assert [s.reward for s in episode.trajectory] == [0.0, 1.0, None]
    assert episode.result.passed


def test_step_verifier_code_is_refused_unless_allowed() -> None:
    from deepgym.exceptions import VerifierCodeRefusedError
    from deepgym.server.inputs import parse_env

    spec = INLINE.model_dump(mode="json", exclude={"verifier_code"})
    with pytest.raises(VerifierCodeRefusedError, match=r"env\.step_verifier_code"):
        parse_env(spec, allow_verifier_code=False)
    assert parse_env(INLINE.model_dump(mode="json"), allow_verifier_code=True).step_verifier_code


def test_a_sessions_other_sandbox_failure_keeps_its_class_over_http() -> None:
    """A session's sandbox that failed otherwise than dying or expiring (a verifier that did not
    start) is a ``SandboxError`` on the client too: the rule reads it as it would locally."""
    from deepgym.exceptions import SandboxError
    from deepgym.protocol import error_for
    from deepgym.server.app import error_response

    reply = error_response(SandboxError("the verifier did not start"))
    assert reply.status_code == 500
    exc = error_for(500, bytes(reply.body))
    assert type(exc) is SandboxError and "did not start" in str(exc)
    assert failure_result(exc, "s1").error_type == "policy_sandbox_failure"  # after acting
    assert not failure_result(exc, "s1", acted=False).has_verdict  # before
