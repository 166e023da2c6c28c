"""``create_app``: the FastAPI app behind ``deepgym serve`` (API, metrics, console).

Routes: ``POST /v1/run``, ``/v1/run_batch`` and ``/v1/eval`` (NDJSON streamed by group),
SandboxFusion's ``POST /run_code`` and ``/submit`` and ``GET /v1/ping`` (``server.fusion``; also
under ``/runtime/<name>/``, their Python answers in that runtime),
NeMo Gym's ``POST /seed_session``, ``/verify`` and ``/aggregate_metrics`` (``server.nemo_gym``),
``/v1/time_limit``; agent sessions under ``/v1/sessions`` (open, exec, files, score, ``DELETE``
to close); ``GET /v1/environments``, ``/health``, ``/metrics`` (Prometheus) and ``/console``
(when a console token is given). The wire format is ``deepgym.protocol``.

Every request passes ``_Guard`` first: the bearer token (for ``/v1``, ``/metrics`` and a mounted
OpenRLHF route, when the service has one), the body size limit (the body is read, bounded, before
any route sees it), 503 while draining, admission by size (``deepgym.server.admission``: the
bytes of the bodies in flight under a bound, the excess refused with 503 and ``Retry-After``
before its body is read, where it declares its length), and the request counter. Errors are
one JSON shape (``protocol.error_body``), their status and code from ``protocol.ERRORS``, the
table ``protocol.error_for`` maps back on the client.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from deepgym import __version__
from deepgym.engines.base import Engine
from deepgym.envs.registry import list_environments, list_suites, load_environment, load_suite
from deepgym.exceptions import ConfigError, DeepGymError
from deepgym.protocol import (
    BatchRequest,
    ErrorCode,
    EvalRequest,
    RunRequest,
    SessionExecRequest,
    SessionListRequest,
    SessionOpenReply,
    SessionOpenRequest,
    SessionReadRequest,
    SessionScoreReply,
    SessionStepReply,
    SessionWriteRequest,
    TimeLimitRequest,
    error_body,
    error_status,
)
from deepgym.runtimes import DEFAULT as DEFAULT_RUNTIME
from deepgym.runtimes import runtime as check_runtime
from deepgym.sandbox.base import Backend
from deepgym.sandbox.workspace import sweep_stale
from deepgym.scheduling import TimeLimitPolicy
from deepgym.server.admission import RETRY_AFTER_S
from deepgym.server.fusion import GUARDED as FUSION_GUARDED
from deepgym.server.fusion import ROUTES as FUSION_ROUTES
from deepgym.server.fusion import add_fusion
from deepgym.server.inputs import MESSAGE_CHARS, RUNTIME_KEY, Limits, check_time_limit
from deepgym.server.metrics import CONTENT_TYPE
from deepgym.server.nemo_gym import ROUTES as NEMO_GYM_PATHS
from deepgym.server.nemo_gym import add_nemo_gym
from deepgym.server.openapi import openapi_schema
from deepgym.server.service import Service, eval_plan
from deepgym.session import AsyncSession
from deepgym.store import RunStore
from deepgym.text import one_line

__all__ = ["create_app"]

M = TypeVar("M", bound=BaseModel)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ROUTES = (
    "/health",
    "/metrics",
    "/openapi.json",
    "/v1/environments",
    "/v1/eval",
    "/v1/run",
    "/v1/run_batch",
    "/v1/sessions",
    "/v1/sessions/{sandbox_id}",
    "/v1/sessions/{sandbox_id}/exec",
    "/v1/sessions/{sandbox_id}/files/list",
    "/v1/sessions/{sandbox_id}/files/read",
    "/v1/sessions/{sandbox_id}/files/write",
    "/v1/sessions/{sandbox_id}/score",
    "/v1/sessions/{sandbox_id}/step_reward",
    "/v1/time_limit",
    *FUSION_ROUTES,
    *NEMO_GYM_PATHS,
)
_SESSION_PREFIX = "/v1/sessions/"
OPENRLHF_PREFIX = "/openrlhf"
FUSION_PATHS = FUSION_GUARDED
TOKEN_PREFIX = "/t/"
"""``/t/<token>/run_code``, ``/t/<token>/submit``, ``/t/<token>/v1/ping`` (and the dataset
routes): the SandboxFusion routes with the token in the path, so that one base URL serves them
all (the ``sandbox-fusion`` client's ``set_endpoint`` appends each route's path to the one URL
it is given)."""
_TOKEN_KEY = "deepgym.path_token"


RUNTIME_PREFIX = "/runtime/"
"""``/runtime/<name>/run_code`` (and ``/submit``, ``/v1/ping``; after ``/t/<token>`` where the
token is in the path): a SandboxFusion route whose Python answers run in runtime ``<name>``
(``deepgym.runtimes``), the one thing of a request's that verl and the ``sandbox-fusion``
client let a user choose (the URL) and SandboxFusion's body has no field for. Without it, the
service's ``runtime`` (``deepgym serve --runtime``)."""


