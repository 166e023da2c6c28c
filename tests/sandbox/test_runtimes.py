"""Answers in a runtime (``deepgym.runtimes``) on both sandboxes: the scientific stack imports in
the answer's process and nowhere else, and the runtime is out of the answer's reach to change.

- The real scientific runtime (built once per checkout and Python: ``tests.built_runtimes``):
  numpy, pandas, scipy, scikit-learn and sympy import and compute in a script and in a function
  task's calls; without the runtime ``import numpy`` fails (the host's venv has numpy: none of
  its packages reach the answer); the verifier's process never has them.
- A disposable stand-in (``fake_scientific``): the attacks. The answer tries every way to write
  the runtime (append, create, chmod, rename, unlink, utime, a symlink), and to read the host
  around it (the host's packages, the folder runtimes are kept in, another runtime there, the
  test data); each fails, and the runtime on disk is as it was built.
"""

from __future__ import annotations

import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym, Environment
from deepgym.exceptions import SandboxUnavailableError
from deepgym.judge.codes import IN_RUNTIME
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend
from tests.built_runtimes import CANARY, fake_scientific, scientific, snapshot

from .conftest import HostGuard
from .test_attacks import NOTFOUND, PROBE, answer

pytestmark = pytest.mark.sandbox

SITE = f"{IN_RUNTIME}/site-packages"
LIMITS: dict[str, Any] = {"timeout": 30.0, "case_timeout": 20.0, "memory_mb": 1024}
STACK = textwrap.dedent(
    """
    import numpy as np, pandas as pd, scipy.linalg, sklearn.linear_model, sympy

    x = np.arange(1.0, 7.0).reshape(2, 3)
    print(int(x.sum()), np.__file__.startswith({site}))
    frame = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    print(frame.groupby("k")["v"].sum().to_dict())
    print(round(float(scipy.linalg.det(np.array([[2.0, 1.0], [1.0, 3.0]]))), 6))
    model = sklearn.linear_model.LinearRegression().fit([[0.0], [1.0], [2.0]], [1.0, 3.0, 5.0])
    print(round(float(model.coef_[0]), 6), round(float(model.intercept_), 6))
    print(sympy.solve(sympy.Symbol("y") ** 2 - 4))
    """
).replace("{site}", repr(SITE))
STACK_OUT = "21 True\n{'a': 4, 'b': 2}\n5.0\n2.0 1.0\n[-2, 2]\n"


def script(runtime: str) -> Environment:
    return Environment(
        name=f"stack-{runtime}",
        kind="script",
        test_cases=[{"stdin": "", "expected_stdout": STACK_OUT}],
        keep_output=True,
        runtime=runtime,
        **LIMITS,
    )


def _client(sandbox: str, root: Path) -> tuple[DeepGym, Backend]:
    with pytest.MonkeyPatch.context() as mp:  # the backend's store reads it once, here
        mp.setenv("DEEPGYM_RUNTIMES", str(root))
        try:
            backend = make_backend(sandbox, workers=2)
        except SandboxUnavailableError as exc:
            pytest.skip(f"the {sandbox} sandbox cannot run on this host: {exc}")
    return DeepGym(backend=backend), backend


@pytest.fixture(scope="module")
def real(sandbox: str) -> Iterator[DeepGym]:
    """A client whose backend keeps its runtimes where the tests' scientific one is built."""
    client, _ = _client(sandbox, scientific())
    with client:
        yield client


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runtimes")
    fake_scientific(root)
    other = root / "another-runtime" / "site-packages"  # a runtime the answer does not name
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another runtime's file\n")
    return root


@pytest.fixture(scope="module")
def fake(sandbox: str, fake_root: Path) -> Iterator[tuple[DeepGym, Backend]]:
    """A client whose backend finds the disposable stand-in as the scientific runtime."""
    client, backend = _client(sandbox, fake_root)
    with client:
        yield client, backend


