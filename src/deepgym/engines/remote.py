"""The remote engine: the client's methods over HTTP to ``deepgym serve`` (httpx).

``AsyncDeepGym(mode="remote", url=..., token=...)`` delegates here, after checking its
arguments; results are the same ``RunResult``, ``BatchResult`` and ``EvalResult`` that local mode
returns, computed by the service.

Failure rules (the contract's, unchanged by the network):

- ``run`` raises what local mode raises: the contract's no-verdict exceptions as the service raised
  them, ``ConfigError`` / ``UnknownEnvironmentError`` for bad input, and ``TransportError`` when the
  service cannot be reached, breaks the protocol, or answers 401, 403, 429 or 5xx.
- ``run_batch``, ``stream_groups`` and ``eval`` never raise for a run: a transport failure turns
  every run whose group did not arrive into a result without a verdict (``sandbox_error``, with the
  cause), and the groups that did arrive are kept. Bad input raises before anything runs, and so
  does a misconfiguration that fails every run alike before any group came back
  (``is_misconfiguration``: the service refused the token with 401 or 403, or could not be
  reached at all): ``TransportError``, never a batch whose every reward is None. One
  exception: an ``eval`` of a suite named by string, whose size only the service knows, raises
  ``TransportError`` if the stream fails before the service said what it holds (nothing was lost:
  nothing had come back).

Agent sessions (``open_session``, for ``dg.session``) are ``RemoteSession``: each call one request
under ``/v1/sessions``. A failure of the session's sandbox on the service raises the class local
mode raises (``SandboxDiedError``, ``SandboxExpiredError``), a transport failure raises
``TransportError`` and a session the service no longer has ``UnknownSessionError`` (a
``TransportError``), so ``deepgym.session.failure_result`` reads them as it reads a local
session's. The service and this client share the wire's constants (``deepgym.protocol``): this
module imports nothing of this host's sandbox.

httpx errors are translated once, here, with ``raise ... from exc``.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel

from deepgym.envs.registry import list_environments, load_environment, load_folder
from deepgym.exceptions import ConfigError, DeepGymError, TransportError, is_misconfiguration
from deepgym.models import BatchResult, Environment, EvalResult, ExecResult, RunResult
from deepgym.protocol import (
    REPLY_GRACE_S,
    BatchRequest,
    EnvSpec,
    EvalRequest,
    RunReply,
    RunRequest,
    SessionExecReply,
    SessionExecRequest,
    SessionListRequest,
    SessionOpenReply,
    SessionOpenRequest,
    SessionReadRequest,
    SessionScoreReply,
    SessionStepReply,
    SessionWriteRequest,
    StreamEvent,
    TimeLimitRequest,
    error_for,
    parse_event,
    raised_error,
)
from deepgym.scheduling import broadcast_envs, group_slices
from deepgym.types import EnvLike, Envs, Group, ProgressFn

if TYPE_CHECKING:
    import httpx

M = TypeVar("M", bound=BaseModel)

__all__ = ["RemoteEngine", "RemoteSession", "env_spec", "lost"]

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
"""The service sends a heartbeat every few seconds on a stream, so a healthy one never idles
this long."""
SESSION_SLACK_S = 30.0
"""A session request waits this long past the time the service may take for it (a command's
timeout, the verifier's), before it counts as lost."""


def env_spec(env: EnvLike) -> EnvSpec:
    """How an environment travels: a name the service resolves, or its fields by value.

    A built-in (or an example session, ``agent/<id>``) passes by name when it is that environment
    unchanged. A folder or a changed environment passes by value; its ``verifier.py`` travels as
    ``verifier_code``, which the service refuses unless it was started with
    ``--allow-verifier-code``. A patch task's repository, and a session's repository and hidden
    tests, do not travel.
    """
    if isinstance(env, str) and not (env not in list_environments() and Path(env).is_dir()):
        return env
    if isinstance(env, str | Path):
        env = load_folder(env)
    if not isinstance(env, Environment):
        raise ConfigError(f"env must be an Environment, a name or a path, got {type(env).__name__}")
    if _registered(env):
        return env.name
    if env.repo_path is not None and env.kind != "session":
        raise ConfigError(
            f"env {env.name!r}: a patch environment's repository cannot be sent to the service; "
            "name an environment the service has"
        )
    if env.repo_path is not None or env.tests_path is not None:
        raise ConfigError(
            f"env {env.name!r}: a session environment's repo/ and tests/ folders cannot be sent to "
            "the service; name an environment the service has (such as agent/fix_add)"
        )
    fields = env.model_dump(
        mode="json", exclude={"source_dir", "verifier_path", "repo_path", "tests_path"}
    )
    if env.verifier_path is not None:
        try:
            fields["verifier_code"] = Path(env.verifier_path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"env {env.name!r}: cannot read {env.verifier_path}: {exc}") from exc
    return fields


def _registered(env: Environment) -> bool:
    """Whether ``env`` is a built-in or an example session, unchanged: it travels by name."""
    if env.name in list_environments():
        return load_environment(env.name) == env
    if env.name.startswith("agent/") and not Path(env.name).exists():
        try:
            return load_environment(env.name) == env
        except DeepGymError:
            return False
    return False


def _spec_name(spec: EnvSpec) -> str:
    return spec if isinstance(spec, str) else str(spec.get("name", ""))


def lost(env_name: str | None, cause: str) -> RunResult:
    """A run whose result did not come back: no verdict, never a zero."""
    return RunResult.no_verdict("sandbox_error", f"TransportError: {cause}", env_name=env_name)


class RemoteEngine:
    """``AsyncDeepGym``'s methods over HTTP (``transport``: for tests, ``httpx.MockTransport``)."""

    mode = "remote"

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"url must be an http:// or https:// URL, got {url!r}")
        if token is not None and (not isinstance(token, str) or not token):
            raise ConfigError("token must be a non-empty str or None")
        self.url = url.rstrip("/")
        self.token = token
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
            self._http = httpx.AsyncClient(
                base_url=self.url,
                headers=headers,
                transport=self._transport,
                timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
            )
        return self._http

    async def _post(self, path: str, body: Any) -> bytes:
        """POST and read the whole reply; any failure to get a 2xx raises."""
        return await self._send("POST", path, body)

    async def _send(
        self, method: str, path: str, body: Any = None, *, wait_s: float | None = None
    ) -> bytes:
        """One request (``wait_s``: its read timeout, else ``READ_TIMEOUT_S``) and its whole
        reply; any failure to get a 2xx raises."""
        import httpx

        extra: dict[str, Any] = {}
        if body is not None:
            extra["content"] = body.model_dump_json()
        if wait_s is not None:
            extra["timeout"] = httpx.Timeout(wait_s, connect=CONNECT_TIMEOUT_S)
        try:
            response = await self._client().request(method, path, **extra)
            content = await response.aread()
        except httpx.HTTPError as exc:
            raise self._failed(path, exc) from exc
        if response.status_code >= 300:
            raise error_for(response.status_code, content)
        return content

    # -- single calls -----------------------------------------------------------------------
    async def time_limit(self, env: EnvLike, time_limit: float | None = None) -> float:
        """The service's time limit for ``env``."""
        content = await self._post(
            "/v1/time_limit", TimeLimitRequest(env=env_spec(env), time_limit=time_limit)
        )
        try:
            return float(_json(content)["time_limit"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TransportError(f"malformed reply from the service: {content[:200]!r}") from exc

    async def run(
        self, env: EnvLike, model_output: str, *, time_limit: float | None = None
    ) -> RunResult:
        """Score one answer on the service; raise what the service raised."""
        body = RunRequest(env=env_spec(env), answer=model_output, time_limit=time_limit)
        content = await self._post("/v1/run", body)
        try:
            reply = RunReply.model_validate_json(content)
        except ValueError as exc:
            raise TransportError(f"malformed reply from the service: {exc}") from exc
        if reply.raised is not None:
            raise raised_error(reply.raised, reply.result)
        if reply.result is None:
            raise TransportError("the service replied with neither a result nor an error")
        return reply.result

    # -- streams ----------------------------------------------------------------------------
    async def _events(self, path: str, body: Any) -> AsyncGenerator[StreamEvent, None]:
        """The stream's events up to ``end``; raises ``TransportError`` if it stops early."""
        import httpx

        try:
            async with self._client().stream("POST", path, content=body.model_dump_json()) as r:
                if r.status_code >= 300:
                    raise error_for(r.status_code, await r.aread())
                async for line in r.aiter_lines():
                    if not line.strip():
                        continue
                    event = parse_event(line)
                    yield event
                    if event.event == "end":
                        return
        except httpx.HTTPError as exc:
            raise self._failed(path, exc) from exc
        raise TransportError(f"{self.url}{path}: the stream ended before its last group")

    def _failed(self, path: str, exc: Exception) -> TransportError:
        """httpx's error as a ``TransportError``; ``unreachable`` when no connection was made."""
        import httpx

        unreachable = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
        said = f"{self.url}{path}: {type(exc).__name__}: {exc}"
        if unreachable:
            said += " (is the service running at that url?)"
        return TransportError(said, unreachable=unreachable)

    async def _groups(
        self,
        path: str,
        body: Any,
        names: list[str] | None,
        group_size: int | None,
        progress: ProgressFn | None,
        start: dict[str, Any],
    ) -> AsyncGenerator[Group, None]:
        """Yield each group as it arrives; after a failure, every missing group, without a verdict.

        ``names`` are the environments' names per answer (None: the ``start`` event says).
        ``start`` receives the ``start`` and ``end`` events' fields.
        """
        groups = group_slices(len(names), group_size) if names is not None else None
        seen: set[int] = set()
        cause = ""
        try:
            async with aclosing(self._events(path, body)) as events:
                async for ev in events:
                    if ev.event == "start":
                        start.update(ev.model_dump(exclude_none=True))
                        if names is None:
                            names = list(ev.env_names or [])
                            groups = group_slices(len(names), group_size)
                        if ev.total != len(names):
                            raise TransportError(
                                f"the service started {ev.total} runs, not {len(names)}"
                            )
                    elif ev.event == "progress" and progress is not None and ev.done is not None:
                        progress(ev.done, len(names or ()))
                    elif ev.event == "group":
                        g = _check_group(ev, groups, seen)
                        seen.add(g)
                        yield g, list(ev.results or [])
        except TransportError as exc:
            if not seen and is_misconfiguration(exc):
                # Every run would fail alike (refused credentials, no service at that url):
                # raise, rather than hand back a batch whose every reward is None.
                raise
            cause = str(exc)
        if groups is None or names is None:
            raise TransportError(cause or "the stream ended before it started")
        for g, idx in enumerate(groups):
            if g not in seen:
                yield g, [lost(names[i], cause) for i in idx]

    def _batch_body(
        self,
        env: Envs,
        outputs: Sequence[str],
        max_parallel: int,
        group_size: int | None,
        time_limit: float | None,
    ) -> tuple[BatchRequest, list[str]]:
        if isinstance(env, list | tuple):
            specs = [env_spec(e) for e in broadcast_envs(env, len(outputs))]  # type: ignore[arg-type]
            names = [_spec_name(s) for s in specs]
            spec: EnvSpec | list[EnvSpec] = specs
        else:
            spec = env_spec(cast("EnvLike", env))
            names = [_spec_name(spec)] * len(outputs)
        body = BatchRequest(
            env=spec,
            answers=list(outputs),
            group_size=group_size,
            max_parallel=max_parallel,
            time_limit=time_limit,
        )
        return body, names

    async def stream_groups(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        group_size: int,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> AsyncGenerator[Group, None]:
        """Yield each group as the service sends it; then the lost ones, without a verdict."""
        body, names = self._batch_body(env, outputs, max_parallel, group_size, time_limit)
        async for item in self._groups("/v1/run_batch", body, names, group_size, progress, {}):
            yield item

    async def run_batch(
        self,
        env: Envs,
        outputs: Sequence[str],
        *,
        max_parallel: int = 8,
        group_size: int | None = None,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> BatchResult:
        """Score many answers on the service, in the order of ``outputs``."""
        body, names = self._batch_body(env, outputs, max_parallel, group_size, time_limit)
        t0 = time.monotonic()
        results: list[RunResult | None] = [None] * len(names)
        groups = group_slices(len(names), group_size)
        async for g, rs in self._groups("/v1/run_batch", body, names, group_size, progress, {}):
            for i, r in zip(groups[g], rs, strict=True):
                results[i] = r
        return BatchResult(
            results=_complete(results), execution_time_ms=(time.monotonic() - t0) * 1000.0
        )

    async def eval(
        self,
        envs_or_suite: Sequence[EnvLike] | str,
        outputs: Mapping[str, str],
        *,
        max_parallel: int = 8,
        time_limit: float | None = None,
        progress: ProgressFn | None = None,
    ) -> EvalResult:
        """Score one answer per environment on the service."""
        names: list[str] | None = None
        if isinstance(envs_or_suite, str):
            body = EvalRequest(
                suite=envs_or_suite,
                outputs=dict(outputs),
                max_parallel=max_parallel,
                time_limit=time_limit,
            )
        else:
            specs = [env_spec(e) for e in envs_or_suite]
            names = [_spec_name(s) for s in specs]
            body = EvalRequest(
                envs=specs, outputs=dict(outputs), max_parallel=max_parallel, time_limit=time_limit
            )
        t0 = time.monotonic()
        start: dict[str, Any] = {}
        got: dict[int, RunResult] = {}
        async for g, rs in self._groups("/v1/eval", body, names, 1, progress, start):
            got[g] = rs[0]
        env_names = names if names is not None else list(start.get("env_names") or [])
        return EvalResult(
            results=[got[i] for i in range(len(env_names))],
            env_names=env_names,
            execution_time_ms=(time.monotonic() - t0) * 1000.0,
        )

    async def sandbox_stats(self) -> dict[str, Any]:
        """Nothing: the sandboxes are the service's."""
        return {}

    # -- agent sessions ---------------------------------------------------------------------
    async def open_session(self, env: Environment) -> RemoteSession:
        """A new agent session of ``env`` in a sandbox of its own on the service."""
        spec = env_spec(env)
        # The service starts the sandbox (bounded by 30 s) and runs the setup script.
        wait_s = 30.0 + env.step_timeout + REPLY_GRACE_S + SESSION_SLACK_S
        content = await self._send(
            "POST", "/v1/sessions", SessionOpenRequest(env=spec), wait_s=wait_s
        )
        reply = _reply(SessionOpenReply, content)
        return RemoteSession(self, env, reply.sandbox_id)

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()


class RemoteSession:
    """An agent session on a ``deepgym serve``: ``LocalSession``'s interface, each call one
    request. ``acted`` and ``agent_s`` are kept here as ``LocalSession`` keeps them."""

    def __init__(self, engine: RemoteEngine, env: Environment, sandbox_id: str) -> None:
        self.engine = engine
        self.env = env
        self.sandbox_id = sandbox_id
        self.acted = False
        """Whether the agent has acted (a command, a file written): the session rule's line."""
        self.agent_s = 0.0
        """Time the agent's own commands ran (as the service measured them)."""
        self.diff = ""
        """The work dir's changes from its seed, as a unified diff (set by ``score``)."""
        self.closed = False
        self._path = f"/v1/sessions/{sandbox_id}"

    async def _call(self, op: str, body: Any = None, *, wait_s: float = READ_TIMEOUT_S) -> bytes:
        if self.closed:
            raise ConfigError(f"session {self.sandbox_id} is closed")
        return await self.engine._send("POST", f"{self._path}/{op}", body, wait_s=wait_s)

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the session's shell on the service (see ``LocalSession.exec``)."""
        limit = self.env.step_timeout if timeout is None else timeout  # checked by AsyncSession
        self.acted = True
        body = SessionExecRequest(command=command, timeout=float(limit))
        content = await self._call("exec", body, wait_s=limit + REPLY_GRACE_S + SESSION_SLACK_S)
        got: ExecResult = _reply(SessionExecReply, content)
        self.agent_s += got.duration_s
        return got

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Write ``content`` to ``path`` under the work dir."""
        data = content.encode() if isinstance(content, str) else bytes(content)
        self.acted = True
        body = SessionWriteRequest(path=path, content_b64=base64.b64encode(data).decode())
        await self._call("files/write", body)

    async def read_file(self, path: str) -> str:
        """The text of ``path`` under the work dir (its first megabyte)."""
        got = _json(await self._call("files/read", SessionReadRequest(path=path)))
        if not isinstance(got, dict) or not isinstance(got.get("content"), str):
            raise TransportError(f"malformed reply from the service: {str(got)[:200]!r}")
        content: str = got["content"]
        return content

    async def list_files(self, path: str = ".") -> list[str]:
        """Every file under ``path`` in the work dir, relative to it."""
        got = _json(await self._call("files/list", SessionListRequest(path=path)))
        files = got.get("files") if isinstance(got, dict) else None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise TransportError(f"malformed reply from the service: {str(got)[:200]!r}")
        return list(files)

    async def score(self) -> RunResult:
        """The service's result for the session: its final verifier's, or, where the session
        failed there, ``failure_result``'s (the service read the failure as this side would)."""
        # The snapshot (30 s), then the verifier in a fresh sandbox (the environment's timeout).
        wait_s = 30.0 + self.env.timeout + 2 * REPLY_GRACE_S + SESSION_SLACK_S
        reply = _reply(SessionScoreReply, await self._call("score", wait_s=wait_s))
        self.diff = reply.diff
        return reply.result

    async def step_reward(self) -> RunResult | None:
        """The per-step verifier's result on the service (see ``LocalSession.step_reward``)."""
        if self.env.step_verifier_code is None:
            return None
        wait_s = 30.0 + self.env.timeout + 2 * REPLY_GRACE_S + SESSION_SLACK_S
        return _reply(SessionStepReply, await self._call("step_reward", wait_s=wait_s)).result

    async def close(self) -> None:
        """Close the session on the service. Never raises: a service that cannot be reached
        ends the session itself (at its lifetime, or as it stops)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(DeepGymError):
            await self.engine._send("DELETE", self._path)

    def __repr__(self) -> str:
        return f"RemoteSession({self.sandbox_id!r}, env={self.env.name!r})"


def _reply(model: type[M], content: bytes) -> M:
    """``content`` as ``model``; a malformed reply is the service's failure."""
    try:
        return model.model_validate_json(content)
    except ValueError as exc:
        raise TransportError(f"malformed reply from the service: {exc}") from exc


def _json(content: bytes) -> Any:
    import json

    try:
        return json.loads(content)
    except ValueError as exc:
        raise TransportError(f"malformed reply from the service: {content[:200]!r}") from exc


def _check_group(ev: StreamEvent, groups: list[range] | None, seen: set[int]) -> int:
    """A group event that fits the batch: a known, new group with one result per member."""
    if groups is None or ev.group is None or not 0 <= ev.group < len(groups):
        raise TransportError(f"the service sent an unknown group {ev.group!r}")
    if ev.group in seen:
        raise TransportError(f"the service sent group {ev.group} twice")
    if len(ev.results or []) != len(groups[ev.group]):
        raise TransportError(f"the service sent group {ev.group} with the wrong number of results")
    return ev.group


def _complete(results: list[RunResult | None]) -> list[RunResult]:
    out = [r for r in results if r is not None]
    if len(out) != len(results):  # every group is yielded, so this cannot happen
        raise DeepGymError("a remote batch lost a result")
    return out
