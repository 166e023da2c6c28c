"""Precompiled headers (``deepgym.sandbox.headers``): one per toolchain and compile line, built
in the background in a build sandbox, used by every later build of that line (found in
``/pch``), never by a build of another line, and never waited on."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym import AsyncDeepGym, Environment, languages
from deepgym.sandbox import headers, make_backend, policy
from deepgym.sandbox.headers import Headers, flags

CPP = languages.LANGUAGES["cpp"]
pytestmark = pytest.mark.skipif(not languages.toolchain("cpp").present, reason="no g++ here")

# Prints which header it was given: the real one, or the marked one a test precompiled.
WHICH = (
    "#include <bits/stdc++.h>\n"
    "int main() {\n"
    "#ifdef DEEPGYM_TEST_PCH\n"
    '  std::puts("precompiled");\n'
    "#else\n"
    '  std::puts("parsed");\n'
    "#endif\n"
    "}\n"
)


def test_flags_are_the_compile_line_without_source_output_and_libraries() -> None:
    argv = ["/usr/bin/g++", "-std=c++17", "main.cpp", "-o", "prog", "-lcrypto", "-O2"]
    assert flags(argv, "main.cpp") == ["-std=c++17", "-O2"]


def test_each_toolchain_and_compile_line_has_a_folder_of_its_own(tmp_path: Path) -> None:
    h = Headers(tmp_path)
    tc = languages.toolchain("cpp")
    ours = list(CPP.compile_argv_for("deepgym"))
    theirs = list(CPP.compile_argv_for("sandbox_fusion"))
    assert h.folder(CPP, tc, ours) != h.folder(CPP, tc, theirs)
    assert h.folder(CPP, tc, ours) == h.folder(CPP, tc, [*ours, "-lm"])  # libraries: no matter
    other = languages.Toolchain("cpp", tc.path, "g++ (Debian 99.0) 99.0", tc.tools)
    assert h.folder(CPP, other, ours) != h.folder(CPP, tc, ours)  # a new compiler: a new key


def test_only_a_build_sandbox_sees_the_headers_folder() -> None:
    params = policy.Params(bwrap="bwrap", headers_dir="/host/pch/cpp-1")
    bind = ["--ro-bind", "/host/pch/cpp-1", "/pch"]
    build = policy.argv(policy.BUILD, params)
    assert any(build[i : i + 3] == bind for i in range(len(build)))
    for role in (policy.SOLUTION, policy.VERIFIER, policy.WORKER, policy.SESSION):
        assert "/pch" not in policy.argv(role, params)
    assert "/pch" not in policy.argv(policy.BUILD, policy.Params(bwrap="bwrap"))


def _marked_header(folder: Path, argv: list[str]) -> None:
    """Precompile, with the host's g++ and ``argv``'s flags, a ``bits/stdc++.h`` that also
    defines ``DEEPGYM_TEST_PCH``, where a build looks for ``folder``'s."""
    (folder / "bits").mkdir(parents=True)
    source = folder / "marked.h"
    source.write_text("#include <bits/stdc++.h>\n#define DEEPGYM_TEST_PCH 1\n")
    line = [argv[0], *flags(argv, CPP.source), "-x", "c++-header", str(source)]
    subprocess.run([*line, "-o", str(folder / "bits" / "stdc++.h.gch")], check=True)


@pytest.fixture
def pch_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(headers.PCH_DIR_VAR, str(tmp_path / "pch"))
    yield tmp_path / "pch"


@pytest.fixture(scope="module")
def marked_pch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A headers folder whose deepgym-line ``bits/stdc++.h`` is the marked one (built once for
    both sandboxes' tests)."""
    root = tmp_path_factory.mktemp("marked-pch")
    tc = languages.toolchain("cpp")
    ours = [tc.tools["g++"], *CPP.compile_argv[1:]]
    _marked_header(Headers(root).folder(CPP, tc, ours), ours)
    return root


@pytest.mark.parametrize("sandbox", ["pool", "strict"])
def test_a_build_uses_the_header_of_its_own_compile_line(
    marked_pch: Path, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header precompiled for the deepgym line is what its builds include (it defines the
    marker); a build in SandboxFusion's line (other flags) parses the real header instead."""
    monkeypatch.setenv(headers.PCH_DIR_VAR, str(marked_pch))
    env = Environment(
        name="which",
        kind="script",
        language="cpp",
        test_cases=[{"stdin": "", "expected_stdout": ""}],
        keep_output=True,
    )

    async def go() -> tuple[str, str]:
        backend = make_backend(sandbox, **({"workers": 1} if sandbox == "pool" else {}))
        async with AsyncDeepGym(backend=backend) as dg:
            mine = await dg.run_one(env, WHICH)
            fusion = env.model_copy(update={"dialect": "sandbox_fusion"})
            theirs = await dg.run_one(fusion, WHICH)
        await backend.close()
        return _stdout(mine), _stdout(theirs)

    assert asyncio.run(go()) == ("precompiled\n", "parsed\n")


def _stdout(result: object) -> str:
    cases = getattr(result, "cases", None)
    assert cases and cases[0].output is not None, result
    return str(cases[0].output.stdout)


def test_the_first_build_starts_the_header_which_later_builds_use(pch_dir: Path) -> None:
    """Nothing waits for it: the first build goes on without it; once built (in a build
    sandbox, from ``#include <bits/stdc++.h>``), it is on disk for every later build."""
    env = Environment(
        name="first",
        kind="script",
        language="cpp",
        test_cases=[{"stdin": "", "expected_stdout": "parsed\n"}],
    )

    async def go() -> Path | None:
        backend = make_backend("pool", workers=1)
        async with AsyncDeepGym(backend=backend) as dg:
            assert (await dg.run_one(env, WHICH)).passed
            building = list(headers._BUILDING.values())
            assert building, "the first C++ build started no header build"
            await asyncio.gather(*building)
            tc = languages.toolchain("cpp")
            line = [tc.tools["g++"], *CPP.compile_argv[1:]]
            ready = backend.programs.headers.ready(CPP, tc, line, backend.programs.build_header)
            assert (await dg.run_one(env, WHICH + "// again\n")).passed
        await backend.close()
        return ready

    folder = asyncio.run(go())
    assert folder is not None and (folder / "bits" / "stdc++.h.gch").stat().st_size > 2**20
