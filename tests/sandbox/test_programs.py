"""The compile cache's own rules (``deepgym.sandbox.programs``): a toolchain that cannot build
a known-good program is ours (no verdict), never a ``compile_error``; programs in use are never
evicted; the cache is keyed by source."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym import DeepGym, Environment, languages
from deepgym.sandbox.programs import ProgramCache
from deepgym.sandbox.workspace import Workspace

RIGHT = '#include <stdio.h>\nint main(void) { puts("3"); return 0; }\n'
CASES = [{"stdin": "", "expected_stdout": "3\n"}]

pytestmark = pytest.mark.skipif(
    not languages.toolchain("c").present, reason="no gcc in /usr/bin here"
)


@pytest.fixture
def dg() -> Iterator[DeepGym]:
    with DeepGym(sandbox="strict") as client:
        yield client


def env(name: str = "three") -> Environment:
    return Environment(name=name, kind="script", language="c", test_cases=CASES)


def test_a_toolchain_that_refuses_a_known_good_program_is_ours(
    dg: DeepGym, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = languages.LANGUAGES["c"]
    # A compiler that refuses everything with exit 1, as one missing a header or a library in
    # the sandbox does: without the probe, every answer would be a judged compile_error.
    broken = dataclasses.replace(c, compile_argv=(*c.compile_argv, "-include", "/no/such.h"))
    monkeypatch.setitem(languages.LANGUAGES, "c", broken)
    r = dg.run_one(env(), RIGHT)
    assert not r.has_verdict and r.error_type == "sandbox_error"
    assert "did not build a known-good program" in r.error
    monkeypatch.setitem(languages.LANGUAGES, "c", c)
    again = dg.run_one(env(), RIGHT)  # the toolchain works again: judged, and right
    assert again.passed


def test_a_refused_source_is_the_answers_once_the_toolchain_has_built(dg: DeepGym) -> None:
    assert dg.run(env(), RIGHT).passed
    r = dg.run(env(), "int main( {")
    assert r.has_verdict and r.error_type == "compile_error" and "error" in r.error
    stats = dg.sandbox_stats()["compile_cache"]
    assert stats["misses"] == 2 and stats["programs"] == 1


def test_the_models_names_are_the_tables_languages() -> None:
    assert set(languages.NAMES) == {"python", *languages.LANGUAGES}
    for lang in languages.LANGUAGES.values():
        assert lang.probe and lang.source and lang.compile_argv and lang.run_argv, lang.name


def test_programs_in_use_are_not_evicted(tmp_path: Path) -> None:
    ws = Workspace()
    try:
        cache = ProgramCache(
            ws, lambda *a: ([], {}), isolation="strict", through_bwrap=True, max_entries=1
        )
        first = cache._keep("a", b"x" * 10, 1.0)
        cache._pins["a"] += 1  # a run holds it
        cache._keep("b", b"y" * 10, 1.0)
        assert first.path.exists() and set(cache._programs) == {"a", "b"}
        cache._pins.clear()
        cache._evict()
        assert not first.path.exists() and set(cache._programs) == {"b"}
    finally:
        ws.close()


def test_a_harness_takes_the_answer_in_place_of_its_marker_line() -> None:
    from deepgym.models import HARNESS_MARKER
    from deepgym.sandbox.base import Job
    from deepgym.sandbox.programs import source

    harness = f"#include <stdio.h>\n{HARNESS_MARKER}\nint main(void) {{ return f(); }}\n"
    e = Environment(name="h", kind="script", language="c", test_cases=CASES, harness=harness)
    job = Job(env=e, answer="int f(void) { return 0; }\n", timeout=5.0, case_timeout=1.0)
    assert source(job) == (
        "#include <stdio.h>\nint f(void) { return 0; }\n\nint main(void) { return f(); }\n"
    )
    plain = Job(env=env(), answer="int main(void) {}\n", timeout=5.0, case_timeout=1.0)
    assert source(plain) == plain.answer  # no harness: the answer is the program
    assert ProgramCache.key(job) != ProgramCache.key(plain)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"language": "python", "harness": "// deepgym:answer\n"}, "compiled language"),
        ({"harness": "int main(void) {}\n"}, "exactly once"),
        ({"harness": "// deepgym:answer\n// deepgym:answer\n"}, "exactly once"),
    ],
)
def test_a_harness_is_refused_where_it_cannot_hold_the_answer(
    fields: dict[str, str], message: str
) -> None:
    base = {"name": "h", "kind": "script", "language": "c", "test_cases": CASES}
    with pytest.raises(ValueError, match=message):
        Environment(**{**base, **fields})  # type: ignore[arg-type]
