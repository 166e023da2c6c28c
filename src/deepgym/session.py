"""Agent sessions: an agent acts step by step in one sandbox, then a verifier scores its work.

``dg.session(env)`` opens a session of a ``kind: "session"`` environment (``AsyncSession`` on
``AsyncDeepGym``, ``Session`` on ``DeepGym``; both are context managers): ``exec`` runs a command
in a persistent shell (working dir, variables and files carry over), ``write_file``,
``read_file`` and ``list_files`` work in the work dir, ``score`` ends the agent's phase and runs
the environment's final verifier in a fresh sandbox over a snapshot of the work dir, and
``close`` ends everything the session started. ``dg.run_episode(env, agent, budget=...)`` drives
an agent (a callable from an ``Observation`` to an action) through one session and returns the
result with the trajectory.

The contract's rule for sessions is ``failure_result(exc, sandbox_id)``, which
``session.failure(exc)`` applies with what the session knows: before the agent has acted, every
failure has no verdict; once it has, only a failure that is ours for certain has none (what
``is_infrastructure_failure`` calls infrastructure; a verifier that could not run, or timed out,
before it read the agent's work; the sandbox's lifetime ending, unless the agent's own commands
took at least half of it). Anything else, ``SandboxDiedError`` included, is the agent's 0
(``policy_sandbox_failure``), and so is a failure the rule cannot read.

A command's ``timeout`` is checked once, by ``AsyncSession.exec`` (``deepgym.validation``), for
every provider: a provider's ``exec`` gets finite seconds.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Self

from deepgym.blocking import BlockingFace
from deepgym.exceptions import (
    ConfigError,
    DeepGymError,
    DeepGymTimeoutError,
    SandboxExpiredError,
    VerifierError,
    is_infrastructure_failure,
)
from deepgym.models import Environment, ExecResult, RunResult
from deepgym.text import one_line
from deepgym.validation import seconds

if TYPE_CHECKING:
    from deepgym.store import RunStore

__all__ = [
    "AGENT_SHARE",
    "Action",
    "AsyncSession",
    "Budget",
    "Episode",
    "ExecResult",
    "Observation",
    "ProviderSession",
    "Session",
    "Step",
    "failure_result",
    "output_text",
    "run_episode_async",
]

AGENT_SHARE = 0.5
"""A session that expired is the agent's 0 when its own commands took at least this share of
the session's lifetime (it spent the time), and has no verdict otherwise."""


def failure_result(
    exc: BaseException,
    sandbox_id: str | None,
    *,
    acted: bool = True,
    agent_share: float | None = None,
) -> RunResult:
    """The result of a session that failed with ``exc``: no verdict where the failure is ours
    for certain, the agent's 0 (``policy_sandbox_failure``) otherwise.

    ``acted``: whether the agent had acted (before that, every failure has no verdict).
    ``agent_share``: the share of the session's lifetime its own commands took (for a
    ``SandboxExpiredError``; unknown counts as less than half).
    """
    cause = one_line(f"{type(exc).__name__}: {exc}", 2000)
    error_type = "timeout" if isinstance(exc, TimeoutError) else "sandbox_error"
    if isinstance(exc, VerifierError):
        error_type = "verifier_error"
    if not acted:
        return RunResult.no_verdict(error_type, cause, sandbox_id=sandbox_id)
    if isinstance(exc, SandboxExpiredError):
        if agent_share is not None and agent_share >= AGENT_SHARE:
            return _agents_zero(cause, sandbox_id)
        return RunResult.no_verdict("sandbox_error", cause, sandbox_id=sandbox_id)
    if is_infrastructure_failure(exc):
        return RunResult.no_verdict(error_type, cause, sandbox_id=sandbox_id)
    if isinstance(exc, VerifierError | DeepGymTimeoutError):
        got = getattr(exc, "result", None)
        if isinstance(got, RunResult) and not got.has_verdict:  # before it read the work
            return got.model_copy(update={"sandbox_id": sandbox_id})
    return _agents_zero(cause, sandbox_id)


