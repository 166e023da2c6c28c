"""SandboxFusion's API on a real ``deepgym serve`` (uvicorn on 127.0.0.1, the pool sandbox),
checked with its clients' own code.

- The ``sandbox-fusion`` client package's models (``sandbox_fusion.models``) validate every reply.
- verl's ``check_correctness`` and ``compute_score`` (its source, loaded from the installed
  package without importing verl's heavy top level) score right, wrong, crashing, timing-out and
  compile-error answers as against SandboxFusion; a deepgym-side failure is an HTTP 504, which
  verl retries, never a wrong answer.
- The bodies verl, SkyRL and tinker-cookbook send (``fusion_fixtures/``, README there).
- The token (bearer or ``?token=``), an unknown language, ``/submit`` and ``/v1/ping``.

One server serves the module; its backend wraps the pool and can be told to fail its next runs
without a verdict (the sandbox never started).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from deepgym import DeepGym, Environment, languages
from deepgym.sandbox import make_backend
from deepgym.sandbox.base import Backend, Job, RawRun
from deepgym.server import fusion
from deepgym.server.app import create_app
from deepgym.server.runner import ThreadedServer
from deepgym.verdict import Outcome
from tests.languages.compile_sources import HUGE_ARRAY, NESTING, OWN_STDERR
from tests.server.conftest import TOKEN

sf = pytest.importorskip("sandbox_fusion.models")
summary_run_code_result = pytest.importorskip("sandbox_fusion").summary_run_code_result

pytestmark = pytest.mark.sandbox

FIXTURES = Path(__file__).parent / "fusion_fixtures"
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
ADD_CPP = '#include <cstdio>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}\n'
CASES = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}


class FailFirst:
    """The pool backend, whose next ``fail_next`` runs report no verdict (start failed)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.fail_next = 0
        self.injected = 0

    async def run(self, job: Job) -> RawRun:
        if self.fail_next > 0:
            self.fail_next -= 1
            self.injected += 1
            outcome = Outcome(report=None, in_play=False, start_failed=True, detail="injected")
            return RawRun(outcome=outcome, report=None, isolation=self.name)
        return await self.inner.run(job)

    async def close(self) -> None:
        await self.inner.close()


class Served:
    def __init__(self, server: ThreadedServer, backend: FailFirst) -> None:
        self.server = server
        self.backend = backend
        self.url = server.url
        self.verl_url = f"{server.url}/run_code?token={TOKEN}"

    def post(self, path: str, body: Any, token: str | None = TOKEN, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url + path, json=body, headers=headers, timeout=60, **kw)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    backend = FailFirst(make_backend("pool", workers=4))
    app = create_app(backend, token=TOKEN, close_backend=True)
    with ThreadedServer(app, grace_s=1.0) as server:
        yield Served(server, backend)


def _load_verl() -> tuple[ModuleType, ModuleType]:
    """verl's ``reward_score.sandbox_fusion`` package and its ``utils``, from the installed files
    (importing ``verl`` itself loads torch: half a minute)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("verl is not installed")
    here = Path(spec.submodule_search_locations[0]) / "utils" / "reward_score" / "sandbox_fusion"
    name = "_verl_sandbox_fusion"
    if name not in sys.modules:
        pkg_spec = importlib.util.spec_from_file_location(
            name, here / "__init__.py", submodule_search_locations=[str(here)]
        )
        assert pkg_spec is not None and pkg_spec.loader is not None
        module = importlib.util.module_from_spec(pkg_spec)
        sys.modules[name] = module
        pkg_spec.loader.exec_module(module)
    return sys.modules[name], sys.modules[f"{name}.utils"]


@pytest.fixture(scope="module")
def verl() -> tuple[ModuleType, ModuleType]:
    return _load_verl()


def _reply(r: httpx.Response) -> Any:
    """A ``/run_code`` reply, validated by SandboxFusion's own response model."""
    return sf.RunCodeResponse.parse_obj(r.json())


# -- SandboxFusion's models ----------------------------------------------------------------------
RUNS: list[
    tuple[dict[str, Any], str, str | None]
] = [  # (request, SandboxFusion's summary of the reply, run_result.stdout)
    ({"code": ADD, "language": "python", "stdin": "2 3\n"}, "Success", "5\n"),
    ({"code": "import sys\nprint('x')\nsys.exit(3)", "language": "python"}, "RunFailed", "x\n"),
    ({"code": "while True:\n    pass\n", "language": "python", "run_timeout": 1}, "RunTimeout", ""),
    ({"code": ADD_CPP, "language": "cpp", "stdin": "2 3"}, "Success", "5\n"),
    ({"code": "int main( {", "language": "cpp"}, "CompileFailed", None),
]
SUMMARY = sf.SummaryMapping(
    CompileFailed="CompileFailed", RunFailed="RunFailed", RunTimeout="RunTimeout"
)


