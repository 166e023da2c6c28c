"""NeMo Gym's resources-server routes on ``deepgym serve``: ``POST /seed_session``, ``/verify``
and ``/aggregate_metrics``, so that a NeMo Gym config points its resources server at deepgym by
host and port.

The shapes are those of NeMo Gym's ``SimpleResourcesServer`` (as its ``simple_agent`` calls them):

- A dataset row is ``{"responses_create_params": {...}, "verifier_metadata": {"env": NAME}}``
  (``rows`` writes them; a top-level ``env`` also works). The environment is named as a client
  names one on ``/v1`` (the service's rules: no path on this host, verifier code only with
  ``--allow-verifier-code``).
- ``/seed_session`` gets the row and checks that it names an environment this service runs (a
  400 or 404 before any model call); it keeps no state and returns ``{}``.
- ``/verify`` gets the row plus ``response`` (the Responses API object the agent produced). The
  answer is the text of its assistant messages' ``output_text`` parts, then its last fenced code
  block, as everywhere in deepgym. The reply is the request with ``reward`` (the run's score),
  ``passed``, ``extracted_model_code`` and ``deepgym`` (environment, error type).
- Where deepgym has no verdict, ``/verify`` answers **HTTP 504** with the cause
  (``error.code: "sandbox_error"``), never a reward: NeMo Gym's agent raises on it, so the
  rollout fails rather than train on an outage as a 0.
- ``/aggregate_metrics`` gets ``{"verify_responses": [...]}`` and answers NeMo Gym's
  ``AggregateMetrics``: per task (``_ng_task_index``) and overall, ``mean``, ``max``, ``min``,
  ``median`` and ``std`` (sample) of ``reward`` and ``passed``, with ``mean/reward`` and
  ``mean/passed`` as the key metrics.

NeMo Gym's server client sends no credentials: on a service with a token these routes need it
(``Authorization: Bearer``) as ``/v1`` does, so run ``deepgym serve`` on the NeMo Gym node's
loopback, where it needs none. NeMo Gym itself is never imported here.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from deepgym.completions import answer_of
from deepgym.exceptions import ConfigError
from deepgym.models import Environment, RunResult
from deepgym.protocol import error_body
from deepgym.server.inputs import MESSAGE_CHARS
from deepgym.server.service import Service
from deepgym.text import one_line

__all__ = [
    "ROUTES",
    "TASK_INDEX_KEY",
    "add_nemo_gym",
    "aggregate_metrics",
    "env_spec",
    "output_text",
    "rows",
    "verify_reply",
]

ROUTES = ("/seed_session", "/verify", "/aggregate_metrics")
TASK_INDEX_KEY = "_ng_task_index"
"""NeMo Gym's key for the task a verify response belongs to."""
_STATS = ("mean", "max", "min", "median", "std")
_FIELDS = ("reward", "passed")


def env_spec(row: Mapping[str, Any]) -> Any:
    """The environment a row names: ``verifier_metadata.env``, else ``env``; ``ConfigError``."""
    meta = row.get("verifier_metadata")
    if isinstance(meta, str):  # some datasets keep it as JSON text
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = None
    spec = meta.get("env") if isinstance(meta, Mapping) else None
    if spec is None:
        spec = row.get("env")
    if not spec:
        raise ConfigError("the row names no environment: give verifier_metadata.env its name")
    return spec


def output_text(response: Any) -> str:
    """The text of a Responses API object's assistant messages (their ``output_text`` parts),
    as NeMo Gym's ``response.output_text`` reads it; ``ConfigError`` for another shape."""
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        raise ConfigError("response must be a Responses API object with an 'output' list")
    texts = []
    for item in response["output"]:
        if not isinstance(item, Mapping) or item.get("type") != "message":
            continue
        if item.get("role", "assistant") != "assistant":
            continue
        for part in item.get("content") or []:
            if isinstance(part, Mapping) and part.get("type") == "output_text":
                texts.append(str(part.get("text") or ""))
    return "".join(texts)


