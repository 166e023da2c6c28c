"""Hostile values in every parameter of the Python API's entry points: a ``ConfigError`` with a
one-line message, or a result with a verdict; never another exception, never a hang, never a run
without a verdict caused by the caller's own input.

The entry points: ``AsyncDeepGym`` (``DeepGym`` drives the same core) and its ``run_one``,
``run_batch``, ``stream_groups``, ``eval`` and ``time_limit``; ``Environment`` and an environment
folder's ``metadata.json``; ``RewardFunction``. Answers run on ``HostlikeBackend``, each call
under ``DEADLINE_S``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from deepgym.client import AsyncDeepGym
from deepgym.envs.registry import METADATA_KEYS, load_folder
from deepgym.exceptions import ConfigError
from deepgym.models import Environment, RunResult
from deepgym.reward_function import AsyncRewardFunction
from tests.hostile.common import (
    DEADLINE_S,
    HOSTILE,
    SETTINGS,
    TRIED,
    HostlikeBackend,
    scripted,
    to_json,
    to_python,
    with_specials,
)
from tests.server.conftest import NO_DERIVED, TOY

Call = Callable[[AsyncDeepGym, Any], Awaitable[Any]]


def _calls() -> dict[str, Call]:
    """One call per (entry point, parameter), the hostile value in that parameter only."""
    ok = "pass"
    return {
        "run_one(env)": lambda dg, v: dg.run_one(v, ok),
        "run_one(model_output)": lambda dg, v: dg.run_one("two_sum", v),
        "run_one(time_limit)": lambda dg, v: dg.run_one("two_sum", ok, time_limit=v),
        "run_batch(env)": lambda dg, v: dg.run_batch(v, [ok]),
        "run_batch(outputs)": lambda dg, v: dg.run_batch("two_sum", v),
        "run_batch(outputs[1])": lambda dg, v: dg.run_batch("two_sum", [ok, v]),
        "run_batch(max_parallel)": lambda dg, v: dg.run_batch("two_sum", [ok], max_parallel=v),
        "run_batch(group_size)": lambda dg, v: dg.run_batch("two_sum", [ok], group_size=v),
        "run_batch(time_limit)": lambda dg, v: dg.run_batch("two_sum", [ok], time_limit=v),
        "stream_groups(group_size)": lambda dg, v: _drain(dg, [ok, ok], group_size=v),
        "stream_groups(time_limit)": lambda dg, v: _drain(dg, [ok], group_size=1, time_limit=v),
        "stream_groups(max_parallel)": lambda dg, v: _drain(dg, [ok], group_size=1, max_parallel=v),
        "eval(envs_or_suite)": lambda dg, v: dg.eval(v, {}),
        "eval(envs_or_suite[0])": lambda dg, v: dg.eval([v], {}),
        "eval(outputs)": lambda dg, v: dg.eval(["two_sum"], v),
        "eval(outputs value)": lambda dg, v: dg.eval(["two_sum"], {"two_sum": v}),
        "eval(outputs key)": lambda dg, v: dg.eval(["two_sum"], {_hashable(v): ok}),
        "eval(max_parallel)": lambda dg, v: dg.eval(["two_sum"], {}, max_parallel=v),
        "eval(time_limit)": lambda dg, v: dg.eval(["two_sum"], {}, time_limit=v),
        "time_limit(time_limit)": lambda dg, v: dg.time_limit("two_sum", v),
    }


CALLS = _calls()


def _hashable(value: Any) -> Any:
    """``value`` as a mapping's key (a list or dict cannot be one: a tuple of its size)."""
    return (type(value).__name__, len(value)) if isinstance(value, list | dict) else value


async def _drain(dg: AsyncDeepGym, outputs: list[str], **kw: Any) -> list[RunResult]:
    out: list[RunResult] = []
    async for _, results in dg.stream_groups("two_sum", outputs, **kw):
        out += results
    return out


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def dg(loop: asyncio.AbstractEventLoop) -> Iterator[AsyncDeepGym]:
    client = AsyncDeepGym(backend=HostlikeBackend(), time_limits=NO_DERIVED)
    yield client
    loop.run_until_complete(client.close())


