"""SandboxFusion's routes in a runtime (``deepgym.runtimes``): ``import numpy`` in ``/run_code``.

SandboxFusion's request has no field for it, and verl and the ``sandbox-fusion`` client let a
user set one thing, the URL: so the runtime is the service's (``deepgym serve --runtime``), or
the URL's ``/runtime/<name>/`` prefix (after ``/t/<token>`` where the token is in the path).

- On the app, over a fake backend: which runtime each URL gives the environment it runs, an
  answer in another language left as it is, an unknown name refused with a 400 naming them.
- On a real ``deepgym serve --runtime scientific`` (a process of its own, the pool sandbox, the
  tests' built runtime): verl's ``check_correctness`` and the ``sandbox-fusion`` client, their
  code unmodified, run answers that import numpy, pandas, scipy, scikit-learn and sympy; the
  same answers under ``/runtime/stdlib/`` fail as they would without the packages. SkyRL's
  code-interpreter tool (not installed here: its body, ``fusion_fixtures/``) posts to the URL
  it is given with ``/run_code`` appended, so a URL ending in the runtime's prefix works too.
  deepgym's own client against the same service: each request's environment names its runtime
  (the service's ``--runtime`` is its SandboxFusion routes' only).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from deepgym.exceptions import ConfigError
from deepgym.server.app import create_app
from tests.built_runtimes import scientific
from tests.fakes import FakeBackend
from tests.procs import stop
from tests.server.conftest import NO_DERIVED, TOKEN, call
from tests.server.test_fusion import _load_verl

NUMPY = (
    "import numpy as np, pandas, scipy, sklearn, sympy\n"
    "a, b = map(int, input().split())\n"
    "print(int(np.add(a, b)))\n"
)
CASES = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
ADD_CPP = '#include <cstdio>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}\n'


@pytest.mark.parametrize(
    ("default", "path", "language", "runs_in"),
    [
        ("stdlib", "/run_code", "python", "stdlib"),
        ("stdlib", "/runtime/scientific/run_code", "python", "scientific"),
        ("scientific", "/run_code", "python", "scientific"),
        ("scientific", "/runtime/stdlib/run_code", "python", "stdlib"),
        ("scientific", "/run_code", "cpp", "stdlib"),  # packages for Python only
        ("stdlib", f"/t/{TOKEN}/runtime/scientific/run_code", "python", "scientific"),
    ],
)
def test_the_url_or_the_service_names_the_runtime(
    default: str, path: str, language: str, runs_in: str
) -> None:
    fake = FakeBackend()
    app = create_app(fake, time_limits=NO_DERIVED, runtime=default)
    token = None if path.startswith("/t/") else TOKEN
    r = call(app, "POST", path, token=token, json={"code": "pass", "language": language})
    assert r.status_code == 200, r.text
    assert [job.env.runtime for job in fake.jobs] == [runs_in]


def test_submit_takes_the_runtime_too() -> None:
    fake = FakeBackend()
    app = create_app(fake, time_limits=NO_DERIVED)
    body = {
        "dataset": "d",
        "id": 1,
        "completion": "```python\nprint(1)\n```",
        "config": {"provided_data": {"inputs": ["1"], "outputs": ["1"]}},
    }
    r = call(app, "POST", "/runtime/scientific/submit", json=body)
    assert r.status_code == 200, r.text
    assert [job.env.runtime for job in fake.jobs] == ["scientific"]
    assert call(app, "GET", "/runtime/scientific/v1/ping").json() == "pong"


def test_an_unknown_runtime_is_a_400_naming_the_runtimes() -> None:
    fake = FakeBackend()
    app = create_app(fake, time_limits=NO_DERIVED)
    r = call(app, "POST", "/runtime/numpy/run_code", json={"code": "pass", "language": "python"})
    assert r.status_code == 400 and fake.jobs == []
    assert "runtime must be one of stdlib, scientific, got 'numpy'" in r.json()["error"]["message"]
    # the prefix is SandboxFusion's routes' only: deepgym's own API names runtimes in its envs
    assert call(app, "POST", "/runtime/scientific/v1/run", json={}).status_code == 404
    with pytest.raises(ConfigError, match="got 'numpy'"):
        create_app(fake, runtime="numpy")


# -- a real deepgym serve ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def serve() -> Iterator[str]:
    """``deepgym serve --runtime scientific`` on 127.0.0.1, with a token; its base URL."""
    env = {**os.environ, "DEEPGYM_RUNTIMES": str(scientific()), "DEEPGYM_TOKEN": ""}
    argv = [sys.executable, "-m", "deepgym", "serve", "--port", "0", "--no-store"]
    argv += ["--workers", "2", "--token", TOKEN, "--runtime", "scientific"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.match(r"deepgym serve: (http://127\.0\.0\.1:\d+) ", first)
        assert m, (first, proc.stderr.read() if proc.poll() is not None else "")
        yield m.group(1)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def verl() -> tuple[ModuleType, ModuleType]:
    return _load_verl()


@pytest.mark.sandbox
def test_verl_runs_numpy_answers_in_the_services_runtime(
    serve: str, verl: tuple[ModuleType, ModuleType]
) -> None:
    _, utils = verl

    def check(url: str, code: str, language: str = "python") -> list[Any]:
        results, _ = utils.check_correctness(url, CASES, code, timeout=20, language=language)
        return list(results)

    assert check(f"{serve}/run_code?token={TOKEN}", NUMPY) == [True, True]
    # the same answer where the URL names the standard library's: a runtime error (verl's -2)
    assert check(f"{serve}/runtime/stdlib/run_code?token={TOKEN}", NUMPY) == [-2, -2]
    if shutil.which("g++"):  # another language under the prefix: its own toolchain, as ever
        cpp_url = f"{serve}/runtime/scientific/run_code?token={TOKEN}"
        assert check(cpp_url, ADD_CPP, "cpp") == [True, True]


@pytest.mark.sandbox
def test_the_sandbox_fusion_client_runs_numpy_under_the_runtimes_prefix(serve: str) -> None:
    import sandbox_fusion as client
    from sandbox_fusion import config

    saved = (config.SANDBOX_ENDPOINT, config.DATASET_ENDPOINT)
    code = "import numpy as np\nprint(np.arange(4).sum(), np.__version__ != '')\n"
    try:
        client.set_endpoint(f"{serve}/t/{TOKEN}/runtime/scientific")
        ran = client.run_code(client.RunCodeRequest(code=code, language="python"))
        assert ran.status == "Success" and ran.run_result.stdout == "6 True\n", ran
        request = client.SubmitRequest(
            dataset="d",
            id=1,
            completion=f"```python\n{NUMPY}```",
            config=client.TestConfig(provided_data=CASES),
        )
        assert client.submit(request).accepted
        client.set_endpoint(f"{serve}/t/{TOKEN}/runtime/stdlib")
        ran = client.run_code(client.RunCodeRequest(code=code, language="python"))
        assert ran.status == "Failed" and ran.run_result.return_code == 1, ran
        assert "No module named 'numpy'" in ran.run_result.stderr
    finally:
        config.SANDBOX_ENDPOINT, config.DATASET_ENDPOINT = saved
    unknown = httpx.post(
        f"{serve}/runtime/numpy/run_code?token={TOKEN}",
        json={"code": "print(1)", "language": "python"},
        timeout=30,
    )
    assert unknown.status_code == 400 and "stdlib, scientific" in unknown.text


@pytest.mark.sandbox
def test_skyrls_body_runs_numpy_under_the_runtimes_prefix(serve: str) -> None:
    """SkyRL's tool appends ``/run_code`` to its ``SANDBOX_FUSION_URL``: set to a URL ending in
    ``/runtime/scientific`` (the token in the path), its body runs with numpy there, and without
    it under ``/runtime/stdlib``."""
    fixture = Path(__file__).with_name("fusion_fixtures") / "skyrl_code_interpreter.json"
    body = dict(json.loads(fixture.read_text())["body"])
    body["code"] = "import numpy as np\nx = np.arange(7).sum() * 2\nprint(x)"
    r = httpx.post(f"{serve}/t/{TOKEN}/runtime/scientific" + "/run_code", json=body, timeout=60)
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["status"] == "Success" and reply["run_result"]["stdout"] == "42\n", reply
    r = httpx.post(f"{serve}/t/{TOKEN}/runtime/stdlib" + "/run_code", json=body, timeout=60)
    reply = r.json()
    assert r.status_code == 200 and reply["status"] == "Failed", reply
    assert "No module named 'numpy'" in reply["run_result"]["stderr"]


@pytest.mark.sandbox
def test_deepgyms_own_client_names_the_runtime_per_request(serve: str) -> None:
    from deepgym import DeepGym, Environment

    code = "import numpy as np\nprint(int(np.arange(5).sum()))\n"
    cases = [{"stdin": "", "expected_stdout": "10\n"}]
    with DeepGym("remote", url=serve, token=TOKEN) as dg:
        results = dg.run_batch(
            [
                Environment(name="np", kind="script", test_cases=cases, runtime=runtime)
                for runtime in ("scientific", "stdlib")
            ],
            [code, code],
        )
    got = [(r.has_verdict, r.score) for r in results.results]
    assert got == [(True, 1.0), (True, 0.0)], results
