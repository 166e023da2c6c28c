"""The public API: a sorted ``__all__`` that resolves, a light import, and twin clients."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from typing import Any

import pytest

import deepgym
from deepgym import AsyncDeepGym, DeepGym

HEAVY = [
    "torch",
    "ray",
    "fastapi",
    "trl",
    "transformers",
    "matplotlib",
    "uvicorn",
    "lm_eval",
    "verl",
]


def test_all_is_sorted_and_unique() -> None:
    assert list(deepgym.__all__) == sorted(deepgym.__all__)
    assert len(set(deepgym.__all__)) == len(deepgym.__all__)


@pytest.mark.parametrize("name", deepgym.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(deepgym, name) is not None
    assert name in dir(deepgym)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        deepgym.no_such_thing  # noqa: B018


def _imported_after(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import deepgym",
        "import deepgym\nfor n in deepgym.__all__: getattr(deepgym, n)",
        "import deepgym.cli",
        "import deepgym\nwith deepgym.DeepGym() as dg:\n    dg.time_limit('two_sum', 2.0)",
    ],
    ids=["import", "every-name", "cli", "local-client"],
)
def test_import_is_light(code: str) -> None:
    modules = _imported_after(code)
    assert "deepgym" in modules
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert heavy == []


def test_plain_import_does_not_load_pydantic() -> None:
    # Names load on first use: ``import deepgym`` alone stays near free.
    assert "pydantic" not in _imported_after("import deepgym")


def _public_methods(cls: type) -> dict[str, Any]:
    """The class's own methods and those of its bases (``object``'s aside)."""
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):
        members.update(vars(klass))
    return {
        name: member
        for name, member in members.items()
        if callable(member) and (not name.startswith("_") or name == "__init__")
    }


def _params(fn: Any) -> list[tuple[str, Any, Any, Any]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()]


def test_sync_and_async_clients_have_the_same_methods() -> None:
    assert set(_public_methods(DeepGym)) == set(_public_methods(AsyncDeepGym))
    assert {"run", "run_batch", "eval", "close"} <= set(_public_methods(DeepGym))


@pytest.mark.parametrize("name", sorted(_public_methods(DeepGym)))
def test_sync_and_async_signatures_match(name: str) -> None:
    sync = getattr(DeepGym, name)
    core = getattr(AsyncDeepGym, name)
    assert _params(sync) == _params(core)
    if name != "__init__":  # the async core awaits or streams; the sync shell blocks
        assert inspect.iscoroutinefunction(core) or inspect.isasyncgenfunction(core)
        assert not inspect.iscoroutinefunction(sync) and not inspect.isasyncgenfunction(sync)


def test_context_managers_pair_up() -> None:
    assert hasattr(DeepGym, "__enter__") and hasattr(DeepGym, "__exit__")
    assert hasattr(AsyncDeepGym, "__aenter__") and hasattr(AsyncDeepGym, "__aexit__")


def _protocol_methods(proto: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(proto).items()
        if callable(member) and not name.startswith("_")
    }


@pytest.mark.parametrize("engine", ["LocalEngine", "RemoteEngine", "RayEngine"])
def test_every_engine_holds_to_the_engine_protocol(engine: str) -> None:
    import deepgym.engines as engines
    from deepgym.engines import Engine

    cls = getattr(engines, engine)
    assert isinstance(cls.mode, str)
    for name, proto in _protocol_methods(Engine).items():
        impl = getattr(cls, name)
        assert _params(impl) == _params(proto), f"{engine}.{name}"
        assert inspect.iscoroutinefunction(impl) == inspect.iscoroutinefunction(proto), name
        if name == "stream_groups":
            assert inspect.isasyncgenfunction(impl), name


def test_the_facade_delegates_every_engine_method_with_its_signature() -> None:
    from deepgym.engines import Engine

    for name, proto in _protocol_methods(Engine).items():
        assert _params(getattr(AsyncDeepGym, name)) == _params(proto), name


def test_sync_and_async_reward_functions_have_the_same_methods_and_signatures() -> None:
    from deepgym import AsyncRewardFunction, RewardFunction

    def methods(cls: type) -> dict[str, Any]:
        return {**_public_methods(cls), "__call__": cls.__call__}

    sync, core = methods(RewardFunction), methods(AsyncRewardFunction)
    assert set(sync) == set(core)
    assert {"__call__", "results", "shaped_rewards", "per_test_rewards", "close"} <= set(sync)
    for name in sorted(core):
        assert _params(sync[name]) == _params(core[name]), name
        if name != "__init__":
            assert inspect.iscoroutinefunction(core[name]), name
            assert not inspect.iscoroutinefunction(sync[name]), name


def _properties(cls: type) -> set[str]:
    return {name for name, member in vars(cls).items() if isinstance(member, property)}


def test_sync_and_async_sessions_have_the_same_methods_and_properties() -> None:
    from deepgym.session import AsyncSession, Session

    sync, core = _public_methods(Session), _public_methods(AsyncSession)
    sync.pop("__init__"), core.pop("__init__")  # a core's provider; the blocking face's portal
    assert set(sync) == set(core)
    assert {"exec", "score", "failure", "close"} <= set(sync)
    assert _properties(Session) == _properties(AsyncSession)
    assert {"env", "diff", "sandbox_id", "acted", "agent_share"} <= _properties(Session)


def _session_methods() -> list[str]:
    from deepgym.session import AsyncSession

    return sorted(n for n in _public_methods(AsyncSession) if n != "__init__")


@pytest.mark.parametrize("name", _session_methods())
def test_sync_and_async_session_signatures_match(name: str) -> None:
    from deepgym.session import AsyncSession, Session

    sync, core = getattr(Session, name), getattr(AsyncSession, name)
    assert _params(sync) == _params(core)
    # Where the async core awaits, the blocking face blocks; a pure method is pure on both.
    assert not inspect.iscoroutinefunction(sync)
    if name != "failure":
        assert inspect.iscoroutinefunction(core)