def _fusion_route(path: str) -> bool:
    """Whether ``path`` is a SandboxFusion route, under a runtime's prefix or not."""
    if path.startswith(RUNTIME_PREFIX):
        path = "/" + path[len(RUNTIME_PREFIX) :].partition("/")[2]
    return path in (*FUSION_PATHS, "/v1/ping")


def _take_path_token(scope: Scope) -> None:
    """``/t/<token>/<route>`` of a SandboxFusion route: the token set aside (where
    ``_authorized`` reads it) and the path made the route's own."""
    token, sep, rest = scope["path"][len(TOKEN_PREFIX) :].partition("/")
    route = "/" + rest
    if not (token and sep and _fusion_route(route)):
        return
    scope[_TOKEN_KEY] = token
    scope["path"] = route
    scope["raw_path"] = route.encode()


def _take_path_runtime(scope: Scope) -> None:
    """``/runtime/<name>/<route>`` of a SandboxFusion route: the runtime set aside (where the
    routes read it: ``inputs.RUNTIME_KEY``) and the path made the route's own."""
    name, sep, rest = scope["path"][len(RUNTIME_PREFIX) :].partition("/")
    route = "/" + rest
    if not (name and sep and route in (*FUSION_PATHS, "/v1/ping")):
        return
    scope[RUNTIME_KEY] = name
    scope["path"] = route
    scope["raw_path"] = route.encode()


"""SandboxFusion's routes (``deepgym.server.fusion``): guarded as ``/v1`` is."""


def _json_error(status: int, code: ErrorCode, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers or None)


def error_response(exc: DeepGymError) -> JSONResponse:
    """One exception, one status and error code (``protocol.ERRORS``: the client maps them
    back to the same class)."""
    message = one_line(str(exc), MESSAGE_CHARS)
    status, code = error_status(exc)
    if code == "internal":
        message = f"{type(exc).__name__}: {message}"
    return _json_error(status, code, message)


def _route_label(path: str) -> str:
    """The route a request counts under: its template (a session's id is not a label)."""
    if path in ROUTES:
        return path
    if path.startswith("/console"):
        return "/console"
    if path.startswith(_SESSION_PREFIX):
        sid, _, tail = path[len(_SESSION_PREFIX) :].partition("/")
        template = _SESSION_PREFIX + "{sandbox_id}" + (f"/{tail}" if tail else "")
        if sid and template in ROUTES:
            return template
    return "other"


