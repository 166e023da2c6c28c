"""The local engine's one translation of a backend's host errors (``LocalEngine._backend_run``)."""

from __future__ import annotations

import asyncio
import errno

import pytest

from deepgym.engines.local import LocalEngine
from deepgym.exceptions import SandboxError, TransportError
from deepgym.sandbox.base import Job, RawRun
from deepgym.scheduling import TimeLimitPolicy
from tests.fakes import TOY, FakeBackend

ENV = TOY


class HostFails(FakeBackend):
    """The fake backend, except that the answer ``"full"`` meets a full disk while staging and
    ``"gone"`` a transport error (already the contract's: it passes as it is)."""

    async def run(self, job: Job) -> RawRun:
        if job.answer == "full":
            self.calls[job.answer] += 1
            raise OSError(errno.ENOSPC, "No space left on device", "/tmp/deepgym-x/envs/k")
        if job.answer == "gone":
            raise TransportError("the provider is down", unreachable=True)
        return await super().run(job)


def _engine(**kw: object) -> tuple[LocalEngine, HostFails]:
    backend = HostFails()
    return LocalEngine(backend, **kw), backend  # type: ignore[arg-type]


def test_a_host_error_out_of_the_backend_is_the_contracts_sandbox_error() -> None:
    engine, _ = _engine(time_limits=TimeLimitPolicy(factor=None))
    with pytest.raises(SandboxError, match="No space left on device") as caught:
        asyncio.run(engine.run(ENV, "full"))
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.ENOSPC


def test_an_error_that_is_already_the_contracts_passes_as_it_is() -> None:
    engine, _ = _engine(time_limits=TimeLimitPolicy(factor=None))
    with pytest.raises(TransportError):  # an OSError too, yet never rewrapped
        asyncio.run(engine.run(ENV, "gone"))


def test_in_a_batch_a_host_error_is_a_run_without_a_verdict_and_the_others_are_scored() -> None:
    engine, backend = _engine(time_limits=TimeLimitPolicy(factor=None))
    full, ok, fail = asyncio.run(engine.run_batch(ENV, ["full", "pass", "fail"])).results
    assert not full.has_verdict and full.error_type == "sandbox_error", full
    assert full.error is not None and "No space left on device" in full.error
    assert full.score == 0.0 and not full.passed
    assert ok.passed and fail.has_verdict and not fail.passed
    assert backend.calls["full"] == 1  # raised, not a result: not retried


def test_a_host_error_while_the_reference_is_measured_is_the_contracts_too() -> None:
    engine, _ = _engine()  # a derived limit: the reference runs first
    env = ENV.model_copy(update={"reference_solution": "full"})
    with pytest.raises(SandboxError, match="No space left on device"):
        asyncio.run(engine.time_limit(env))
