"""Admission by size: the bytes of requests in flight stay under their bound, the excess is
refused with 503 ``overloaded`` and ``Retry-After``, and the service goes on serving."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from deepgym.exceptions import ConfigError, TransportError
from deepgym.protocol import error_for
from deepgym.sandbox import cgroups
from deepgym.server import admission
from deepgym.server.admission import RETRY_AFTER_S, InFlightBytes
from deepgym.server.inputs import Limits
from tests.server.conftest import asgi, call, fake_app

sizes = st.integers(min_value=0, max_value=2**40)


@given(held=sizes, size=sizes, limit=st.integers(min_value=1, max_value=2**40))
def test_admission_never_holds_past_the_bound_and_always_makes_progress(
    held: int, size: int, limit: int
) -> None:
    verdict = admission.admission(held, size, limit)
    assert (verdict == "too_large") is (size > limit)  # it never fits: 413, not a retry
    if verdict == "admit":
        assert held + size <= limit
    if held == 0 and size <= limit:
        assert verdict == "admit"  # alone, anything that fits is admitted


def test_the_bound_is_derived_at_first_use_and_read_again() -> None:
    now = [0.0]
    reads: list[int | None] = [100, None]
    bytes_ = InFlightBytes(derive=lambda: reads.pop(0), clock=lambda: now[0])
    assert reads == [100, None]  # nothing read before the first request
    assert bytes_.admit(60) == "admit" and bytes_.held == 60
    assert bytes_.admit(50) == "busy" and bytes_.held == 60
    assert bytes_.admit(101) == "too_large"
    now[0] += admission.REREAD_S  # read again: no bound now (the memory is unknown)
    assert bytes_.admit(10**12) == "admit" and reads == []
    bytes_.release(10**12)
    bytes_.release(60)
    bytes_.release(1)
    assert bytes_.held == 0  # never below nothing


def test_a_given_bound_is_never_derived() -> None:
    def never() -> int:
        raise AssertionError("derived")

    bytes_ = InFlightBytes(10, derive=never)
    assert bytes_.limit == 10 and bytes_.admit(10) == "admit" and bytes_.admit(1) == "busy"


def _memory_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cgroup: str) -> Path:
    root = tmp_path / "cgroup"
    (tmp_path / "self-cgroup").write_text(cgroup)
    (tmp_path / "meminfo").write_text("MemTotal:       2048 kB\nMemFree:        1024 kB\n")
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(cgroups, "PROC_CGROUP", str(tmp_path / "self-cgroup"))
    monkeypatch.setattr(cgroups, "MEMINFO", str(tmp_path / "meminfo"))
    return root


def test_the_memory_is_the_tightest_limit_of_the_cgroup_and_its_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _memory_files(tmp_path, monkeypatch, "4:memory:/svc/one\n0::/\n")
    own = root / "memory" / "svc" / "one"
    own.mkdir(parents=True)
    (own / "memory.limit_in_bytes").write_text(f"{2**63 - 4096}\n")  # unlimited, as v1 says it
    (own.parent / "memory.limit_in_bytes").write_text(f"{256 << 20}\n")  # the parent's bound
    (root / "memory" / "memory.limit_in_bytes").write_text(f"{2**63 - 4096}\n")
    assert cgroups.service_memory_bytes() == 256 << 20
    assert admission.default_limit() == int((256 << 20) * admission.MEMORY_FRACTION)


def test_a_v2_limit_counts_and_max_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _memory_files(tmp_path, monkeypatch, "0::/svc\n")
    (root / "svc").mkdir(parents=True)
    (root / "svc" / "memory.max").write_text("max\n")
    assert cgroups.service_memory_bytes() == 2048 * 1024  # no limit: the machine's memory
    (root / "svc" / "memory.max").write_text(f"{64 << 20}\n")
    assert cgroups.service_memory_bytes() == 64 << 20


def test_no_cgroup_and_no_meminfo_is_no_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _memory_files(tmp_path, monkeypatch, "")
    (tmp_path / "meminfo").unlink()
    assert cgroups.service_memory_bytes() is None and admission.default_limit() is None
    assert InFlightBytes().admit(2**40) == "admit"


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_the_bound_is_checked(value: Any) -> None:
    with pytest.raises(ConfigError, match="max_inflight_bytes"):
        Limits(max_inflight_bytes=value)


BATCH = {"env": "two_sum", "answers": ["sleep:0.5", "sleep:0.5"]}


def _size(body: dict[str, Any]) -> int:
    request = httpx.Request("POST", "http://x/", json=body)
    return len(request.content)


def test_the_excess_is_refused_with_retry_after_and_the_next_is_served() -> None:
    app, fake = fake_app(limits=Limits(max_inflight_bytes=_size(BATCH) + 10))
    service = app.state.service

    async def go() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with asgi(app) as c:
            first = asyncio.ensure_future(c.post("/v1/run_batch", json=BATCH))
            while service.admission.held == 0:  # the first is admitted and running
                await asyncio.sleep(0.01)
            second = await c.post("/v1/run_batch", json=BATCH)
            done = await first
            assert service.admission.held == 0  # released once its stream ended
            third = await c.post("/v1/run_batch", json=BATCH)
            return done, second, third

    done, refused, third = asyncio.run(go())
    assert done.status_code == 200 and third.status_code == 200
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert refused.json()["error"]["code"] == "overloaded"
    assert fake.calls["sleep:0.5"] == 4  # the refused batch ran nothing
    err = error_for(refused.status_code, refused.content)
    assert isinstance(err, TransportError) and err.status_code == 503  # ours: never a 0


def test_a_request_over_the_bound_alone_is_too_large_and_small_calls_go_on() -> None:
    app, fake = fake_app(limits=Limits(max_inflight_bytes=200))
    big = {"env": "two_sum", "answers": ["pass"] * 40}
    r = call(app, "POST", "/v1/run_batch", json=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    assert "--max-inflight-mb" in r.json()["error"]["message"]

    async def chunks() -> Any:  # no content-length: admitted once read
        yield b'{"env": "two_sum", '
        yield b'"answer": "' + b"x" * 300 + b'"}'

    r = call(app, "POST", "/v1/run", content=chunks())
    assert r.status_code == 413 and "--max-inflight-mb" in r.text
    assert not fake.calls
    assert call(app, "POST", "/v1/run", json={"env": "two_sum", "answer": "pass"}).is_success
    assert call(app, "GET", "/health").status_code == 200
    assert app.state.service.admission.held == 0
