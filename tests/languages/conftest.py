"""Fixtures for the compiled languages' tests: the sandbox suite's backends, client and host
guard (one warm client per backend per module), and a skip for a language this host lacks."""

from __future__ import annotations

import pytest

from deepgym import RunResult, languages
from deepgym.sandbox.base import Backend
from deepgym.sandbox.programs import ProgramCache
from tests.sandbox.conftest import backend, dg, host, module_secret, sandbox

__all__ = [
    "backend",
    "dg",
    "host",
    "judged",
    "module_secret",
    "need",
    "program_cache",
    "sandbox",
]


def need(name: str) -> None:
    """Skip the test where this host lacks language ``name``'s toolchain."""
    tc = languages.toolchain(name)
    if not tc.present:
        lang = languages.LANGUAGES[name]
        pytest.skip(f"no {lang.tool} in /usr/bin: install Debian's {lang.package} package")


def program_cache(be: Backend) -> ProgramCache:
    """The compile cache of a strict or pool backend."""
    cache = getattr(be, "programs", None) or getattr(getattr(be, "_runs", None), "programs", None)
    if not isinstance(cache, ProgramCache):
        raise TypeError(f"the {type(be).__name__} backend has no compile cache")
    return cache


def judged(r: RunResult, score: float = 0.0) -> None:
    """``r`` has a verdict, and it is ``score`` (a pass only at 1.0)."""
    assert r.has_verdict, r
    assert r.score == score, r
    assert r.passed is (score == 1.0), r