def _judged(served: Served, body: dict[str, Any], tries: int = 3) -> Any:
    """``POST /run_code``, sent again (as verl does) while the reply is the 504 of a run that a
    loaded host held back past its backstop: no verdict, never the code's."""
    for _ in range(tries - 1):
        r = served.post("/run_code", body)
        if r.status_code != 504:
            return r
        assert "held back by the host" in r.json()["message"], r.text
    return served.post("/run_code", body)


def test_run_code_replies_are_sandbox_fusion_responses(served: Served) -> None:
    for body, summary, stdout in RUNS:
        sf.RunCodeRequest.parse_obj(body)  # SandboxFusion's request, as sent
        r = _judged(served, body)
        assert r.status_code == 200, r.text
        reply = _reply(r)
        assert summary_run_code_result(reply, SUMMARY) == summary, (body, r.text)
        assert reply.status == ("Success" if summary == "Success" else "Failed")
        if stdout is None:
            assert reply.run_result is None and reply.compile_result.return_code != 0
        else:
            assert reply.run_result.stdout == stdout
        assert (reply.compile_result is None) == (body["language"] == "python")


def test_a_compiler_that_fails_on_the_code_is_a_compile_result_never_a_504(
    served: Served, verl: tuple[ModuleType, ModuleType]
) -> None:
    """gcc's internal compiler error on 200,000 nested parentheses, and gcc reading the pipe its
    own diagnostics go to until its ``compile_timeout``: the code's failures, as SandboxFusion
    reports a compile's (never a 504, which verl would retry); ``stderr`` the compiler's words."""
    r = served.post("/run_code", {"code": NESTING["c"], "language": "c"})
    assert r.status_code == 200, r.text
    reply = _reply(r)
    assert summary_run_code_result(reply, SUMMARY) == "CompileFailed", r.text
    assert reply.run_result is None, r.text
    assert reply.compile_result.stderr.startswith("gcc: internal compiler error"), r.text
    plain = _reply(served.post("/run_code", {"code": "int main( {", "language": "cpp"}))
    assert plain.compile_result.stderr.startswith("main.cpp:"), plain  # no words of ours first
    _, utils = verl  # verl refuses "c" itself: g++ writing a 1 GiB array past its file size
    results, _ = utils.check_correctness(served.verl_url, CASES, HUGE_ARRAY["cpp"], language="cpp")
    assert list(results) == [-4, -4]  # verl's compile error
    body = {"code": OWN_STDERR["c"], "language": "c", "compile_timeout": 1}
    waits = served.post("/run_code", body)
    if waits.status_code == 504:  # only where the host held the compiler back (a loaded host)
        assert "held the compiler back" in waits.json()["message"], waits.text
        return
    assert waits.status_code == 200, waits.text
    timed = _reply(waits)
    assert timed.status == "Failed" and timed.run_result is None, waits.text
    assert timed.compile_result.status == "TimeLimitExceeded", waits.text


def test_run_code_returns_the_traceback_in_stderr(served: Served) -> None:
    code = 'import sys; sys.stderr.write("EEE\\n"); raise ValueError("boom")'
    r = served.post("/run_code", {"code": code, "language": "python"})
    assert r.status_code == 200, r.text
    reply = _reply(r)
    assert summary_run_code_result(reply, SUMMARY) == "RunFailed"
    assert reply.run_result.return_code == 1
    stderr = reply.run_result.stderr
    assert stderr.startswith("EEE\nTraceback (most recent call last):\n"), stderr
    assert 'File "/work/solution.py", line 1, in <module>' in stderr
    assert stderr.endswith("ValueError: boom\n") and "deepgym" not in stderr


def test_run_code_keeps_a_mib_of_a_flooded_stderr_and_its_end(served: Served) -> None:
    code = "import sys\nsys.stderr.write('e' * 2 * 2**20)\nraise SystemExit('the end')\n"
    r = served.post("/run_code", {"code": code, "language": "python"})
    assert r.status_code == 200, r.text
    stderr = _reply(r).run_result.stderr
    assert 2**20 - 100 <= len(stderr) <= 2**20  # SandboxFusion keeps 1 MiB too
    assert stderr.startswith("e" * 1000) and stderr.endswith("eeethe end\n")
    assert "bytes left out" in stderr


