"""The session rule (``deepgym.session.failure_result``), branch by branch: no verdict where the
failure is ours for certain, the agent's 0 (``policy_sandbox_failure``) otherwise."""

from __future__ import annotations

import asyncio

import pytest

from deepgym.exceptions import (
    ConfigError,
    DeepGymTimeoutError,
    SandboxDiedError,
    SandboxExpiredError,
    TransportError,
    VerifierError,
)
from deepgym.models import Environment, ExecResult, RunResult
from deepgym.session import AGENT_SHARE, Action, AsyncSession, Budget, failure_result
from tests.fakes import SILENT_EXEC

SID = "local-abc"


def _zero(r: RunResult) -> bool:
    return r.has_verdict and r.score == 0.0 and r.error_type == "policy_sandbox_failure"


@pytest.mark.parametrize(
    "exc",
    [
        SandboxDiedError("died"),
        SandboxExpiredError("expired"),
        TransportError("refused"),
        VerifierError("crashed"),
        ConfigError("a write failed"),
        RuntimeError("unreadable"),
    ],
)
def test_before_the_agent_acted_every_failure_has_no_verdict(exc: BaseException) -> None:
    r = failure_result(exc, SID, acted=False)
    assert not r.has_verdict and r.sandbox_id == SID


@pytest.mark.parametrize(
    "exc",
    [
        TransportError("connection refused"),
        TransportError("the service answered 503", status_code=503),
        TransportError("the service answered 429", status_code=429),
        TransportError("the service answered 401", status_code=401),
        TransportError("the service answered 403", status_code=403),
        ConnectionResetError("reset"),
        TimeoutError("a provider call timed out"),
    ],
)
def test_infrastructure_after_the_agent_acted_has_no_verdict(exc: BaseException) -> None:
    r = failure_result(exc, SID)
    assert not r.has_verdict and r.score == 0.0 and r.sandbox_id == SID


def test_a_verifier_that_failed_before_it_read_has_no_verdict() -> None:
    before = RunResult.no_verdict("verifier_error", "ImportError in verifier.py")
    r = failure_result(VerifierError("crashed", result=before), SID)
    assert not r.has_verdict and r.error_type == "verifier_error" and r.sandbox_id == SID
    late = RunResult.no_verdict("timeout", "the verifier ran past its limit")
    assert not failure_result(DeepGymTimeoutError("late", result=late), SID).has_verdict


def test_a_verifier_that_failed_after_it_read_is_the_agents_zero() -> None:
    after = RunResult(score=0.0, passed=False, error_type="solution_error", error="KeyError")
    assert _zero(failure_result(VerifierError("crashed", result=after), SID))
    assert _zero(failure_result(VerifierError("no result attached"), SID))


@pytest.mark.parametrize(
    ("share", "verdict"),
    [(None, False), (0.0, False), (AGENT_SHARE - 0.01, False), (AGENT_SHARE, True), (0.9, True)],
)
def test_an_expired_session_is_ours_unless_the_agent_spent_the_time(
    share: float | None, verdict: bool
) -> None:
    r = failure_result(SandboxExpiredError("lifetime over"), SID, agent_share=share)
    assert r.has_verdict is verdict
    if verdict:
        assert _zero(r)


@pytest.mark.parametrize(
    "exc",
    [SandboxDiedError("killed"), ConfigError("write: disk full"), RuntimeError("what was that")],
)
def test_anything_else_after_the_agent_acted_is_its_zero(exc: BaseException) -> None:
    r = failure_result(exc, SID)
    assert _zero(r) and type(exc).__name__ in r.error


def test_actions_and_budgets_are_checked() -> None:
    assert Action.of({"tool": "bash", "command": "ls"}) == Action("bash", command="ls")
    with pytest.raises(ConfigError, match="tool"):
        Action.of({"tool": "rm -rf"})
    with pytest.raises(ConfigError, match="no field"):
        Action.of({"tool": "bash", "cmd": "ls"})
    with pytest.raises(ConfigError, match="an Action or a dict"):
        Action.of("ls")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="turns"):
        Budget(turns=0)
    with pytest.raises(ConfigError, match="seconds"):
        Budget(seconds=-1)


class _Provider:
    """A provider that records the timeouts it is handed (and fails ``score`` with ``raises``)."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.sandbox_id = SID
        self.env = Environment(
            name="s", kind="session", task="t", verifier_code=VERIFIER, lifetime=100
        )
        self.acted = False
        self.agent_s = 0.0
        self.timeouts: list[float | None] = []
        self.raises = raises

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        self.acted = True
        self.agent_s += 60.0
        self.timeouts.append(timeout)
        return SILENT_EXEC

    async def score(self) -> RunResult:
        assert self.raises is not None
        raise self.raises


VERIFIER = "def verify(work, tests):\n    return True\n"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "5", 1e9])
def test_a_commands_timeout_is_checked_once_for_every_provider(bad: object) -> None:
    provider = _Provider()
    session = AsyncSession(provider)
    with pytest.raises(ConfigError, match=r"^timeout must be a positive number of seconds"):
        asyncio.run(session.exec("true", bad))  # type: ignore[arg-type]
    assert provider.timeouts == [] and not session.acted  # refused before the provider
    asyncio.run(session.exec("true"))
    asyncio.run(session.exec("true", 3))
    assert provider.timeouts == [provider.env.step_timeout, 3.0]  # always finite seconds


def test_a_sessions_failure_applies_the_rule_with_what_it_knows() -> None:
    fresh = AsyncSession(_Provider())
    assert not fresh.failure(SandboxDiedError("died")).has_verdict  # not acted yet
    acted = AsyncSession(_Provider(raises=SandboxExpiredError("over")))
    asyncio.run(acted.exec("sleep 60"))  # 60 of 100 s: at least half the lifetime
    assert acted.failure(SandboxExpiredError("over")) == failure_result(
        SandboxExpiredError("over"), SID, acted=True, agent_share=0.6
    )
    assert _zero(asyncio.run(acted.score()))  # score reads its failure the same way