def verify_reply(
    body: Mapping[str, Any], env: Environment, code: str, result: RunResult
) -> tuple[int, dict[str, Any]]:
    """``/verify``'s status and body: 504 without a verdict, else the request with the reward."""
    facts = {"env": env.name, "error_type": result.error_type, "has_verdict": result.has_verdict}
    if not result.has_verdict:
        cause = one_line(result.error or "no verdict", MESSAGE_CHARS)
        message = (
            f"deepgym has no verdict for this answer ({result.error_type}): {cause}; "
            "retry it (a failure of the sandbox, not of the answer)"
        )
        return 504, {**error_body("sandbox_error", message), "deepgym": facts}
    return 200, {
        **body,
        "reward": float(result.score),
        "passed": bool(result.passed),
        "extracted_model_code": code,
        "deepgym": facts,
    }


def _stats(values: Sequence[float]) -> dict[str, float]:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "mean": statistics.fmean(values),
        "max": max(values),
        "min": min(values),
        "median": statistics.median(values),
        "std": std,
    }


def _numbers(responses: Iterable[Mapping[str, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {field: [] for field in _FIELDS}
    for r in responses:
        for field in _FIELDS:
            value = r.get(field)
            if isinstance(value, bool | int | float):
                out[field].append(float(value))
    return out


def _flat(numbers: Mapping[str, list[float]]) -> dict[str, float]:
    flat: dict[str, float] = {}
    per_field = {f: _stats(v) for f, v in numbers.items() if v}
    for stat in _STATS:
        for field, stats in per_field.items():
            flat[f"{stat}/{field}"] = stats[stat]
    return flat


def aggregate_metrics(verify_responses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """NeMo Gym's ``AggregateMetrics`` for ``verify_responses`` (see the module docstring)."""
    if not verify_responses:
        return {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {}}
    tasks: dict[int, list[Mapping[str, Any]]] = {}
    for r in verify_responses:
        index = r.get(TASK_INDEX_KEY, 0)
        tasks.setdefault(index if isinstance(index, int) else 0, []).append(r)
    groups = [
        {TASK_INDEX_KEY: index, **_flat(_numbers(rs)), "num_rollouts": len(rs)}
        for index, rs in sorted(tasks.items())
    ]
    agent = _flat(_numbers(verify_responses))
    key = {k: agent[k] for k in ("mean/reward", "mean/passed") if k in agent}
    return {"group_level_metrics": groups, "agent_metrics": agent, "key_metrics": key}


def rows(envs: Iterable[Environment]) -> list[dict[str, Any]]:
    """NeMo Gym dataset rows (JSONL lines) for ``envs``: the task as the user's input, the
    environment's name in ``verifier_metadata``."""
    return [
        {
            "responses_create_params": {"input": [{"role": "user", "content": env.task}]},
            "verifier_metadata": {"env": env.name},
        }
        for env in envs
    ]


async def _object(request: Request, what: str) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise ConfigError(f"{what}: the body is not JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise ConfigError(f"{what}: the body must be a JSON object")
    return body


def add_nemo_gym(app: FastAPI, service: Service) -> None:
    """Add NeMo Gym's resources-server routes to ``app`` (``create_app`` does, with the API)."""

    def environment(body: Mapping[str, Any]) -> Environment:
        env = service.env(env_spec(body), where="verifier_metadata.env")
        if env.kind == "session":
            raise ConfigError(f"{env.name} is a session environment: use /v1/sessions")
        return env

    @app.post("/seed_session")
    async def seed_session(request: Request) -> JSONResponse:
        environment(await _object(request, "/seed_session"))
        return JSONResponse({})

    @app.post("/verify")
    async def verify(request: Request) -> JSONResponse:
        body = await _object(request, "/verify")
        env = environment(body)
        code = answer_of(output_text(body.get("response")))
        result = await service.score(env, code, None)
        status, reply = verify_reply(body, env, code, result)
        return JSONResponse(reply, status_code=status)

    @app.post("/aggregate_metrics")
    async def aggregate(request: Request) -> JSONResponse:
        body = await _object(request, "/aggregate_metrics")
        responses = body.get("verify_responses")
        if not isinstance(responses, list) or not all(isinstance(r, dict) for r in responses):
            raise ConfigError("verify_responses must be a list of verify responses")
        return JSONResponse(aggregate_metrics(responses))