@pytest.fixture
def guard(fake: tuple[DeepGym, Backend], monkeypatch: pytest.MonkeyPatch) -> HostGuard:
    """``conftest.host``'s check, on the stand-in's backend: nothing left behind."""
    dg, backend = fake
    dg.run(script("stdlib"), "print('warm')")  # the pool's workers started before the snapshot
    host = HostGuard.take(backend)
    host.watch_cgroups(monkeypatch)
    return host


# -- the scientific stack ---------------------------------------------------------------------


def test_the_scientific_stack_imports_and_computes_in_the_runtime(real: DeepGym) -> None:
    r = real.run(script("scientific"), STACK)
    assert r.has_verdict and r.score == 1.0, (r, r.cases[0].output)


def test_without_the_runtime_numpy_is_not_there(real: DeepGym) -> None:
    """The default runtime: the judge's Python and its standard library, nothing of the host's
    venv (which has numpy): a judged 0 that says why."""
    import numpy  # noqa: F401  (the host has it: the answer must not)

    r = real.run(script("stdlib"), STACK)
    assert r.has_verdict and r.score == 0.0, r
    output = r.cases[0].output
    assert output is not None and output.exit_code == 1, r.cases
    assert "ModuleNotFoundError: No module named 'numpy'" in output.stderr, output.stderr


def test_a_function_task_calls_into_numpy_and_the_verifier_never_has_it(real: DeepGym) -> None:
    verifier = textwrap.dedent(
        """
        import importlib.util, sys

        def verify(solution, test_cases):
            got = solution.mean_of([1, 2, 3, 6])
            where = solution.where()
            mine = importlib.util.find_spec("numpy") is None and "numpy" not in sys.modules
            ok = got == 3.0 and where.startswith({site}) and mine
            return {"score": 1.0 if ok else 0.0,
                    "cases": [{"name": "numpy", "passed": ok,
                               "message": repr((got, where, mine))}]}
        """
    ).replace("{site}", repr(SITE))
    env = Environment(name="np-fn", verifier_code=verifier, runtime="scientific", **LIMITS)
    src = (
        "import numpy as np\n\n"
        "def mean_of(xs):\n    return float(np.mean(np.array(xs)))\n\n"
        "def where():\n    return np.__file__\n"
    )
    r = real.run(env, src)
    assert r.has_verdict and r.score == 1.0, r.cases


# -- attacks, on a disposable stand-in --------------------------------------------------------

WRITE = """
    import os

    def attack():
        import numpy
        pkg = os.path.dirname(numpy.__file__)
        site = os.path.dirname(pkg)
        canary = os.path.join(pkg, "canary.txt")
        did = [] if numpy.__version__ == "stand-in" else ["not the stand-in: " + numpy.__file__]
        tries = {
            "append": lambda: open(numpy.__file__, "a").write("pwned = True\\n"),
            "truncate": lambda: open(canary, "w").close(),
            "create": lambda: open(os.path.join(pkg, "pwned.py"), "w").close(),
            "create in site": lambda: open(os.path.join(site, "sitecustomize.py"), "w").close(),
            "mkdir": lambda: os.mkdir(os.path.join(site, "pwned")),
            "chmod": lambda: os.chmod(canary, 0o777),
            "rename": lambda: os.rename(canary, canary + ".moved"),
            "unlink": lambda: os.unlink(canary),
            "utime": lambda: os.utime(canary, (0, 0)),
            "symlink": lambda: os.symlink("/tmp", os.path.join(site, "link")),
            "rmdir": lambda: os.rmdir(pkg),
        }
        for name, act in tries.items():
            try:
                act()
                did.append(name)
            except OSError:
                pass
        with open(canary) as f:
            if f.read() != {canary_text}:
                did.append("the canary changed")
        return did
    """


def test_the_answer_cannot_write_its_runtime(
    fake: tuple[DeepGym, Backend], fake_root: Path, guard: HostGuard
) -> None:
    dg, _ = fake
    folder = next(p for p in fake_root.iterdir() if p.name.startswith("scientific-"))
    before = snapshot(folder)
    env = Environment(
        name="rt-write",
        entry_point="attack",
        test_cases=[{"args": [], "expected": []}],
        runtime="scientific",
        **LIMITS,
    )
    r = dg.run(env, answer(WRITE, canary_text=CANARY))
    assert r.has_verdict and r.score == 1.0, r.cases  # every try failed
    assert snapshot(folder) == before
    r = dg.run(env, answer(WRITE, canary_text=CANARY))  # and the next run finds it as built
    assert r.has_verdict and r.score == 1.0, r.cases
    guard.check()


