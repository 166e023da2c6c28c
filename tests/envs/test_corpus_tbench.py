"""terminal-bench's aider-polyglot C++ tasks, run as they are (``../shared/data``, see its
README): 16 tasks in terminal-bench's first format, imported unmodified on a stand-in for
``buildpack-deps:jammy`` (``tests/data/stand-ins``: Debian bookworm; each task's own
Dockerfile installs its toolchain on it), and scored by their own ``run-tests.sh``.

Each task's reference (``solution.sh``) scores 1.0, a no-op 0.0, and an edit that breaks one
function of the reference 0.0; one task goes through ``deepgym check`` whole. The stand-in and
the toolchain layers are built once for all 16 (the build cache), in the image store the Harbor
image tests share (``~/.cache/deepgym-harbor-tests``, kept between runs). Marked ``corpus``:
slow (a cold store builds Debian and Boost; each episode compiles Catch2), run by ``make test``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.envs.image_store import CACHE, link_shared_store
from tests.shared_data import shared_data

from deepgym import DeepGym
from deepgym.envs.harbor import import_harbor_folder, import_task
from deepgym.envs.qa.check import check_environment
from deepgym.envs.qa.session_check import reference_actions, scripted
from deepgym.images.build import build
from deepgym.images.oci import image_manifest
from deepgym.images.store import ImageStore
from deepgym.models import Environment, RunResult

ROOT = Path(__file__).resolve().parents[2]
DATA = shared_data() / "terminal-bench-datasets" / "datasets" / "aider_polyglot"
STAND_IN = ROOT / "tests" / "data" / "stand-ins" / "buildpack-deps-jammy"
STAND_IN_REF = "deepgym-test/buildpack-deps:jammy"
BASES = {"buildpack-deps:jammy": STAND_IN_REF}
TASKS = sorted(p.name for p in DATA.glob("polyglot_cpp_*")) if DATA.is_dir() else []

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.corpus,
    pytest.mark.skipif(not TASKS, reason=f"no terminal-bench tasks at {DATA}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="build steps map ids directly only as root"),
    pytest.mark.skipif(shutil.which("mmdebstrap") is None, reason="mmdebstrap is absent"),
]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The stand-in built, then the 16 tasks imported twice (a cold cache, then a warm one):
    the environments, the report, and the times."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPGYM_HOME", str(CACHE))
        t0 = time.monotonic()
        build(STAND_IN / "Dockerfile", ref=STAND_IN_REF)
        t1 = time.monotonic()
        lines: list[str] = []
        out = tmp_path_factory.mktemp("tbench")
        report = import_harbor_folder(DATA, out / "cold", progress=lines.append, bases=BASES)
        t2 = time.monotonic()
        again = import_harbor_folder(DATA, out / "warm", bases=BASES)
        t3 = time.monotonic()
    yield {
        "report": report,
        "again": again,
        "lines": lines,
        "out": out / "cold",
        "seconds": {"stand_in": t1 - t0, "cold": t2 - t1, "warm": t3 - t2},
    }


@pytest.fixture(autouse=True)
def store_home(_deepgym_home: Path) -> None:
    """Each test's private ``DEEPGYM_HOME`` with the shared image store."""
    link_shared_store(_deepgym_home)


@pytest.fixture(scope="module")
def dg() -> Iterator[DeepGym]:
    with DeepGym() as client:
        yield client


def _env(imported: dict[str, object], task: str) -> Environment:
    from deepgym.envs.registry import load_folder

    out = imported["out"]
    assert isinstance(out, Path)
    return load_folder(out / task)


def _layers(ref: str) -> list[str]:
    """The layers of the image ``ref`` in the store, by digest."""
    store = ImageStore()
    manifest = store.blobs.read(store.blobs.stored(store.lookup(ref)))
    return [layer.digest for layer in image_manifest(manifest, None, ref).layers]


def _play(dg: DeepGym, env: Environment, actions: list[dict[str, str]]) -> RunResult:
    return dg.run_episode(env, scripted(actions)).result


BREAK_ONE_FUNCTION: dict[str, tuple[str, str]] = {
    "all-your-base": ("all_your_base.cpp", "s/return b;/return {};/"),
    "bank-account": ("bank_account.cpp", "s/return balance_;/return balance_ + 1;/"),
    "circular-buffer": ("circular_buffer.h", "s/if (is_empty()) throw/if (false) throw/"),
    "clock": ("clock.cpp", "s/return str.str();/return {};/"),
    "crypto-square": (
        "crypto_square.cpp",
        '/normalized_cipher_text() const$/,/return result;/s/return result;/return result + "?";/',
    ),
    "dnd-character": ("dnd_character.cpp", "s|- 10) / 2)|- 10) / 2) + 1|"),
    "gigasecond": ("gigasecond.cpp", "s/seconds(1000000000)/seconds(1000000001)/"),
    "kindergarten-garden": (
        "kindergarten_garden.cpp",
        "s/diagram\\[first_plant_index\\], diagram\\[first_plant_index + 1\\]/"
        "diagram[first_plant_index + 1], diagram[first_plant_index]/",
    ),
    "linked-list": ("linked_list.h", "s/return data;/return {};/"),
    "meetup": ("meetup.h", "0,/weekdays::Monday/s//weekdays::Tuesday/"),
    "perfect-numbers": (
        "perfect_numbers.cpp",
        "s/return classification::perfect;/return classification::abundant;/",
    ),
    "queen-attack": ("queen_attack.h", "s/return white_;/return black_;/"),
    "robot-name": ("robot_name.cpp", "s/setw(3)/setw(4)/"),
    "spiral-matrix": ("spiral_matrix.cpp", "s/matrix(size,/matrix(size + 1,/"),
    "yacht": ("yacht.cpp", "s/is_yacht(dice) ? 50 : 0/is_yacht(dice) ? 30 : 0/"),
    "zebra-puzzle": (
        "zebra_puzzle.cpp",
        's/drinksWater = nationalityStrings\\[houses\\[i\\].nationality\\];/drinksWater = "";/',
    ),
}
"""After the reference, per task, a ``sed`` edit of the reference's code that breaks the function
the task's tests call, and nothing else: the program still builds. The tests run only their first
case (Exercism's ``EXERCISM_RUN_ALL_TESTS`` is left undefined by ``run-tests.sh``, as in
terminal-bench), so each edit breaks what that case checks. Their ``CMakeLists.txt`` runs the
tests as a build step, so a failing test fails the build: the script prints no summary, the
agent's 0 (``solution_error``), as a wrong answer is in terminal-bench."""


