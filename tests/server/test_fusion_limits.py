"""SandboxFusion's routes against the service's limits, before anything runs (an in-memory
backend: nothing here starts a sandbox).

A ``/submit`` whose tests cannot all run within the service's limits is refused with a 400 that
names the limit, instead of being cut short by it (which scored a right answer 0: each test
``TimeLimitExceeded``). The run's own wall limit is a backstop of ours, past the tests' own.
"""

from __future__ import annotations

from typing import Any

import pytest

from deepgym.judge.report import MAX_CASES
from deepgym.server import fusion
from deepgym.server.inputs import Limits
from tests.server.conftest import call, fake_app

sf = pytest.importorskip("sandbox_fusion.models")

RIGHT = "```python\nprint(sum(map(int, input().split())))\n```"


def _submit(tests: int, run_timeout: float) -> dict[str, Any]:
    body = {
        "dataset": "code_contests",
        "id": 1,
        "completion": RIGHT,
        "config": {
            "language": "python",
            "run_timeout": run_timeout,
            "provided_data": {"inputs": ["1 2"] * tests, "outputs": ["3"] * tests},
        },
    }
    sf.SubmitRequest.parse_obj(body)  # SandboxFusion's own request
    return body


def test_tests_whose_limits_add_up_past_the_maximum_are_refused_before_anything_runs() -> None:
    app, fake = fake_app(limits=Limits(max_time_limit=60.0))
    r = call(app, "POST", "/submit", json=_submit(100_000, 1))
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "100000 tests" in message and "100000 s" in message
    assert "maximum of 60 s" in message and "--max-time-limit" in message
    assert fake.jobs == []  # nothing ran


def test_more_tests_than_a_result_carries_are_refused() -> None:
    app, fake = fake_app()
    r = call(app, "POST", "/submit", json=_submit(MAX_CASES + 1, 0.01))
    assert r.status_code == 400, r.text
    assert f"over the {MAX_CASES} one /submit runs" in r.json()["error"]["message"]
    assert fake.jobs == []


def test_tests_that_fit_run_under_a_backstop_past_their_own_limits() -> None:
    app, fake = fake_app(limits=Limits(max_time_limit=60.0))
    call(app, "POST", "/submit", json=_submit(60, 1))  # 60 s in all: exactly the maximum
    (job,) = fake.jobs
    env = job.env
    assert env.case_timeout == 1.0 and env.timeout_kind == "backstop"
    assert env.timeout == fusion.backstop(1.0, 60) > 60.0  # past the tests' own, never below
    assert job.timeout == env.timeout


def test_run_code_runs_under_a_backstop() -> None:
    app, fake = fake_app()
    call(app, "POST", "/run_code", json={"code": "print(1)", "language": "python"})
    (job,) = fake.jobs
    assert job.env.timeout_kind == "backstop" and job.env.timeout == fusion.backstop(10.0, 1)


def test_run_code_requests_share_one_prepared_environment_and_carry_their_own_input() -> None:
    """Nothing is made or staged per request: requests with the same language and limits run
    the same ``Environment`` (its staged folder and key computed once); each job carries its
    request's own stdin and files (``Job.input``), never in the environment."""
    app, fake = fake_app()
    bodies = [
        {"code": "print(1)", "language": "python", "stdin": "first"},
        {"code": "print(2)", "language": "python", "stdin": "second", "files": {"a": "YQ=="}},
        {"code": "print(3)", "language": "python", "run_timeout": 3},
    ]
    for body in bodies:
        call(app, "POST", "/run_code", json=body)
    first, second, other = fake.jobs
    assert first.env is second.env and other.env is not first.env
    assert first.env.test_cases == [{"stdin": "", "expected_stdout": ""}]
    assert first.input is not None and second.input is not None
    assert [c["stdin"] for c in (*first.input.cases, *second.input.cases)] == ["first", "second"]
    assert first.input.files == () and second.input.files == (("a", "YQ=="),)


def test_a_request_s_input_reaches_a_copy_of_its_environment_too() -> None:
    """The request's stdin and files go on each job of its environment, the same object or an
    equal copy a layer made of it: never a run of the stand-in case instead (an empty stdin,
    a wrong output with a verdict)."""
    import asyncio

    from deepgym.sandbox.base import Job
    from deepgym.server.metrics import Metrics
    from deepgym.server.service import RUN_INPUT, MeteredBackend
    from tests.fakes import FakeBackend

    req = fusion.RunCodeRequest(code="pass", language="python", stdin="mine")
    env = fusion.run_code_env(req, Limits())
    given = fusion.run_code_input(req)
    fake = FakeBackend()
    metered = MeteredBackend(fake, Metrics(), None)

    async def go() -> None:
        RUN_INPUT.set((env, given))
        for each in (env, env.model_copy()):
            await metered.run(Job(env=each, answer="pass", timeout=1.0, case_timeout=1.0))

    asyncio.run(go())
    assert [job.input for job in fake.jobs] == [given, given]