def _agents_zero(cause: str, sandbox_id: str | None) -> RunResult:
    return RunResult(
        score=0.0,
        passed=False,
        error_type="policy_sandbox_failure",
        error=cause,
        sandbox_id=sandbox_id,
    )


class ProviderSession(Protocol):
    """What a provider's session gives ``AsyncSession``: ``LocalSession`` (a sandbox on this
    host) or ``RemoteSession`` (one on a ``deepgym serve``)."""

    sandbox_id: str
    env: Environment
    acted: bool
    agent_s: float

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run a command in the session's shell (``timeout``: seconds, already checked by
        ``AsyncSession``; None: the environment's ``step_timeout``)."""
        ...

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Write a file under the work dir."""
        ...

    async def read_file(self, path: str) -> str:
        """Read a file under the work dir."""
        ...

    async def list_files(self, path: str = ".") -> list[str]:
        """The files under ``path`` in the work dir."""
        ...

    async def score(self) -> RunResult:
        """The final verifier's result; raises the session's own failure."""
        ...

    async def close(self) -> None:
        """End everything the session started."""
        ...


class AsyncSession:
    """One agent session (see the module): ``async with await dg.session(env) as s``."""

    def __init__(self, inner: ProviderSession) -> None:
        self._inner = inner

    @property
    def sandbox_id(self) -> str:
        """The session's sandbox, named in its result."""
        return self._inner.sandbox_id

    @property
    def env(self) -> Environment:
        """The session's environment."""
        return self._inner.env

    @property
    def acted(self) -> bool:
        """Whether the agent has acted (run a command, written a file)."""
        return self._inner.acted

    @property
    def agent_share(self) -> float:
        """The share of the session's lifetime the agent's own commands took."""
        return self._inner.agent_s / self._inner.env.lifetime

    @property
    def diff(self) -> str:
        """The work dir's changes from its seed, as a unified diff (after ``score``)."""
        return str(getattr(self._inner, "diff", ""))

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the session's persistent shell (see ``ExecResult``). A command
        past its ``timeout`` is killed with its process group and comes back ``timed_out``."""
        if not isinstance(command, str):
            raise ConfigError(f"command must be a str, got {type(command).__name__}")
        limit = seconds(self.env.step_timeout if timeout is None else timeout, "timeout")
        return await self._inner.exec(command, limit)

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Write a file under the work dir."""
        await self._inner.write_file(path, content)

    async def read_file(self, path: str) -> str:
        """Read a file under the work dir."""
        return await self._inner.read_file(path)

    async def list_files(self, path: str = ".") -> list[str]:
        """The files under ``path`` in the work dir."""
        return await self._inner.list_files(path)

    async def step_reward(self) -> RunResult | None:
        """The environment's per-step verifier over the work dir as it is now (the agent's
        processes go on): a shaping reward, never the verdict. None where the environment has no
        per-step verifier (or a provider of your own runs none)."""
        step_reward = getattr(self._inner, "step_reward", None)
        if step_reward is None:
            return None
        result: RunResult | None = await step_reward()
        return result

    async def score_stage(self, stage: str, *, last: bool = False) -> RunResult:
        """The final verifier's result for ``stage`` of a session in stages
        (``Environment.stages``), over the agent's work as it is now (the session goes on
        unless it is the ``last``); a failure of the session is read as ``score`` reads it."""
        inner = getattr(self._inner, "score_stage", None)
        if inner is None:
            raise ConfigError(f"env {self.env.name!r}: a session in stages runs on this host")
        try:
            result: RunResult = await inner(stage, last=last)
        except DeepGymError as exc:
            return self.failure(exc)
        return result

    async def setup_stage(self, script: str) -> None:
        """A stage's setup script, in the session's shell (not an action of the agent's)."""
        await self._inner.setup_stage(script)  # type: ignore[attr-defined]

    async def score(self) -> RunResult:
        """The final verifier's result over the agent's work; a failure of the session itself
        is read by ``failure_result``, so this returns a result (with or without a verdict)."""
        try:
            return await self._inner.score()
        except DeepGymError as exc:
            return self.failure(exc)

    def failure(self, exc: BaseException) -> RunResult:
        """The result of this session failing with ``exc`` now: ``failure_result`` with what
        the session knows (its sandbox, whether the agent acted, its share of the lifetime)."""
        return failure_result(exc, self.sandbox_id, acted=self.acted, agent_share=self.agent_share)

    async def close(self) -> None:
        """End everything the session started."""
        await self._inner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Session:
    """The blocking face of ``AsyncSession``, for ``DeepGym`` (same methods, same results),
    on the client's own portal."""

    def __init__(self, core: AsyncSession, client: BlockingFace) -> None:
        self._core = core
        self._client = client

    def _call(self, coro: Any) -> Any:
        return self._client._call(coro)

    @property
    def sandbox_id(self) -> str:
        """See ``AsyncSession.sandbox_id``."""
        return self._core.sandbox_id

    @property
    def env(self) -> Environment:
        """See ``AsyncSession.env``."""
        return self._core.env

    @property
    def acted(self) -> bool:
        """See ``AsyncSession.acted``."""
        return self._core.acted

    @property
    def agent_share(self) -> float:
        """See ``AsyncSession.agent_share``."""
        return self._core.agent_share

    @property
    def diff(self) -> str:
        """See ``AsyncSession.diff``."""
        return self._core.diff

    def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """See ``AsyncSession.exec``."""
        result: ExecResult = self._call(self._core.exec(command, timeout))
        return result

    def write_file(self, path: str, content: str | bytes) -> None:
        """See ``AsyncSession.write_file``."""
        self._call(self._core.write_file(path, content))

    def read_file(self, path: str) -> str:
        """See ``AsyncSession.read_file``."""
        text: str = self._call(self._core.read_file(path))
        return text

    def list_files(self, path: str = ".") -> list[str]:
        """See ``AsyncSession.list_files``."""
        names: list[str] = self._call(self._core.list_files(path))
        return names

    def step_reward(self) -> RunResult | None:
        """See ``AsyncSession.step_reward``."""
        result: RunResult | None = self._call(self._core.step_reward())
        return result

    def score_stage(self, stage: str, *, last: bool = False) -> RunResult:
        """See ``AsyncSession.score_stage``."""
        result: RunResult = self._call(self._core.score_stage(stage, last=last))
        return result

    def setup_stage(self, script: str) -> None:
        """See ``AsyncSession.setup_stage``."""
        self._call(self._core.setup_stage(script))

    def score(self) -> RunResult:
        """See ``AsyncSession.score``."""
        result: RunResult = self._call(self._core.score())
        return result

    def failure(self, exc: BaseException) -> RunResult:
        """See ``AsyncSession.failure``."""
        return self._core.failure(exc)

    def close(self) -> None:
        """See ``AsyncSession.close``."""
        self._call(self._core.close())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- episodes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How much an episode may take: ``turns`` actions (None: the environment's ``max_steps``)
    and ``seconds`` of wall time (None: the session's lifetime)."""

    turns: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.turns is not None and (isinstance(self.turns, bool) or self.turns < 1):
            raise ConfigError(f"turns must be a positive int or None, got {self.turns!r}")
        if self.seconds is not None and not self.seconds > 0:
            raise ConfigError(f"seconds must be positive or None, got {self.seconds!r}")


@dataclass(frozen=True)
class Action:
    """What an agent does next: ``tool`` is ``bash`` (``command``), ``write_file`` (``path``,
    ``content``) or ``done``. A dict with the same keys is read as an ``Action``."""

    tool: str
    command: str = ""
    path: str = ""
    content: str = ""

    @classmethod
    def of(cls, value: Action | Mapping[str, Any]) -> Action:
        """``value`` as an ``Action``; ``ConfigError`` for anything else."""
        if isinstance(value, Action):
            action = value
        elif isinstance(value, Mapping):
            unknown = set(value) - {"tool", "command", "path", "content"}
            if unknown:
                raise ConfigError(f"an action has no field {sorted(unknown)[0]!r}")
            action = cls(**value)
        else:
            raise ConfigError(
                f"an agent must return an Action or a dict, got {type(value).__name__}"
            )
        if action.tool not in ("bash", "write_file", "done"):
            raise ConfigError(
                f"an action's tool must be bash, write_file or done, got {action.tool!r}"
            )
        return action


@dataclass(frozen=True)
class Observation:
    """What the agent sees before each action: the task, the step number and the last
    action's outcome (``None`` before the first)."""

    task: str
    step: int
    last: ExecResult | None = None
    note: str = ""
    """A line about the last action when it was not a command (a file written)."""
    reward: float | None = None
    """The per-step verifier's score of the work dir after the last action (None: none)."""


@dataclass(frozen=True)
class Step:
    """One step of a trajectory: the action, and what it did."""

    action: Action
    output: ExecResult | None
    duration_s: float
    reward: float | None = None
    """The per-step verifier's score after this step, where the environment has one."""


def output_text(out: ExecResult, limit: int | None = None) -> str:
    """A command's outcome as an agent reads it: ``exit N`` (or ``timed out``), its stdout, then
    its stderr under ``[stderr]``; with ``limit``, the last ``limit`` characters."""
    head = "timed out" if out.timed_out else f"exit {out.exit_code}"
    text = f"{head}\n{out.stdout}" + (f"\n[stderr]\n{out.stderr}" if out.stderr else "")
    return text if limit is None else text[-limit:]


def step_record(step: Step) -> dict[str, Any]:
    """One step as plain data (a trace's line): the action, its output, exit code, duration
    and ``timed_out``."""
    out = step.output
    return {
        "action": asdict(step.action),
        "output": out.model_dump() if out is not None else None,
        "exit_code": out.exit_code if out is not None else None,
        "timed_out": out.timed_out if out is not None else False,
        "duration_s": step.duration_s,
        "reward": step.reward,
    }


@dataclass
class Episode:
    """An episode's result (a verdict, or plainly none), its trajectory, and the work dir's
    changes (``diff``); ``episode_id`` where it was recorded in a run store."""

    result: RunResult
    trajectory: list[Step] = field(default_factory=list)
    sandbox_id: str | None = None
    diff: str = ""
    episode_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The episode as plain data: one JSON trajectory."""
        return {
            "id": self.episode_id,
            "sandbox_id": self.sandbox_id,
            "steps": [step_record(s) for s in self.trajectory],
            "diff": self.diff,
            "result": self.result.model_dump(mode="json"),
        }


Agent = Callable[
    [Observation], "Action | Mapping[str, Any] | Awaitable[Action | Mapping[str, Any]]"
]


async def run_episode_async(
    open_session: Callable[[], Awaitable[AsyncSession]],
    env: Environment,
    agent: Agent,
    budget: Budget,
    store: RunStore | None = None,
) -> Episode:
    """One episode: open a session, let ``agent`` act until it says ``done`` or the budget is
    spent, then score. A failure of the session becomes ``failure_result``'s result; an error
    in ``agent`` itself is the caller's and is raised. With ``store``, the trace is recorded as
    it happens: each step, then the work dir's diff and the result."""
    turns = budget.turns or env.max_steps
    try:
        session = await open_session()
    except DeepGymError as exc:  # the session never started: the agent never acted
        episode = Episode(failure_result(exc, None, acted=False))
        if store is not None:
            episode.episode_id = store.start_episode(env.name, None)
            store.finish_episode(episode.episode_id, episode.result, "")
        return episode
    episode = Episode(RunResult.no_verdict("sandbox_error", "unfinished"), [], session.sandbox_id)
    if store is not None:
        episode.episode_id = store.start_episode(env.name, session.sandbox_id)
    try:
        await _act(session, env, agent, budget, turns, episode, store)
    finally:
        if store is not None and episode.episode_id is not None:
            store.finish_episode(episode.episode_id, episode.result, episode.diff)
    return episode


async def _act(
    session: AsyncSession,
    env: Environment,
    agent: Agent,
    budget: Budget,
    turns: int,
    episode: Episode,
    store: RunStore | None,
) -> None:
    """The agent's phase and the verdict, into ``episode`` (each step recorded in ``store``)."""
    trajectory = episode.trajectory

    def keep(step: Step) -> None:
        trajectory.append(step)
        if store is not None and episode.episode_id is not None:
            store.record_step(episode.episode_id, len(trajectory) - 1, step_record(step))

    async with session:
        deadline = time.monotonic() + (budget.seconds or env.lifetime)
        stages = env.stages or (None,)
        judged: list[tuple[str, RunResult]] = []
        for index, stage in enumerate(stages):
            task = env.task if stage is None else stage.task
            try:
                if stage is not None and index > 0 and stage.setup_script:
                    await session.setup_stage(stage.setup_script)
                for _ in range(turns - len(trajectory)):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    obs = _observe(task, trajectory)
                    chosen = agent(obs)
                    if inspect.isawaitable(chosen):
                        chosen = await chosen
                    action = Action.of(chosen)
                    if action.tool == "done":
                        keep(Step(action, None, 0.0))
                        break
                    keep(await _step(session, env, action, left))
            except DeepGymError as exc:
                episode.result = session.failure(exc)
                return
            if stage is None:
                episode.result = await session.score()
                break
            last = index == len(stages) - 1
            result = await session.score_stage(stage.name, last=last)
            judged.append((stage.name, result))
            below = stage.min_reward is not None and result.score < stage.min_reward
            if not result.has_verdict or below:
                break
        if env.stages:
            episode.result = stages_result(judged, env.stage_reward)
        episode.diff = session.diff


def _observe(task: str, trajectory: list[Step]) -> Observation:
    """What the agent sees next: the (stage's) task, the step, the last step's outcome."""
    if not trajectory or trajectory[-1].action.tool == "done":
        return Observation(task=task, step=len(trajectory))
    last = trajectory[-1]
    note = ""
    if last.action.tool == "write_file":
        note = f"wrote {last.action.path} ({len(last.action.content.encode())} bytes)"
    return Observation(
        task=task, step=len(trajectory), last=last.output, note=note, reward=last.reward
    )


async def _step(session: AsyncSession, env: Environment, action: Action, left: float) -> Step:
    """One action of the agent's, done: its output, its time, its shaping reward."""
    t0 = time.monotonic()
    output: ExecResult | None = None
    if action.tool == "bash":
        output = await session.exec(action.command, min(env.step_timeout, left))
    else:
        await session.write_file(action.path, action.content)
    took = time.monotonic() - t0
    shaped = await session.step_reward() if env.step_verifier_code else None
    reward = shaped.score if shaped is not None and shaped.has_verdict else None
    return Step(action, output, took, reward)


def stages_result(judged: list[tuple[str, RunResult]], rule: str = "mean") -> RunResult:
    """The episode's result from its stages' (in order, those run): the first without a
    verdict, as it is; else the mean of their scores (``rule`` ``"mean"``, Harbor's default)
    or the last one's (``"final"``), each stage's score a reward component and its cases
    named by it. Pure."""
    if not judged:
        return RunResult.no_verdict("sandbox_error", "no stage was judged")
    for _, result in judged:
        if not result.has_verdict:
            return result
    scores = {name: result.score for name, result in judged}
    score = judged[-1][1].score if rule == "final" else sum(scores.values()) / len(scores)
    cases = [
        case.model_copy(update={"name": f"{name}: {case.name}"})
        for name, result in judged
        for case in result.cases
    ]
    last = judged[-1][1]
    return last.model_copy(
        update={
            "score": score,
            "passed": score == 1.0,
            "error_type": None,
            "error": "",
            "cases": cases,
            "reward_components": scores,
        }
    )