class _Guard:
    """Token, body limit, drain and request counting, before any route (pure ASGI)."""

    def __init__(
        self, app: ASGIApp, *, service: Service, token: str | None, runtime: str = DEFAULT_RUNTIME
    ) -> None:
        self.app = app
        self.service = service
        self.token = token
        self.runtime = runtime
        """The runtime of SandboxFusion's routes where the URL names none."""

    def _authorized(self, scope: Scope) -> bool:
        """The bearer token; on the OpenRLHF and SandboxFusion routes also ``?token=`` (OpenRLHF
        and verl send no such header, only the URL they were given)."""
        if self.token is None:
            return True
        want = self.token.encode()
        for key, value in scope.get("headers", []):
            if key == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                return scheme.lower() == "bearer" and secrets.compare_digest(
                    given.strip().encode(), want
                )
        path = scope["path"]
        if path.startswith(OPENRLHF_PREFIX + "/") or path in (*FUSION_PATHS, "/v1/ping"):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given_q = scope.get(_TOKEN_KEY) or query.get("token", [""])[0]
            return bool(given_q) and secrets.compare_digest(given_q.encode(), want)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"].startswith(TOKEN_PREFIX):
            _take_path_token(scope)
        if scope["path"].startswith(RUNTIME_PREFIX):
            _take_path_runtime(scope)
        scope.setdefault(RUNTIME_KEY, self.runtime)
        path: str = scope["path"]
        route = _route_label(path)
        metrics = self.service.metrics

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                metrics.request(route, int(message["status"]))
            await send(message)

        api = path.startswith(("/v1/", OPENRLHF_PREFIX)) or path in (*FUSION_PATHS, *NEMO_GYM_PATHS)
        protected = api or path == "/metrics"
        refusal: Response | None = None
        if protected and not self._authorized(scope):
            refusal = _json_error(
                401,
                "unauthorized",
                "a valid bearer token is required",
                **{"WWW-Authenticate": "Bearer"},
            )
        elif api and self.service.draining:
            refusal = _json_error(503, "shutting_down", "the service is shutting down")
        admitted = 0
        declared = _content_length(scope)
        if refusal is None and declared is not None and declared > self._max_body:
            refusal = self._too_large()
        if refusal is None and declared is not None and api:
            refusal = self._admit(declared)  # before the body is read: nothing of it is held
            admitted = 0 if refusal is not None else declared
        if refusal is not None:
            await refusal(scope, receive, counted)
            return
        try:
            body = await self._read_body(scope, receive)
            if body is None:
                refusal = self._too_large()
            elif declared is None and api:
                refusal = self._admit(len(body))  # no length declared: admitted once read
                admitted = 0 if refusal is not None else len(body)
            if refusal is not None:
                await refusal(scope, receive, counted)
                return
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, counted)
        finally:  # the response is sent (a stream to its end), or the request failed
            self.service.admission.release(admitted)

    @property
    def _max_body(self) -> int:
        return self.service.limits.max_body_bytes

    def _too_large(self) -> Response:
        return _json_error(413, "too_large", f"the request body is over {self._max_body} bytes")

    def _admit(self, size: int) -> Response | None:
        """Admit a body of ``size`` bytes (held until the response is sent), or the refusal."""
        admission = self.service.admission
        verdict = admission.admit(size)
        if verdict == "admit":
            return None
        limit = admission.limit
        if verdict == "too_large":
            return _json_error(
                413,
                "too_large",
                f"the request body ({size} bytes) is over the {limit} bytes of requests this "
                "service holds at once (deepgym serve --max-inflight-mb)",
            )
        return _json_error(
            503,
            "overloaded",
            f"the service holds {admission.held} bytes of requests, and admits {limit} at once: "
            f"send this one ({size} bytes) again later",
            **{"Retry-After": str(RETRY_AFTER_S)},
        )

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None when it is over the limit (checked as it arrives)."""
        limit = self.service.limits.max_body_bytes
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _content_length(scope: Scope) -> int | None:
    """The body's length as the request declares it (None: not declared, or not a number)."""
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class _NDJSONResponse(StreamingResponse):
    """A stream whose generator is closed however the response ends (a client that leaves
    cancels its runs at once)."""

    media_type = "application/x-ndjson"

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


async def _parse(request: Request, model: type[M]) -> M:
    raw = await request.body()
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise ConfigError(f"malformed request body: {one_line(str(exc), MESSAGE_CHARS)}") from exc


def _too_many(n: int, limits: Limits) -> JSONResponse | None:
    if n <= limits.max_answers:
        return None
    return _json_error(
        413, "too_many_answers", f"{n} answers in one request: the limit is {limits.max_answers}"
    )


