"""The service fuzzed from its own published schema: every operation of ``GET /openapi.json``,
with valid and invalid requests drawn from it (schemathesis), never a 5xx, never a hang.

The schema is the one the app serves, read from the app itself; requests go in process over ASGI
to the app over the fake backend (``tests.hostile.common.HostlikeBackend``), with the token, each
under ``DEADLINE_S`` (a streamed reply must end by then). Every response is checked with
schemathesis' own checks: no server error, and a status, content type and body the schema
declares. ``EXAMPLES`` cases per operation and generation mode keep the run bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from deepgym.server.app import create_app
from tests.hostile.common import DEADLINE_S, TRIED, HostlikeBackend
from tests.server.conftest import NO_DERIVED, TOKEN, asgi, call

EXAMPLES = 40
"""Cases drawn per operation and generation mode (valid, then invalid): a fixed number, so the
run is bounded (16 operations, 2 modes, ``EXAMPLES`` each: about 20 s)."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

_SERVED = call(
    create_app(HostlikeBackend(), time_limits=NO_DERIVED, token=TOKEN),
    "GET",
    "/openapi.json",
    token=None,
).json()
SCHEMA = schemathesis.openapi.from_dict(_SERVED)
OPERATIONS = {op.label: op for op in (r.ok() for r in SCHEMA.get_all_operations())}
MODES = [
    (label, mode)
    for label, op in sorted(OPERATIONS.items())
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    # an operation without a body or a parameter has nothing to make invalid
    if mode is GenerationMode.POSITIVE or op.body or list(op.iter_parameters())
]


@pytest.fixture(scope="module")
def app() -> Iterator[Any]:
    yield create_app(HostlikeBackend(), time_limits=NO_DERIVED, token=TOKEN)


def _send(app: Any, kwargs: dict[str, Any]) -> httpx.Response:
    """One generated request to ``app``; the whole reply, a stream included, by ``DEADLINE_S``."""

    async def go() -> httpx.Response:
        async with asgi(app) as c:
            response = await c.request(**kwargs)
            await response.aread()
            return response

    return asyncio.run(asyncio.wait_for(go(), DEADLINE_S))


def test_every_served_operation_is_fuzzed() -> None:
    served = {(m.upper(), p) for p, ops in _SERVED["paths"].items() for m in ops}
    assert {(op.method.upper(), op.path) for op in OPERATIONS.values()} == served
    assert len(OPERATIONS) >= 16


@pytest.mark.parametrize(("label", "mode"), MODES, ids=lambda v: str(getattr(v, "value", v)))
def test_no_request_the_schema_allows_or_refuses_is_a_5xx(
    app: Any, label: str, mode: GenerationMode
) -> None:
    op = OPERATIONS[label]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,  # each call is bounded by DEADLINE_S instead (a loaded machine is slow)
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(case=op.as_strategy(mode))
    def one(case: Any) -> None:
        TRIED["schema"] += 1
        kwargs = case.as_transport_kwargs()
        kwargs["headers"]["Authorization"] = f"Bearer {TOKEN}"  # past the token, to the routes
        assert not kwargs.pop("cookies", None)  # the schema declares none
        if isinstance(kwargs.get("data"), bytes | str):  # a raw body (a mutated payload)
            kwargs["content"] = kwargs.pop("data")
        response = _send(app, kwargs)
        case.validate_response(response, checks=CHECKS)

    one()
