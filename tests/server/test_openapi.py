"""The API's OpenAPI document: served, kept in the docs, and in step with the routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepgym import __version__
from deepgym.protocol import BatchRequest, EvalRequest, RunRequest, TimeLimitRequest
from deepgym.server.app import ROUTES as COUNTED_ROUTES
from deepgym.server.openapi import DOCS_VERSION, ROUTES, openapi_schema, request_body_tables
from tests.server.conftest import TOKEN, call, fake_app

DOCS = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_docs_copy_is_current() -> None:
    committed = json.loads(DOCS.read_text(encoding="utf-8"))
    assert committed == openapi_schema(DOCS_VERSION), (
        "docs/openapi.json is out of date: python -m deepgym.server.openapi > docs/openapi.json"
    )


def test_the_service_serves_it_without_a_token() -> None:
    app, _ = fake_app(token=TOKEN)
    r = call(app, "GET", "/openapi.json", token=None)
    assert r.status_code == 200
    assert r.json() == openapi_schema(__version__)


def test_every_route_of_the_app_is_described() -> None:
    app, _ = fake_app(token=TOKEN)
    served = {
        (method.lower(), route.path)
        for route in app.routes
        if route.path in COUNTED_ROUTES
        for method in getattr(route, "methods", ()) or ()
        if method != "HEAD"
    }
    assert served == set(ROUTES)


@pytest.mark.parametrize(
    ("model", "path"),
    [
        (RunRequest, "/v1/run"),
        (BatchRequest, "/v1/run_batch"),
        (EvalRequest, "/v1/eval"),
        (TimeLimitRequest, "/v1/time_limit"),
    ],
)
def test_each_body_is_its_model_with_every_field_explained(model: type, path: str) -> None:
    schema = openapi_schema(__version__)
    op = schema["paths"][path]["post"]
    ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(body["properties"]) == set(model.model_fields)  # type: ignore[attr-defined]
    assert body["additionalProperties"] is False
    assert all(p.get("description") for p in body["properties"].values())
    assert f"### `POST {path}`" in request_body_tables()