def _add_api(app: FastAPI, service: Service) -> None:
    @app.get("/v1/environments")
    async def environments() -> dict[str, Any]:
        envs = [load_environment(n) for n in list_environments()]
        return {
            "environments": [e.catalog_entry() for e in envs],
            "suites": list_suites(),
        }

    @app.post("/v1/time_limit")
    async def time_limit(request: Request) -> dict[str, float]:
        body = await _parse(request, TimeLimitRequest)
        env = service.env(body.env)
        limit = check_time_limit(body.time_limit, service.limits)
        return {"time_limit": await service.time_limit(env, limit)}

    @app.post("/v1/run")
    async def run(request: Request) -> Response:
        body = await _parse(request, RunRequest)
        env = service.env(body.env)
        limit = check_time_limit(body.time_limit, service.limits)
        reply = await service.run_one(env, body.answer, limit)
        return Response(reply.model_dump_json(), media_type="application/json")

    @app.post("/v1/run_batch")
    async def run_batch(request: Request) -> Response:
        body = await _parse(request, BatchRequest)
        too_many = _too_many(len(body.answers), service.limits)
        if too_many is not None:
            return too_many
        plan = service.check_batch(
            body.env, body.answers, body.group_size, body.max_parallel, body.time_limit
        )
        return _NDJSONResponse(service.open_stream(plan))

    @app.post("/v1/eval")
    async def eval_(request: Request) -> Response:
        body = await _parse(request, EvalRequest)
        if (body.suite is None) == (body.envs is None):
            raise ConfigError("give suite or envs, not both or neither")
        if body.envs is not None:
            too_many = _too_many(len(body.envs), service.limits)
            if too_many is not None:
                return too_many
            envs = [service.env(s, where=f"envs[{i}]") for i, s in enumerate(body.envs)]
            source = ",".join(e.name for e in envs)
        else:
            assert body.suite is not None
            envs = load_suite(body.suite)
            source = body.suite
        too_many = _too_many(len(envs), service.limits)
        if too_many is not None:
            return too_many
        plan = eval_plan(
            service,
            envs,
            body.outputs,
            source,
            body.max_parallel,
            body.time_limit,
            with_names=body.suite is not None,
        )
        return _NDJSONResponse(service.open_stream(plan))

    _add_sessions(app, service)


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(), media_type="application/json")