READ = """
    import os, sys

    def attack(host_paths):
        # (a pool's solution keeps its worker's path to the judge's package, read-only)
        ours = ({site}, "/opt/deepgym")
        found = [p for p in sys.path if not p.startswith(sys.base_prefix) and p not in ours]
        found += ["env " + k for k in os.environ if k.startswith("DEEPGYM")]
        for name in ("pydantic", "deepgym", "httpx"):  # the host's venv has each
            try:
                __import__(name)
                found.append("imported " + name)
            except ImportError:
                pass
        for path in host_paths:
            if os.path.exists(path):
                found.append("sees " + path)
        if os.listdir("/opt/deepgym/runtimes") if os.path.isdir("/opt/deepgym/runtimes") else []:
            found.append("sees the runtimes kept beside its own")
        return found
    """


def test_the_runtime_shows_the_answer_nothing_else_of_the_host(
    fake: tuple[DeepGym, Backend], fake_root: Path, guard: HostGuard
) -> None:
    import pydantic

    dg, _ = fake
    host_paths = [
        str(Path(pydantic.__file__).resolve().parents[1]),  # the venv's site-packages
        str(fake_root),
        str(fake_root / "another-runtime" / "site-packages" / "secret.txt"),
        "/opt/deepgym/runtimes/another-runtime/site-packages/secret.txt",
    ]
    env = Environment(
        name="rt-read",
        entry_point="attack",
        test_cases=[{"args": [host_paths], "expected": []}],
        runtime="scientific",
        **LIMITS,
    )
    r = dg.run(env, answer(READ, site=SITE))
    assert r.has_verdict and r.score == 1.0, r.cases
    guard.check()


def test_the_test_data_is_out_of_reach_in_a_runtime(
    fake: tuple[DeepGym, Backend], guard: HostGuard
) -> None:
    """``test_attacks``' probe of the whole file system for the test data, with the runtime."""
    dg, _ = fake
    token = "tok-" + secrets.token_hex(16)
    cases = [
        {"args": [token], "expected": NOTFOUND},
        {"args": [token, True], "expected": ["holds the token: /tmp/planted.txt"]},
    ]
    env = Environment(
        name="rt-probe", entry_point="probe", test_cases=cases, runtime="scientific", **LIMITS
    )
    r = dg.run(env, answer(PROBE))
    assert r.has_verdict and r.score == 1.0, r.cases
    guard.check()


def test_the_unsafe_backend_runs_the_runtime_from_its_folder() -> None:
    """No sandbox to mount it in: the answer's process is told the folder on the host."""
    client, _ = _client("unsafe", scientific())
    with client:
        r = client.run(script("scientific"), STACK.replace(repr(SITE), repr(str(scientific()))))
    assert r.has_verdict and r.score == 1.0, (r, r.cases[0].output)


def test_a_pool_worker_without_the_runtimes_is_no_verdict_never_a_zero(
    fake_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker started without the runtimes' folder (here: the pool told it had none while its
    workers started) and a job that names a runtime: the solution process's set-up fails, a
    run without a verdict, never an answer that ran without its packages and scored 0."""
    client, backend = _client("pool", fake_root)
    with client:
        monkeypatch.setattr(backend, "_runtimes_mounted", False)
        warm = client.run(script("stdlib"), "print('warm')")  # the workers start without it
        assert warm.has_verdict, warm
        monkeypatch.setattr(backend, "_runtimes_mounted", True)
        env = Environment(
            name="rt-missing",
            kind="script",
            test_cases=[{"stdin": "", "expected_stdout": "stand-in\n"}],
            runtime="scientific",
            **LIMITS,
        )
        r = client.run_batch(env, ["import numpy\nprint(numpy.__version__)\n"]).results[0]
    assert not r.has_verdict and r.error_type == "sandbox_error", r