def _bounded(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, DEADLINE_S))


def _refused_in_a_line(exc: BaseException) -> None:
    assert isinstance(exc, ConfigError), f"{type(exc).__name__}: {exc}"
    assert str(exc) and "\n" not in str(exc), str(exc)[:300]


def _judged(out: Any, value: Any) -> None:
    """Every result a call returned has a verdict (unless the fake reads the answer as a
    script: ``"down"`` is a sandbox that never starts, not the caller's input)."""
    if scripted(value) or (isinstance(value, list | dict) and any(map(scripted, value))):
        return
    if isinstance(value, dict) and any(map(scripted, value.values())):
        return
    results = out if isinstance(out, list) else getattr(out, "results", None)
    if results is None:
        assert isinstance(out, RunResult | float), type(out)
        results = [out] if isinstance(out, RunResult) else []
    for r in results:
        assert r.has_verdict, f"no verdict for the caller's input: {r.error_type}: {r.error}"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_hostile_argument_is_refused_or_judged(
    name: str, dg: AsyncDeepGym, loop: asyncio.AbstractEventLoop
) -> None:
    call = CALLS[name]

    @SETTINGS
    @with_specials
    @given(value=HOSTILE)
    def one(value: Any) -> None:
        TRIED["api"] += 1
        arg = to_python(value)
        try:
            out = _bounded(loop, call(dg, arg))
        except ConfigError as exc:
            _refused_in_a_line(exc)
            return
        _judged(out, arg)

    one()


@pytest.mark.parametrize("field", sorted(Environment.model_fields))
def test_a_hostile_environment_field_is_refused_or_runs_judged(
    field: str, dg: AsyncDeepGym, loop: asyncio.AbstractEventLoop
) -> None:
    @SETTINGS
    @with_specials
    @given(value=HOSTILE)
    def one(value: Any) -> None:
        TRIED["api"] += 1
        try:
            env = Environment(**{**TOY, field: to_python(value)})
        except ValueError as exc:  # pydantic's ValidationError: the field named in it
            assert field in str(exc), str(exc)[:300]
            return
        try:
            result = _bounded(loop, dg.run_one(env, "pass"))
        except ConfigError as exc:  # a session, a patch task without its repository
            _refused_in_a_line(exc)
            return
        assert result.has_verdict, f"{result.error_type}: {result.error}"

    one()


@pytest.mark.parametrize("key", sorted(METADATA_KEYS))
def test_a_hostile_metadata_value_is_refused_in_a_line(
    key: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("env")
    (folder / "test_cases.json").write_text('[{"args": [], "expected": 1}]')

    @SETTINGS
    @with_specials
    @given(value=HOSTILE)
    def one(value: Any) -> None:
        TRIED["api"] += 1
        meta = {"name": "toy", "entry_point": "f", key: "__HOSTILE__"}
        text = json.dumps(meta).replace('"__HOSTILE__"', to_json(value))
        (folder / "metadata.json").write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_folder(Path(folder))
        except ConfigError as exc:
            _refused_in_a_line(exc)

    one()


REWARD_PARAMS = ("env", "max_parallel", "timeout", "workers", "sandbox", "completions")


@pytest.mark.parametrize("param", REWARD_PARAMS)
def test_a_hostile_reward_function_argument_is_refused_or_scored(
    param: str, dg: AsyncDeepGym, loop: asyncio.AbstractEventLoop
) -> None:
    @SETTINGS
    @with_specials
    @given(value=HOSTILE)
    def one(value: Any) -> None:
        TRIED["api"] += 1
        arg = to_python(value)
        kw: dict[str, Any] = {"env": "two_sum", "client": dg}
        if param != "completions":
            kw[param] = arg
        try:
            reward = AsyncRewardFunction(**kw)
            completions = [arg] if param == "completions" else ["```python\npass\n```"]
            scores = _bounded(loop, reward(completions=completions))
        except ConfigError as exc:
            _refused_in_a_line(exc)
            return
        assert len(scores) == 1
        if param != "timeout":  # a call's own deadline leaves out what misses it, by design
            assert scores[0] is not None or scripted(arg), "no verdict for the caller's input"

    one()