def _add_sessions(app: FastAPI, service: Service) -> None:
    """Agent sessions over HTTP: each route is one call of ``deepgym.session.AsyncSession`` on
    the service's client, the session found by its ``sandbox_id``."""

    @app.post("/v1/sessions")
    async def open_session(request: Request) -> Response:
        body = await _parse(request, SessionOpenRequest)
        env = service.env(body.env)
        return _json(SessionOpenReply(sandbox_id=await service.open_session(env)))

    @app.post("/v1/sessions/{sandbox_id}/exec")
    async def session_exec(sandbox_id: str, request: Request) -> Response:
        body = await _parse(request, SessionExecRequest)
        timeout = check_time_limit(body.timeout, service.limits, "timeout")
        done = await service.in_session(sandbox_id, lambda s: s.exec(body.command, timeout))
        return _json(done)

    @app.post("/v1/sessions/{sandbox_id}/files/write")
    async def session_write(sandbox_id: str, request: Request) -> dict[str, bool]:
        body = await _parse(request, SessionWriteRequest)
        try:
            data = base64.b64decode(body.content_b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConfigError(f"content_b64 is not base64: {exc}") from exc
        await service.in_session(sandbox_id, lambda s: s.write_file(body.path, data))
        return {"written": True}

    @app.post("/v1/sessions/{sandbox_id}/files/read")
    async def session_read(sandbox_id: str, request: Request) -> dict[str, str]:
        body = await _parse(request, SessionReadRequest)
        return {"content": await service.in_session(sandbox_id, lambda s: s.read_file(body.path))}

    @app.post("/v1/sessions/{sandbox_id}/files/list")
    async def session_list(sandbox_id: str, request: Request) -> dict[str, list[str]]:
        body = await _parse(request, SessionListRequest)
        return {"files": await service.in_session(sandbox_id, lambda s: s.list_files(body.path))}

    @app.post("/v1/sessions/{sandbox_id}/score")
    async def session_score(sandbox_id: str) -> Response:
        async def score(s: AsyncSession) -> SessionScoreReply:
            result = await s.score()
            return SessionScoreReply(result=result, diff=str(getattr(s, "diff", "") or ""))

        return _json(await service.in_session(sandbox_id, score))

    @app.post("/v1/sessions/{sandbox_id}/step_reward")
    async def session_step_reward(sandbox_id: str) -> Response:
        async def step(s: AsyncSession) -> SessionStepReply:
            return SessionStepReply(result=await s.step_reward())

        return _json(await service.in_session(sandbox_id, step))

    @app.delete("/v1/sessions/{sandbox_id}")
    async def session_close(sandbox_id: str) -> dict[str, bool]:
        await service.close_session(sandbox_id)
        return {"closed": True}


def _mount_openrlhf(app: FastAPI, service: Service) -> None:
    """Mount OpenRLHF's reward endpoint (``deepgym.integrations.openrlhf.create_app``) under
    ``/openrlhf``: ``--remote_rm_url http://HOST:PORT/openrlhf/get_reward[?token=...]``. It runs
    its answers on this service's client (the same sandboxes, concurrency cap and queue gauges)."""
    try:
        openrlhf = importlib.import_module("deepgym.integrations.openrlhf")
    except ImportError as exc:
        raise ConfigError(
            f"--openrlhf: deepgym.integrations.openrlhf is not available ({exc})"
        ) from exc
    factory = getattr(openrlhf, "create_app", None)
    if factory is None:
        raise ConfigError("--openrlhf: deepgym.integrations.openrlhf has no create_app")
    # A label names an environment as a client names one on /v1: never a path on this host,
    # never verifier code unless allowed (--allow-verifier-code).
    app.mount(OPENRLHF_PREFIX, factory(service.client, load_env=service.env))


def create_app(
    backend: Backend | None = None,
    *,
    time_limits: TimeLimitPolicy | None = None,
    store: RunStore | None = None,
    token: str | None = None,
    console_token: str | None = None,
    allow_verifier_code: bool = False,
    limits: Limits | None = None,
    concurrency: int | None = None,
    api: bool = True,
    openrlhf: bool = False,
    close_backend: bool | None = None,
    engine: Engine | None = None,
    runtime: str = DEFAULT_RUNTIME,
) -> FastAPI:
    """The service's app.

    ``backend``: the sandbox backend that runs answers (``deepgym.sandbox.make_backend``; None:
    a pool made at the first run, which the app closes at shutdown). ``time_limits``: how an
    environment's time limit is derived from its reference. ``store``: where evals and batches
    are recorded (the caller closes it). ``token``: the bearer token the API requires (None:
    none; only for a service bound to loopback). ``console_token``: serve ``/console`` behind
    this per-launch token. ``concurrency``: runs at once across all requests. ``api=False``
    serves the console, health and metrics only. ``close_backend``: close the backend at
    shutdown (default: only the one the app made). ``engine``: the engine that runs answers
    instead of a backend on this host (a ``RayEngine``; closed with the app). ``runtime``:
    the runtime of SandboxFusion's routes' Python answers (``deepgym.runtimes``), where the URL
    names none (``RUNTIME_PREFIX``).
    """
    check_runtime(runtime)
    owned = (backend is None or engine is not None) if close_backend is None else close_backend
    service = Service(
        backend,
        time_limits=time_limits,
        store=store,
        allow_verifier_code=allow_verifier_code,
        limits=limits,
        concurrency=concurrency,
        engine=engine,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # The folders a service or eval killed with SIGKILL left behind (never a live one's).
        await asyncio.to_thread(sweep_stale)
        yield
        await service.close_sessions()  # the service's own, whoever owns the backend
        if owned:
            await service.close()

    app = FastAPI(
        title="deepgym",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.state.service = service

    @app.exception_handler(DeepGymError)
    async def deepgym_error(_: Request, exc: DeepGymError) -> JSONResponse:
        return error_response(exc)

    @app.get("/health")
    async def health() -> JSONResponse:
        status = "draining" if service.draining else "ok"
        body = {"status": status, "version": __version__, "requests": service.in_flight_requests}
        return JSONResponse(body, status_code=503 if service.draining else 200)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    if api:
        _add_api(app, service)
        add_fusion(app, service)
        add_nemo_gym(app, service)

        @app.get("/openapi.json")
        async def openapi() -> JSONResponse:
            return JSONResponse(openapi_schema(__version__))

    if console_token is not None:
        from deepgym.server.console import add_console

        add_console(app, store, console_token)
    if openrlhf:
        _mount_openrlhf(app, service)
    app.add_middleware(_Guard, service=service, token=token, runtime=runtime)
    return app
