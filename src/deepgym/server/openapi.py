"""The HTTP API's OpenAPI document, built from the protocol's models (``deepgym.protocol``).

The service's routes read their bodies themselves (one error shape for every malformed body),
so FastAPI cannot see them; this module describes the API from the same pydantic models the
routes parse with, and the service serves it at ``GET /openapi.json``. ``docs/openapi.json`` is
a copy (``python -m deepgym.server.openapi > docs/openapi.json``, with ``DOCS_VERSION``),
held to this module by a test, and ``request_body_tables`` renders the request bodies for the
docs.

Importing this module needs pydantic only (no FastAPI).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from deepgym.protocol import (
    BatchRequest,
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
)
from deepgym.server.fusion import (
    PromptByIdRequest,
    PromptsRequest,
    RunCodeRequest,
    SubmitRequest,
)

__all__ = ["DOCS_VERSION", "ROUTES", "openapi_schema", "request_body_tables"]

_REF = "#/components/schemas/{model}"
DOCS_VERSION = "see GET /openapi.json"
"""The version ``docs/openapi.json`` carries: the service serves its own."""
_NDJSON = "application/x-ndjson"

ROUTES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/v1/run"): {
        "summary": "Score one answer",
        "body": RunRequest,
        "reply": RunReply,
        "about": "The result, or the no-verdict exception `dg.run` raised (with its result).",
    },
    ("post", "/v1/run_batch"): {
        "summary": "Score many answers, streamed group by group",
        "body": BatchRequest,
        "stream": True,
    },
    ("post", "/v1/eval"): {
        "summary": "Score one answer per environment of a suite or a list",
        "body": EvalRequest,
        "stream": True,
    },
    ("post", "/v1/time_limit"): {
        "summary": "The time limit the service would use for an environment",
        "body": TimeLimitRequest,
        "reply_schema": {
            "type": "object",
            "properties": {"time_limit": {"type": "number"}},
            "required": ["time_limit"],
        },
    },
    ("post", "/v1/sessions"): {
        "summary": "Open an agent session of a session environment",
        "body": SessionOpenRequest,
        "reply": SessionOpenReply,
        "about": "The session's id, in the path of every other session route.",
    },
    ("post", "/v1/sessions/{sandbox_id}/exec"): {
        "summary": "Run a command in the session's persistent shell",
        "body": SessionExecRequest,
        "reply": SessionExecReply,
        "about": "What the command did.",
    },
    ("post", "/v1/sessions/{sandbox_id}/files/write"): {
        "summary": "Write a file under the session's work dir",
        "body": SessionWriteRequest,
        "reply_schema": {
            "type": "object",
            "properties": {"written": {"type": "boolean"}},
            "required": ["written"],
        },
    },
    ("post", "/v1/sessions/{sandbox_id}/files/read"): {
        "summary": "Read a file under the session's work dir",
        "body": SessionReadRequest,
        "reply_schema": {
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
        },
    },
    ("post", "/v1/sessions/{sandbox_id}/files/list"): {
        "summary": "The files under a folder of the session's work dir",
        "body": SessionListRequest,
        "reply_schema": {
            "type": "object",
            "properties": {"files": {"type": "array", "items": {"type": "string"}}},
            "required": ["files"],
        },
    },
    ("post", "/v1/sessions/{sandbox_id}/score"): {
        "summary": "End the agent's phase and run the final verifier over its work (no body)",
        "reply": SessionScoreReply,
        "about": "The result: a verdict, or plainly none where the session failed.",
    },
    ("post", "/v1/sessions/{sandbox_id}/step_reward"): {
        "summary": "Run the per-step verifier over the work dir as it is now (no body)",
        "reply": SessionStepReply,
        "about": "Its result (a shaping reward), or null where the environment has none.",
    },
    ("delete", "/v1/sessions/{sandbox_id}"): {
        "summary": "Close the session: end everything it started",
        "reply_schema": {
            "type": "object",
            "properties": {"closed": {"type": "boolean"}},
            "required": ["closed"],
        },
    },
    ("get", "/v1/environments"): {
        "summary": "The built-in environments and the suites",
        "reply_schema": {"type": "object"},
    },
    ("post", "/run_code"): {
        "summary": "SandboxFusion's run_code: run a program on a stdin (HTTP 504: no verdict)",
        "body": RunCodeRequest,
        "reply_schema": {"type": "object"},
        "about": "SandboxFusion's `RunCodeResponse`; where deepgym has no verdict, HTTP 504 "
        "with `status: SandboxError` (docs: Coming from SandboxFusion).",
    },
    ("post", "/submit"): {
        "summary": "SandboxFusion's submit: a completion's code against the tests it carries, "
        "or as a registered dataset's problem",
        "body": SubmitRequest,
        "reply_schema": {"type": "object"},
        "about": "SandboxFusion's `EvalResult`; HTTP 504 where deepgym has no verdict.",
    },
    ("get", "/list_datasets"): {
        "summary": "SandboxFusion's list_datasets: the suites served, by name",
        "reply_schema": {"type": "array", "items": {"type": "string"}},
    },
    ("post", "/list_ids"): {
        "summary": "SandboxFusion's list_ids: the ids of a dataset's problems",
        "body": PromptsRequest,
        "reply_schema": {"type": "array", "items": {"type": "string"}},
    },
    ("post", "/get_prompts"): {
        "summary": "SandboxFusion's get_prompts: a dataset's problems as prompts",
        "body": PromptsRequest,
        "reply_schema": {"type": "array", "items": {"type": "object"}},
        "about": "SandboxFusion's `Prompt`s: `id`, `prompt` and `labels`.",
    },
    ("post", "/get_prompt_by_id"): {
        "summary": "SandboxFusion's get_prompt_by_id: one problem of a dataset as a prompt",
        "body": PromptByIdRequest,
        "reply_schema": {"type": "object"},
        "about": "SandboxFusion's `Prompt`: `id`, `prompt` and `labels`.",
    },
    ("get", "/v1/ping"): {
        "summary": "SandboxFusion's ping: `pong`",
        "reply_schema": {"type": "string"},
    },
    ("post", "/seed_session"): {
        "summary": "NeMo Gym's seed_session: check that a row names an environment served here",
        "reply_schema": {"type": "object"},
        "about": "`{}`. The body is a NeMo Gym row: `responses_create_params` and "
        "`verifier_metadata.env` (docs: Coming from NeMo Gym).",
    },
    ("post", "/verify"): {
        "summary": "NeMo Gym's verify: score a row's response (HTTP 504: no verdict)",
        "reply_schema": {"type": "object"},
        "about": "The request with `reward`, `passed`, `extracted_model_code` and `deepgym`; "
        "where deepgym has no verdict, HTTP 504 with the cause.",
    },
    ("post", "/aggregate_metrics"): {
        "summary": "NeMo Gym's aggregate_metrics over verify responses",
        "reply_schema": {"type": "object"},
        "about": "NeMo Gym's `AggregateMetrics`: per task and overall statistics of `reward` "
        "and `passed`.",
    },
    ("get", "/health"): {
        "summary": "`ok`, or 503 while the service drains at shutdown (no token needed)",
        "reply_schema": {"type": "object"},
        "public": True,
    },
    ("get", "/metrics"): {"summary": "Prometheus metrics", "text": True},
    ("get", "/openapi.json"): {
        "summary": "This document (no token needed)",
        "reply_schema": {"type": "object"},
        "public": True,
    },
}
"""Every route of the API: what it takes and what it answers."""

_ERROR = {
    "description": "An error: its code and a one-line message.",
    "content": {"application/json": {"schema": {"$ref": _REF.format(model="ErrorReply")}}},
}
_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}


_SANDBOX_ID = {
    "name": "sandbox_id",
    "in": "path",
    "required": True,
    "description": "The session's id, as `POST /v1/sessions` answered it.",
    "schema": {"type": "string"},
}


def _models() -> list[type[BaseModel]]:
    models: list[type[BaseModel]] = [StreamEvent]
    for route in ROUTES.values():
        for key in ("body", "reply"):
            if key in route:
                models.append(route[key])
    return models


def _operation(route: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": route["summary"]}
    body = route.get("body")
    if body is not None:
        # cleandoc: Python 3.13 strips a docstring's indentation itself, 3.11 keeps it
        op["description"] = inspect.cleandoc((body.__doc__ or "").split(":", 1)[-1].strip())
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _REF.format(model=body.__name__)}}},
        }
    if route.get("stream"):
        ok = {
            "description": "NDJSON: one `StreamEvent` a line, `start` first and `end` last.",
            "content": {_NDJSON: {"schema": {"$ref": _REF.format(model="StreamEvent")}}},
        }
    elif route.get("text"):
        ok = {
            "description": "The metrics",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    else:
        reply = route.get("reply")
        schema = (
            {"$ref": _REF.format(model=reply.__name__)} if reply else route.get("reply_schema", {})
        )
        ok = {
            "description": route.get("about", "OK"),
            "content": {"application/json": {"schema": schema}},
        }
    op["responses"] = {"200": ok, "default": _ERROR}
    if not route.get("public"):
        op["security"] = [{"bearer": []}]
    return op


def openapi_schema(version: str) -> dict[str, Any]:
    """The API's OpenAPI 3.1 document (``version``: the service's)."""
    _, defs = models_json_schema([(m, "validation") for m in _models()], ref_template=_REF)
    schemas = dict(sorted({**defs.get("$defs", {}), "ErrorReply": _ERROR_SCHEMA}.items()))
    paths: dict[str, dict[str, Any]] = {}
    for (method, path), route in ROUTES.items():
        op = _operation(route)
        if "{sandbox_id}" in path:
            op["parameters"] = [_SANDBOX_ID]
        paths.setdefault(path, {})[method] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "deepgym",
            "version": version,
            "description": "Verifiable rewards over HTTP: `deepgym serve`. Every route but "
            "`/health` and `/openapi.json` takes `Authorization: Bearer <token>` when the "
            "service was started with `--token`.",
        },
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"object of {_type(extra)}" if isinstance(extra, dict) else "object"
    return {"string": "string", "integer": "int", "number": "number", "null": "null"}.get(
        kind, str(kind)
    )


def request_body_tables(version: str = "") -> str:
    """Markdown: each route that takes a body, and a table of that body's fields."""
    schema = openapi_schema(version)
    schemas = schema["components"]["schemas"]
    out: list[str] = []
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            ref = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            name = ref.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            if not name:
                continue
            body = schemas[name]
            required = set(body.get("required", []))
            out += [
                f"### `{method.upper()} {path}`",
                "",
                f"{op['summary']}. Body: `{name}`.",
                "",
                "| Field | Type | Default | Meaning |",
                "|---|---|---|---|",
            ]
            for field, prop in body["properties"].items():
                if field in required:
                    default = "required"
                else:
                    default = json.dumps(prop["default"]) if "default" in prop else "empty"
                meaning = " ".join(prop.get("description", "").split()).replace("|", "\\|")
                out.append(f"| `{field}` | {_type(prop)} | {default} | {meaning} |")
            out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(json.dumps(openapi_schema(DOCS_VERSION), indent=2))