def test_a_run_our_backstop_cuts_short_is_a_504(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each test sleeps half its own limit; a backstop of ours at half their sum cuts the run
    # short: no verdict (a 504 to retry), never the answer's 0.
    monkeypatch.setattr(fusion, "backstop", lambda run, tests: run * tests / 2)
    body = {
        "dataset": "d",
        "id": 1,
        "completion": "```python\nimport time\ntime.sleep(0.5)\nprint(input())\n```",
        "config": {
            "run_timeout": 1,
            "provided_data": {"inputs": ["1", "2", "3"], "outputs": ["1", "2", "3"]},
        },
    }
    r = served.post("/submit", body)
    assert r.status_code == 504, r.text
    reply = sf.RunCodeResponse.parse_obj(r.json())
    assert reply.status == "SandboxError" and "backstop" in reply.message
    monkeypatch.undo()
    r = served.post("/submit", body)  # within the backstop: judged, accepted
    assert r.status_code == 200 and sf.EvalResult.parse_obj(r.json()).accepted, r.text


CPP_RAISE = '#include <csignal>\n#include <cstdio>\nint main(){raise(SIGTERM);std::puts("x");}\n'
CPP_ABORT = "#include <cstdlib>\nint main(){std::abort();}\n"


@pytest.mark.parametrize(("code", "signal"), [(CPP_RAISE, 15), (CPP_ABORT, 6)])
def test_a_program_ended_by_a_signal_has_minus_it_as_return_code(
    served: Served, code: str, signal: int
) -> None:
    """As SandboxFusion reports it: the answer is no pid 1, so its own signal ends it."""
    r = served.post("/run_code", {"code": code, "language": "cpp"})
    assert r.status_code == 200, r.text
    reply = _reply(r)
    assert summary_run_code_result(reply, SUMMARY) == "RunFailed", r.text
    assert reply.status == "Failed" and reply.run_result.status == "Finished", r.text
    assert reply.run_result.return_code == -signal and reply.run_result.stdout == "", r.text


LANGUAGES = {  # SandboxFusion's name (and deepgym's own "c") -> a program printing 42
    "nodejs": "console.log(6 * 7);\n",
    "java": "public class Main {\n"
    "  public static void main(String[] a) { System.out.println(42); }\n}\n",
    "rust": 'fn main() { println!("{}", 6 * 7); }\n',
    "go": 'package main\nimport "fmt"\nfunc main() { fmt.Println(6 * 7) }\n',
    "c": '#include <stdio.h>\nint main(void) { printf("%d\\n", 6 * 7); return 0; }\n',
}


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_each_language_runs(served: Served, language: str) -> None:
    r = served.post("/run_code", {"code": LANGUAGES[language], "language": language})
    assert r.status_code == 200, r.text
    reply = _reply(r)
    assert reply.status == "Success", r.text
    assert reply.run_result.stdout == "42\n"
    if fusion.language_of(language) in fusion.ONE_COMMAND:  # as SandboxFusion: no compile step
        assert reply.compile_result is None, r.text
    else:
        assert reply.compile_result.return_code == 0, r.text


def test_a_one_command_languages_failed_check_is_its_runs_failure(served: Served) -> None:
    """SandboxFusion runs PHP (Bash, Node.js, ...) as one command: a syntax error is the run's
    failure, with no ``compile_result``; ours is found by the check before the run, and told
    the same way."""
    if not languages.toolchain("php").present:
        pytest.skip("no php here")
    r = served.post("/run_code", {"code": "<?php echo 1 +;\n", "language": "php"})
    assert r.status_code == 200, r.text
    reply = _reply(r)
    assert reply.status == "Failed" and reply.compile_result is None, r.text
    assert reply.run_result.status == "Finished" and reply.run_result.return_code == 1, r.text
    assert "syntax error" in reply.run_result.stderr, r.text


def test_every_sandbox_fusion_name_is_a_deepgym_language() -> None:
    """The route's table maps each name SandboxFusion knows to one of deepgym's languages."""
    assert set(fusion.LANGUAGES.values()) <= set(languages.NAMES)
    assert fusion.ONE_COMMAND.issubset(languages.NAMES)


def test_php_without_its_opening_tag_runs_as_on_sandbox_fusion(served: Served) -> None:
    """SandboxFusion gives PHP code that does not start with ``<?php`` the tag; PHP itself
    would print the text."""
    if not languages.toolchain("php").present:
        pytest.skip("no php here")
    r = served.post("/run_code", {"code": '\n echo 6 * 7, "\\n";\n', "language": "php"})
    assert r.status_code == 200, r.text
    assert _reply(r).run_result.stdout == "42\n", r.text
    data = {"inputs": [""], "outputs": ["42"]}
    config = {"language": "php", "provided_data": data}
    body = {"dataset": "d", "id": 1, "completion": "```php\necho 6 * 7;\n```", "config": config}
    r = served.post("/submit", body)  # the same on /submit with its tests
    assert r.status_code == 200 and sf.EvalResult.parse_obj(r.json()).accepted, r.text


def test_a_kotlin_assert_is_checked(served: Served) -> None:
    """Kotlin's ``assert`` runs only with the JVM's ``-ea``: without it, a test program that
    asserts would pass whatever the answer."""
    if not languages.toolchain("kotlin").present:
        pytest.skip("no kotlinc here")
    code = 'fun main() {\n    assert(6 * 7 == 41) { "wrong" }\n    println("passed")\n}\n'
    r = served.post("/run_code", {"code": code, "language": "kotlin_script"})
    reply = _reply(r)
    assert reply.status == "Failed" and reply.run_result.return_code == 1, r.text
    assert "AssertionError: wrong" in reply.run_result.stderr and not reply.run_result.stdout


MD5_CPP = """#include <openssl/md5.h>
#include <cstdio>
#include <cstring>
int main() {
  char s[100];
  if (std::scanf("%99s", s) != 1) return 1;
  unsigned char d[MD5_DIGEST_LENGTH];
  MD5(reinterpret_cast<const unsigned char*>(s), std::strlen(s), d);
  for (int i = 0; i < 4; i++) std::printf("%02x", d[i]);
  std::puts("");
}
"""
MD5_CASES = {"inputs": ["abc\n", "hello\n"], "outputs": ["90015098\n", "5d41402a\n"]}
DIALECT_CPP = """#include <cstdio>
int main() {
#ifdef __STRICT_ANSI__
  std::printf("c++17 ");
#else
  std::printf("gnu++17 ");
#endif
#ifdef __OPTIMIZE__
  std::puts("-O");
#else
  std::puts("no -O");
#endif
}
"""


@pytest.mark.skipif(
    not Path("/usr/include/openssl/md5.h").exists(), reason="no libssl-dev (OpenSSL's headers)"
)
def test_cpp_is_built_as_sandbox_fusion_builds_it_on_its_routes_only(
    served: Served, verl: tuple[ModuleType, ModuleType]
) -> None:
    """SandboxFusion's C++ line on its routes (``-std=c++17``, no ``-O``, OpenSSL and threads
    linked): verl scores an OpenSSL ``MD5()`` answer right; deepgym's own line elsewhere
    (``-std=gnu++17 -O2``), where the same answer does not link (a compile error)."""
    _, utils = verl
    results, _ = utils.check_correctness(served.verl_url, MD5_CASES, MD5_CPP, language="cpp")
    assert list(results) == [True, True]
    reply = _reply(served.post("/run_code", {"code": DIALECT_CPP, "language": "cpp"}))
    assert reply.run_result.stdout == "c++17 no -O\n", reply
    env = Environment(
        name="ours",
        kind="script",
        language="cpp",
        test_cases=[{"stdin": "abc\n", "expected_stdout": "90015098\n"}],
    )
    with DeepGym(sandbox="strict") as dg:
        assert dg.run_one(env, MD5_CPP).error_type == "compile_error"
        flags = env.model_copy(
            update={"test_cases": [{"stdin": "", "expected_stdout": "gnu++17 -O\n"}]}
        )
        assert dg.run_one(flags, DIALECT_CPP).passed


# -- verl's own scoring ---------------------------------------------------------------------------
def test_verl_check_correctness_scores_as_against_sandbox_fusion(
    served: Served, verl: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, utils = verl
    # A loaded host holds a run back past its backstop: a 504, no verdict, which verl sends
    # again. Its 3 tries ran out at a load average of 20 on 2 cores: 10 here, so that the test
    # compares the scores, not the load.
    monkeypatch.setattr(utils, "MAX_RETRIES", 10)
    monkeypatch.setattr(utils, "INITIAL_RETRY_DELAY", 0.5)

    def check(code: str, language: str = "python", timeout: int = 10) -> list[Any]:
        results, _ = utils.check_correctness(
            served.verl_url, CASES, code, timeout=timeout, language=language
        )
        return list(results)

    assert check(ADD) == [True, True]
    assert check("a, b = map(int, input().split())\nprint(a + b if a < 3 else 0)\n") == [
        True,
        False,
    ]
    assert check("raise SystemExit(2)\n") == [-2, -2]  # runtime error
    assert check("while True:\n    pass\n", timeout=1) == [-3, -3]  # time limit
    assert check(ADD_CPP, "cpp") == [True, True]
    assert check(ADD_CPP.replace("a+b", "a*b"), "cpp") == [False, False]
    assert check("int main( {", "cpp") == [-4, -4]  # compile error


def test_verl_compute_score_is_the_share_of_cases_passed(
    served: Served, verl: tuple[ModuleType, ModuleType]
) -> None:
    package, _ = verl
    half = "a, b = map(int, input().split())\nprint(a + b if a < 3 else 0)\n"
    for code, want in [(ADD, 1.0), (half, 0.5), ("print(0)\n", 0.0)]:
        completion = f"Here it is:\n```python\n{code}```\n"
        score, _ = package.compute_score(served.verl_url, None, 1024, completion, json.dumps(CASES))
        assert score == want, code


def test_a_deepgym_failure_is_a_504_verl_retries(
    served: Served, verl: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, utils = verl
    monkeypatch.setattr(utils, "INITIAL_RETRY_DELAY", 0.01)  # verl waits 1 s, then 2 s
    one = {"inputs": ["1 2\n"], "outputs": ["3\n"]}
    # deepgym retries a run once itself: two failed starts are one 504 to verl, which retries.
    served.backend.fail_next, served.backend.injected = 2, 0
    results, meta = utils.check_correctness(served.verl_url, one, ADD)
    assert results == [True] and served.backend.injected == 2
    assert meta[0]["api_request_error"] is None
    # Failing every one of verl's tries (3): its API error (-1), never a wrong answer (False).
    served.backend.fail_next, served.backend.injected = 2 * utils.MAX_RETRIES, 0
    results, meta = utils.check_correctness(served.verl_url, one, ADD)
    served.backend.fail_next = 0
    assert results == [-1] and meta[0]["status"] == "api_error"
    assert "504" in meta[0]["api_request_error"]
    assert served.backend.injected == 2 * utils.MAX_RETRIES


def test_a_run_without_verdict_is_a_sandbox_error_504(served: Served) -> None:
    served.backend.fail_next = 2
    r = served.post("/run_code", {"code": "print(1)", "language": "python"})
    served.backend.fail_next = 0
    assert r.status_code == 504
    reply = _reply(r)
    assert reply.status == "SandboxError" and reply.run_result is None
    assert "injected" in reply.message and "retry" in reply.message


# -- the bodies trainers send ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_trainer_request_fixtures(served: Served, name: str) -> None:
    fixture = json.loads((FIXTURES / name).read_text())
    expect = fixture["expect"]
    # The URL as the trainer is given it (token in the query), then what it appends itself:
    # SkyRL appends "/run_code", so its URL ends in a throwaway query parameter.
    suffix = fixture.get("url_suffix")
    url = (
        f"{served.url}/run_code?token={TOKEN}&_="
        if suffix
        else f"{served.url}{fixture['path']}?token={TOKEN}"
    )
    r = httpx.post(url + (suffix or ""), json=fixture["body"], timeout=60)
    assert r.status_code == expect["http"], r.text
    if expect["http"] != 200:
        assert expect["error_mentions"] in r.json()["error"]["message"]
        return
    reply = _reply(r)
    assert reply.status == expect["status"]
    assert reply.run_result.status == expect["run_status"]
    assert reply.run_result.stdout == expect["stdout"]


# -- the guard, refusals, /submit, /v1/ping -------------------------------------------------------
def test_token_is_required_as_header_or_query(served: Served) -> None:
    body = {"code": "print(1)", "language": "python"}
    assert served.post("/run_code", body, token=None).status_code == 401
    assert served.post("/run_code?token=wrong", body, token=None).status_code == 401
    assert served.post(f"/run_code?token={TOKEN}", body, token=None).status_code == 200
    assert served.post("/run_code", body).status_code == 200
    assert served.post("/submit", {}, token=None).status_code == 401


def test_refusals_name_the_field(served: Served) -> None:
    r = served.post("/run_code", {"code": "print(1)", "language": "klingon"})
    assert r.status_code == 400 and "'klingon'" in r.json()["error"]["message"]
    r = served.post("/run_code", {"language": "python"})
    assert r.status_code == 400 and "code" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("files", {"../up.txt": "YQ=="}, "'..'"),
        ("files", {"/etc/x": "YQ=="}, "absolute"),
        ("files", {"solution.py": "YQ=="}, "program's own file"),
        ("files", {"a": "YQ==", "a/b": "YQ=="}, "inside another file"),
        ("files", {"a": "not base64!"}, "base64"),
        ("files", {f"f{i}": "" for i in range(257)}, "257 files"),
        ("fetch_files", ["../../etc/passwd"], "'..'"),
        ("fetch_files", ["/etc/passwd"], "absolute"),
    ],
)
def test_files_a_run_cannot_take_are_refused_naming_them(
    served: Served, field: str, value: Any, says: str
) -> None:
    """Before anything runs: a 400 naming the field and why (SandboxFusion would write or read
    outside its work dir; deepgym keeps both beneath it)."""
    r = served.post("/run_code", {"code": "print(1)", "language": "python", field: value})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert message.startswith(f"{field}:") and says in message, message


def _b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


FILES_PROGRAM = """import os
print(open("data/in.txt").read().split()[0])
open("out.txt", "w").write("written")
os.makedirs("deep/er", exist_ok=True)
open("deep/er/blob.bin", "wb").write(bytes(range(256)))
os.symlink("/etc/hostname", "link")
os.mkfifo("fifo")
"""


def test_files_in_and_fetch_files_out_with_the_sandbox_fusion_client(served: Served) -> None:
    """SandboxFusion's own client: ``files`` written into the program's work dir before it
    runs, ``fetch_files`` read back after it, keyed as asked, base64; a link, a FIFO and a
    missing file are not returned (the judge follows no link, waits on no FIFO)."""
    import sandbox_fusion as client

    request = client.RunCodeRequest(
        code=FILES_PROGRAM,
        language="python",
        files={"data/in.txt": _b64("forty-two\n"), "unused": None},
        fetch_files=["out.txt", "./deep/er/blob.bin", "link", "fifo", "missing"],
    )
    reply = client.run_code(request, endpoint=f"{served.url}/t/{TOKEN}", max_attempts=1)
    assert reply.status == "Success", reply
    assert reply.run_result.stdout == "forty-two\n"
    assert sorted(reply.files) == ["./deep/er/blob.bin", "out.txt"], reply.files
    assert base64.b64decode(reply.files["out.txt"]) == b"written"
    assert base64.b64decode(reply.files["./deep/er/blob.bin"]) == bytes(range(256))


CPP_FILES = (
    '#include <cstdio>\nint main(){FILE*f=fopen("in.txt","r");int a;'
    'if(fscanf(f,"%d",&a)!=1)return 3;FILE*g=fopen("out.txt","w");'
    'fprintf(g,"%d\\n",2*a);fclose(g);}\n'
)


def test_files_reach_a_compiled_program_and_come_back_after_a_time_limit(served: Served) -> None:
    """A C++ program reads its file and writes one; a Python one that writes a file and then
    loops forever is stopped at ``run_timeout``, and its file still comes back (read once the
    run ended, however it ended, as SandboxFusion reads them)."""
    body = {"code": CPP_FILES, "language": "cpp", "files": {"in.txt": _b64("21")}}
    reply = _reply(served.post("/run_code", {**body, "fetch_files": ["out.txt"]}))
    assert reply.status == "Success", reply
    assert base64.b64decode(reply.files["out.txt"]) == b"42\n"
    loops = "open('partial.txt', 'w').write('so far')\nwhile True:\n    pass\n"
    body = {"code": loops, "language": "python", "run_timeout": 1, "fetch_files": ["partial.txt"]}
    r = served.post("/run_code", body)
    if r.status_code == 504:  # only where a loaded host held the program back past its backstop
        assert "held back" in r.json()["message"], r.text
        return
    reply = _reply(r)
    assert reply.run_result.status == "TimeLimitExceeded", reply
    assert base64.b64decode(reply.files["partial.txt"]) == b"so far"


def test_files_in_and_out_on_the_strict_sandbox() -> None:
    """The strict sandbox's program process takes the run's files and hands its work dir back
    as the pool's does (its own io socket, from the strict host)."""
    app = create_app(make_backend("strict"), token=TOKEN, close_backend=True)
    body = {
        "code": "import helper\nprint(helper.VALUE + open('in.txt').read())\n"
        "open('out.txt', 'w').write('back')\n",
        "language": "python",
        "files": {"helper.py": _b64("VALUE = 'v:'\n"), "in.txt": _b64("x")},
        "fetch_files": ["out.txt"],
    }
    with ThreadedServer(app, grace_s=1.0) as server:
        r = httpx.post(f"{server.url}/t/{TOKEN}/run_code", json=body, timeout=60)
    reply = _reply(r)
    assert reply.status == "Success" and reply.run_result.stdout == "v:x\n", reply
    assert base64.b64decode(reply.files["out.txt"]) == b"back"


def test_files_past_the_room_for_them_are_named_not_cut(served: Served) -> None:
    """Files read back share ``FETCH_MAX_BYTES``: one that does not fit is not returned (never
    a truncated copy), and ``message`` names it."""
    from deepgym.judge.files import FETCH_MAX_BYTES

    code = f"open('big', 'wb').write(b'x' * {FETCH_MAX_BYTES + 1})\nopen('small', 'w').write('s')\n"
    body = {"code": code, "language": "python", "fetch_files": ["big", "small"]}
    reply = _reply(served.post("/run_code", body))
    assert reply.status == "Success", reply
    assert list(reply.files) == ["small"] and "'big'" in reply.message, reply.message


TESTS = [({"stdin": "2"}, "4"), ({"stdin": "3"}, "7")]
PROVIDED = {
    "test": {"test": [{"input": i, "output": {"stdout": o}} for i, o in TESTS]},
    "list": [{"input": i, "output": {"stdout": o}} for i, o in TESTS],
    "inputs": {"inputs": ["2", "3"], "outputs": ["4", "7"]},
    "input_output": {"input_output": json.dumps({"inputs": ["2", "3"], "outputs": ["4", "7"]})},
}


@pytest.mark.parametrize("form", sorted(PROVIDED))
def test_submit_takes_sandbox_fusion_provided_data(served: Served, form: str) -> None:
    body = {
        "dataset": "code_contests",
        "id": 7,
        "completion": "Doubling:\n```python\nprint(int(input()) * 2)\n```\n",
        "config": {"language": "python", "provided_data": PROVIDED[form]},
    }
    sf.SubmitRequest.parse_obj(body)
    r = served.post("/submit", body)
    assert r.status_code == 200, r.text
    result = sf.EvalResult.parse_obj(r.json())
    assert result.id == 7 and not result.accepted
    assert [t.passed for t in result.tests] == [True, False]
    assert result.extracted_code.strip() == "print(int(input()) * 2)"
    assert result.tests[0].exec_info.run_result.stdout == "4\n"


def test_submit_compares_words(served: Served) -> None:
    data = {"inputs": ["1 2"], "outputs": ["1  2"]}
    body = {"dataset": "d", "id": "a", "completion": "print(input())", "config": {}}
    body["config"] = {"provided_data": data}
    r = served.post("/submit", body)
    assert r.status_code == 200, r.text
    assert sf.EvalResult.parse_obj(r.json()).accepted


def test_ping(served: Served) -> None:
    r = httpx.get(served.url + "/v1/ping", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.json() == "pong"
    by_url = httpx.get(served.url + f"/v1/ping?token={TOKEN}")  # the URL a client was given
    assert by_url.status_code == 200 and by_url.json() == "pong"
    assert httpx.get(served.url + "/v1/ping").status_code == 401


def test_one_set_endpoint_with_the_token_in_the_path_serves_both_routes(served: Served) -> None:
    """The ``sandbox-fusion`` client appends each route's path to the one URL ``set_endpoint``
    gives it: ``?token=T&_=`` served only ``/run_code`` (its ``submit`` posted to /run_code,
    a 400); ``/t/<token>`` serves both, and the token never reaches the log."""
    import sandbox_fusion as client
    from sandbox_fusion import config

    from deepgym.server.logs import redact

    saved = (config.SANDBOX_ENDPOINT, config.DATASET_ENDPOINT)
    client.set_endpoint(f"{served.url}/t/{TOKEN}")
    try:
        ran = client.run_code(client.RunCodeRequest(code="print(6 * 7)", language="python"))
        assert ran.status == "Success" and ran.run_result.stdout == "42\n", ran
        request = client.SubmitRequest(
            dataset="d",
            id=1,
            completion="```python\nprint(int(input()) * 2)\n```",
            config=client.TestConfig(provided_data={"inputs": ["2", "5"], "outputs": ["4", "10"]}),
        )
        assert client.submit(request).accepted
        client.set_endpoint(f"{served.url}/t/wrong-token")
        with pytest.raises(Exception, match="401"):
            client.run_code(
                client.RunCodeRequest(code="print(1)", language="python"), max_attempts=1
            )
    finally:
        config.SANDBOX_ENDPOINT, config.DATASET_ENDPOINT = saved
    assert TOKEN not in redact(f'"POST /t/{TOKEN}/run_code HTTP/1.1" 200')
    # the path form is for these routes only: the rest of the API keeps its bearer token
    assert httpx.get(f"{served.url}/t/{TOKEN}/v1/environments").status_code in (401, 404)


# -- the dataset routes ---------------------------------------------------------------------------
def test_dataset_routes_serve_the_suites_as_sandbox_fusion_datasets(served: Served) -> None:
    """``/list_datasets`` names the suites; ``/list_ids`` and ``/get_prompts`` page through
    one (``offset``, ``limit``, ``config.language``); SandboxFusion's own client reads each
    reply into its models."""
    import sandbox_fusion as client
    from sandbox_fusion import config

    from deepgym import list_suites, load_suite

    r = httpx.get(f"{served.url}/list_datasets?token={TOKEN}", timeout=60)
    assert r.status_code == 200 and r.json() == list_suites() and "programs" in r.json()
    names = [e.name for e in load_suite("programs")]
    r = served.post("/list_ids", {"dataset": "programs", "config": {}, "offset": 1, "limit": 2})
    assert r.status_code == 200 and r.json() == names[1:3], r.text
    saved = config.SANDBOX_ENDPOINT, config.DATASET_ENDPOINT
    client.set_endpoint(f"{served.url}/t/{TOKEN}")
    try:
        got = client.get_prompts(
            client.GetPromptsRequest(dataset="programs", config=client.TestConfig(language="cpp"))
        )
        assert [p.id for p in got] == [n for n in names if n.startswith("cpp/")]
        assert all(p.labels["language"] == "cpp" and p.prompt for p in got)
        one = client.get_prompt_by_id(
            client.GetPromptByIdRequest(dataset="programs", id="c/sum_pairs", config={})
        )
        env = load_suite("programs")[names.index("c/sum_pairs")]
        assert one.id == "c/sum_pairs" and one.prompt == env.task
        assert one.labels == {
            "kind": "script",
            "language": "c",
            "difficulty": env.difficulty,
            "tags": list(env.tags),
        }
    finally:
        config.SANDBOX_ENDPOINT, config.DATASET_ENDPOINT = saved


def test_submit_scores_a_registered_datasets_problem_by_id(served: Served) -> None:
    """``/submit`` without ``provided_data``: the problem of ``dataset`` and ``id`` scores the
    completion's code with its own tests (a function task's calls here): its reference answer
    is accepted, a wrong one is not, each test's verdict in ``tests``."""
    import sandbox_fusion as client

    from deepgym import load_environment

    env = load_environment("humaneval/0")
    assert env.reference_solution
    endpoint = f"{served.url}/t/{TOKEN}"
    right = client.SubmitRequest(
        dataset="humaneval",
        id=0,
        completion=f"Here:\n```python\n{env.reference_solution}\n```\n",
        config=client.TestConfig(),
    )
    got = client.submit(right, endpoint=endpoint, max_attempts=1)
    assert got.accepted and got.tests and all(t.passed for t in got.tests), got
    assert got.extra == {"score": 1.0, "error_type": None}
    wrong = right.copy(update={"id": "humaneval/0", "completion": "```python\ndef x(): pass\n```"})
    got = client.submit(wrong, endpoint=endpoint, max_attempts=1)
    assert not got.accepted and got.id == "humaneval/0", got


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/get_prompts", {"dataset": "nope", "config": {}}, "dataset 'nope' is not served"),
        ("/get_prompt_by_id", {"dataset": "programs", "id": 7, "config": {}}, "id 7 is not"),
        (
            "/get_prompt_by_id",
            {"dataset": "programs", "id": "c/sum_pairs", "config": {"language": "go"}},
            "is in 'c'",
        ),
        ("/submit", {"dataset": "nope", "id": 1, "completion": "", "config": {}}, "provided_data"),
    ],
)
def test_dataset_refusals_name_what_is_unknown(
    served: Served, path: str, body: dict[str, Any], says: str
) -> None:
    r = served.post(path, body)
    assert r.status_code == 400 and says in r.json()["error"]["message"], r.text