def _break_one_function(task: str) -> dict[str, str]:
    path, script = BREAK_ONE_FUNCTION[task.removeprefix("polyglot_cpp_")]
    return {"tool": "bash", "command": f"cd /work && sed -i {shlex.quote(script)} {path}"}


@pytest.mark.timeout(1800)
def test_the_tasks_import_on_the_stand_in_with_the_toolchain_built_once(
    imported: dict[str, object],
) -> None:
    report, again = imported["report"], imported["again"]
    assert report.ok and len(report.imported) == len(TASKS) == 16, report.lines()  # type: ignore[attr-defined]
    assert report.lines()[0] == "imported 16 of 16 terminal-bench tasks"  # type: ignore[attr-defined]
    assert again.ok  # type: ignore[attr-defined]
    lines = imported["lines"]
    assert isinstance(lines, list)
    # The store is kept between runs: a task's image there already is not built again. Those
    # built this run built the toolchain at most once, each on the stand-in.
    built = len(TASKS) - sum(line.endswith(": in the image store") for line in lines)
    # (the toolchain's step: its text is clipped in a progress line, its start kept)
    toolchain = [line for line in lines if re.search(r"apt-get install -y\s+cmake\s", line)]
    assert len(toolchain) == built and sum("(cached)" not in line for line in toolchain) <= 1
    assert sum("the stand-in deepgym-test/buildpack-deps:jammy" in line for line in lines) == built
    # However they came to be: the 16 images share their layers up to their own files (the
    # stand-in's, then the toolchain's), each built once.
    layers = [_layers(_env(imported, task).image or "") for task in TASKS]
    shared = 0  # how many first layers all 16 have alike
    while all(len(ls) > shared and ls[shared] == layers[0][shared] for ls in layers):
        shared += 1
    base = _layers(STAND_IN_REF)
    assert layers[0][: len(base)] == base and shared >= len(base) + 2, layers  # + tmux, cmake
    assert len({tuple(ls[shared:]) for ls in layers}) == 16
    seconds = imported["seconds"]
    print(f"\nterminal-bench C++: stand-in, import of 16 cold and warm, in s: {seconds}")
    env = _env(imported, TASKS[0])
    assert env.image is not None and env.user == "root"
    assert env.timeout == 1800.0 + 15.0  # max_test_timeout_sec, and the verifier's grace
    assert env.lifetime == 1800.0  # max_agent_timeout_sec
    out = imported["out"]
    assert isinstance(out, Path)
    assert (out / TASKS[0] / "image-bases.json").read_text().count(STAND_IN_REF) == 1


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task", TASKS)
def test_the_reference_scores_one_and_a_no_op_and_a_broken_function_zero(
    task: str, imported: dict[str, object], dg: DeepGym
) -> None:
    env = _env(imported, task)
    plays = [reference_actions(env), [], [*reference_actions(env), _break_one_function(task)]]
    t0 = time.monotonic()
    # The three at once (each compiles with one core: the machine's others are free meanwhile).
    with ThreadPoolExecutor(len(plays)) as pool:
        right, idle, broken = pool.map(lambda actions: _play(dg, env, actions), plays)
    seconds = time.monotonic() - t0
    assert (right.has_verdict, right.score) == (True, 1.0), (right.error, right.cases)
    assert [c.name for c in right.cases] == ["aider_polyglot_test"]
    print(f"\n{task}: its three episodes, at once, took {seconds:.1f} s")
    assert (idle.has_verdict, idle.score) == (True, 0.0), idle
    assert (broken.has_verdict, broken.score) == (True, 0.0), broken


@pytest.mark.timeout(1800)
def test_one_task_passes_deepgym_check(imported: dict[str, object], dg: DeepGym) -> None:
    """The whole check on one task: the reference 1.0 four times alike, the no-op, busy and
    random agents and the exploit probes 0, each with a verdict."""
    env = _env(imported, "polyglot_cpp_clock")
    report = check_environment(env, dg)
    assert report.ok, report.summary()


def test_a_task_imports_by_itself_and_its_image_is_the_folders(
    imported: dict[str, object], tmp_path: Path
) -> None:
    env = import_task(DATA / TASKS[0], tmp_path / "one", bases=BASES)
    assert env.image == _env(imported, TASKS[0]).image  # the same image: built once
