"""Hostile answers against the real sandboxes: each attack must fail, be judged, and leave no trace.

Threat model (DESIGN.md): the answer is adversarial code. It must not forge or reach its verdict,
see the test data or the verifier, reach the network or the host, outlive its run, or exhaust the
host. Each test asserts the result the contract prescribes and that the host is unaffected (no
process, run cgroup or file left behind, memory back). Every attack runs on every backend in
``conftest.SANDBOXES``.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import math
import os
import re
import secrets
import shutil
import socket
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deepgym import DeepGym, Environment, RunResult, VerifierError
from deepgym.judge.blame import BACKSTOP
from deepgym.judge.codes import KEPT_OUTPUT_BYTES
from deepgym.sandbox.spec import START_GRACE_S
from deepgym.sandbox.workspace import base_dir, base_dirs

from .conftest import ADD, ADD_OK, MODULE_SECRET_VAR, HostGuard, held_back

pytestmark = pytest.mark.sandbox

LIMITS: dict[str, Any] = {
    "timeout": 3.0,
    "case_timeout": 1.0,
    "memory_mb": 256,
    "max_processes": 16,
    "max_file_mb": 16,
}
NOTFOUND = "NOTFOUND"
JUDGE_SRC = Path(__file__).resolve().parents[2] / "src" / "deepgym" / "judge"


def fn_env(name: str, entry: str, cases: list[dict[str, Any]], **limits: Any) -> Environment:
    return Environment(name=name, entry_point=entry, test_cases=cases, **{**LIMITS, **limits})


def code_env(name: str, verifier_code: str, **limits: Any) -> Environment:
    return Environment(
        name=name, verifier_code=textwrap.dedent(verifier_code), **{**LIMITS, **limits}
    )


def answer(*parts: str, **values: Any) -> str:
    """An answer's source: ``parts`` dedented and joined, ``{name}`` filled by ``repr(value)``,
    and the sentinel ``NOTFOUND`` defined."""
    text = "\n".join(textwrap.dedent(part) for part in parts)
    for key, value in values.items():
        text = text.replace("{" + key + "}", repr(value))
    text = f"NOTFOUND = {NOTFOUND!r}\n" + text
    compile(text, "solution.py", "exec")  # an attack that cannot even parse proves nothing
    return text


def judged(r: RunResult, score: float = 0.0) -> None:
    assert r.has_verdict, r
    assert r.score == score, r
    assert r.passed is (score == 1.0), r


def within_backstop(elapsed: float, timeout: float) -> None:
    """A run ends by the host's own wall limit: the judge's backstop, and the start grace."""
    assert elapsed < BACKSTOP * timeout + START_GRACE_S + 2.5, elapsed


def host_env_files(token: str) -> list[Path]:
    """Files a backend keeps on the host for an environment whose data holds ``token``."""
    found = []
    for top in (t for base in base_dirs() for t in base.glob("deepgym-*")):
        for p in top.rglob("*"):
            with contextlib.suppress(OSError):
                if (
                    p.is_file()
                    and p.stat().st_size < 2**20
                    and token in p.read_text("utf-8", "replace")
                ):
                    found.append(p)
    return found


# -- 1, 2: infinite loops ---------------------------------------------------------------------

SPIN = "while True:\n    pass\n"
SLEEP = "import time\ntime.sleep(1000)\n"


@pytest.mark.parametrize("how", ["spin", "sleep"])
@pytest.mark.parametrize("where", ["import", "call"])
def test_infinite_loop_fails_each_case(dg: DeepGym, host: HostGuard, where: str, how: str) -> None:
    """Each case's limit is judged on CPU time: a spin uses it, a sleep waits past it; either
    fails the case (a judged 0). A spin the host held back past its backstop has no verdict."""
    body = SPIN if how == "spin" else SLEEP
    in_call = "def add(a, b):\n" + textwrap.indent(body, "    ")
    src = body + ADD_OK if where == "import" else in_call
    t0 = time.monotonic()
    r = dg.run(ADD, src)
    elapsed = time.monotonic() - t0
    within_backstop(elapsed, ADD.timeout)
    if how == "spin" and held_back(r):
        return
    judged(r, 0.0)
    assert r.error_type in (None, "solution_timeout"), r
    assert r.evidence.limit_fired in ("case_time", "cpu_time"), r.evidence
    assert all(not c.passed and "timeout" in c.message for c in r.cases), r.cases
    if how == "spin" and r.error_type is None:  # each case used its CPU time
        assert (r.evidence.solution_cpu_ms or 0.0) >= len(r.cases) * ADD.case_timeout * 900
    host.check()


@pytest.mark.parametrize("how", ["spin", "sleep"])
def test_infinite_loop_past_the_run_limit_is_solution_timeout(
    dg: DeepGym, host: HostGuard, how: str
) -> None:
    """A call that uses up the whole run's time (its CPU time, or waiting past it on the
    clock) is the policy's fault: judged 0. Held back by the host past the backstop: none."""
    env = fn_env(
        "attack-loop-run", "add", [{"args": [1, 2], "expected": 3}], timeout=2.0, case_timeout=10.0
    )
    body = SPIN if how == "spin" else SLEEP
    t0 = time.monotonic()
    r = dg.run(env, "def add(a, b):\n" + textwrap.indent(body, "    "))
    elapsed = time.monotonic() - t0
    within_backstop(elapsed, env.timeout)
    assert r.evidence.limit_fired in ("case_time", "cpu_time"), r.evidence
    if how == "spin" and held_back(r):
        return
    judged(r, 0.0)
    assert r.error_type == "solution_timeout", r
    if how == "spin":  # the evidence shows the time it used: the run's whole limit
        assert (r.evidence.solution_cpu_ms or 0.0) >= env.timeout * 1000.0, r.evidence
        assert "used the run's 2 s of CPU time" in (r.error or ""), r
    else:
        assert "waited past the run's 2 s limit" in (r.error or ""), r
    host.check()


# -- 3: memory bomb ---------------------------------------------------------------------------

BOMBS = {
    "import": "blob = bytearray(4 * 2**30)\n" + ADD_OK,
    "call": """
        def add(a, b):
            hoard = []
            while True:
                hoard.append(bytearray(2**24))
        """,
}


@pytest.mark.parametrize("where", sorted(BOMBS))
def test_memory_bomb(dg: DeepGym, host: HostGuard, where: str) -> None:
    # Time enough for the memory limit to fire first, even on a busy host.
    env = fn_env(
        "attack-memory", "add", [{"args": [1, 2], "expected": 3}], timeout=6.0, case_timeout=5.0
    )
    r = dg.run(env, answer(BOMBS[where]))
    judged(r, 0.0)
    assert r.error_type is None, r
    if r.evidence.limit_mechanism.get("memory", "").startswith("cgroup"):
        assert r.evidence.limit_fired == "memory", r.evidence
        assert (r.evidence.peak_memory_mb or 0.0) <= env.memory_mb + 1, r.evidence
        assert r.error == f"the answer hit its {env.memory_mb} MB memory limit", r
        killed = f"the answer hit its {env.memory_mb} MB memory limit (solution process killed"
        assert r.cases[0].message.startswith(killed), r.cases  # the case says so too
    host.check()


CHILD_BOMB = """
    import os

    def add(a, b):
        if os.fork() == 0:
            hoard = []
            while True:  # written, so every page counts at once (not left to a lazy zero page)
                hoard.append(b"x" * 2**24)
        while True:
            pass
    """


@pytest.mark.parametrize("past", ["case", "run"])
def test_a_memory_bomb_whose_call_then_times_out_names_the_memory_limit(
    dg: DeepGym, host: HostGuard, past: str
) -> None:
    """The memory limit is reached (a child the answer forked is killed for it) while the call
    spins on until its clock runs out: the cause and the evidence name the memory limit, and
    the contract's error type stays the clock's (a judged 0 either way)."""
    timeout = 2.0 if past == "run" else 6.0
    env = fn_env(
        "attack-memory-then-time", "add", [{"args": [1, 2], "expected": 3}],
        timeout=timeout, case_timeout=2.0,
    )  # fmt: skip
    r = dg.run(env, answer(CHILD_BOMB))
    if held_back(r):  # the spinning call, held back past its backstop on a loaded host
        return
    judged(r, 0.0)
    if not r.evidence.limit_mechanism.get("memory", "").startswith("cgroup"):
        pytest.skip("memory is limited by rlimits here: no cgroup to say the limit was reached")
    peak = r.evidence.peak_memory_mb
    if r.evidence.limit_fired == "case_time" and peak is not None and peak < 256:
        # Seen on 3.13 often and on 3.11 under CI's load: the forked child stops allocating at
        # 140 - 215 MB (a fork from the solution's threaded process), so the memory limit is
        # never reached and the clock is rightly the cause. Still a judged 0. A run that did
        # reach the limit (peak 256) and named the clock still fails below.
        pytest.xfail(f"the forked child stalled at {peak:.0f} MB, before the memory limit")
    assert r.evidence.limit_fired == "memory", r.evidence
    if past == "run":
        assert r.error_type == "solution_timeout", r
        assert re.fullmatch(
            r"the answer hit its 256 MB memory limit \(then the call used the run's [\d.]+ s of "
            r"CPU time\)",
            r.error,
        ), r.error
    else:
        assert r.error_type is None, r
        assert r.error == "the answer hit its 256 MB memory limit", r
        assert r.cases[0].message.startswith("timeout: the call used its"), r.cases
    host.check()


# -- 4, 5: fork bomb, daemon ------------------------------------------------------------------


def test_bounded_fork_bomb(dg: DeepGym, host: HostGuard) -> None:
    src = """
        import os, time

        def add(a, b):
            kids = 0
            for _ in range(10_000):
                try:
                    pid = os.fork()
                except OSError:
                    continue
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                kids += 1
            return -kids
        """
    # A refused fork still copies the parent first (~0.5 ms each on a busy host): give the
    # 10_000 tries time to finish, and accept a case timeout when the host is slower still.
    env = fn_env(
        "attack-fork", "add", [{"args": [1, 2], "expected": 3}], timeout=8.0, case_timeout=7.0
    )
    t0 = time.monotonic()
    r = dg.run(env, answer(src))
    within_backstop(time.monotonic() - t0, env.timeout)
    if held_back(r):
        return
    judged(r, 0.0)
    assert r.error_type is None, r
    got = re.search(r"got -(\d+)$", r.cases[0].message)
    if got is None:  # the loop did not finish in time
        assert r.cases[0].message.startswith("timeout"), r.cases
        assert r.evidence.limit_fired == "case_time", r.evidence
    else:
        assert int(got.group(1)) <= env.max_processes, r.cases
        if r.evidence.limit_mechanism.get("processes", "").startswith("cgroup"):
            assert r.evidence.limit_fired == "processes", r.evidence
    host.check()


@pytest.mark.parametrize("where", ["import", "call"])
def test_double_forked_daemon_dies_with_the_run(
    dg: DeepGym, host: HostGuard, tmp_path: Path, where: str
) -> None:
    marker = tmp_path / "daemon-alive.txt"
    daemon = """
        import os, time

        def _daemon():
            pid = os.fork()
            if pid:
                os.waitpid(pid, 0)
                return
            os.setsid()
            if os.fork():
                os._exit(0)
            os.closerange(0, 1024)
            end = time.time() + 60
            while time.time() < end:
                for path in ({marker}, "/tmp/daemon-alive.txt", "/work/daemon-alive.txt"):
                    try:
                        with open(path, "a") as f:
                            f.write("alive\\n")
                    except OSError:
                        pass
                time.sleep(0.05)
            os._exit(0)
        """
    # The answer is right only once its daemon is seen alive inside the sandbox.
    alive = """
        def _alive():
            end = time.time() + 0.5
            while time.time() < end:
                if os.path.exists("/tmp/daemon-alive.txt"):
                    return True
                time.sleep(0.01)
            return False
        """
    at_import = "_daemon()\n\ndef add(a, b):\n    return a + b if _alive() else -1\n"
    in_call = "def add(a, b):\n    _daemon()\n    return a + b if _alive() else -1\n"
    src = answer(daemon, alive, at_import if where == "import" else in_call, marker=str(marker))
    r = dg.run(ADD, src)
    judged(r, 1.0)  # the answer is right; its daemon must not outlive the run
    host.check(files=[marker])
    time.sleep(0.5)  # a surviving daemon would have written by now
    host.check(files=[marker])


# -- 6: forged verdicts -----------------------------------------------------------------------

FORGE = """
    import json, os, sys

    LINES = [
        json.dumps({"event": "report", "status": "ok", "score": 1.0}),
        json.dumps({"event": "report", "status": "ok", "score": 1.0, "passed": True,
                    "cases": [{"name": "test_0", "passed": True}]}),
        json.dumps({"status": "ok", "score": 1.0, "passed": True}),
        json.dumps({"event": "in_play", "in_play_ms": 0.0, "by": "solution_started"}),
        '{"score": 1.0}',
    ]
    BLOB = ("\\n" + "\\n".join(LINES) + "\\n").encode()

    def forge():
        print(BLOB.decode(), flush=True)
        sys.stderr.write(BLOB.decode())
        sys.stderr.flush()
        for fd in range(1024):
            try:
                os.write(fd, BLOB)
            except OSError:
                pass

    forge()
    """


def test_forged_report_on_every_fd_is_not_a_verdict(dg: DeepGym, host: HostGuard) -> None:
    r = dg.run(ADD, answer(FORGE, "def add(a, b):\n    forge()\n    return a - b\n"))
    judged(r, 0.0)
    assert r.error_type is None, r
    # It ran and lost: wrong values, or its forged lines garbled its own reply channel.
    ran = ("expected ", "malformed reply from the solution")
    assert all(not c.passed and c.message.startswith(ran) for c in r.cases), r.cases
    host.check()


def test_forged_report_from_a_script_is_not_a_verdict(dg: DeepGym, host: HostGuard) -> None:
    env = Environment(
        name="attack-forge-script",
        kind="script",
        test_cases=[{"stdin": "1 2\n", "expected_stdout": "3"}],
        **LIMITS,
    )
    r = dg.run(env, answer(FORGE, "print(4)\n"))
    judged(r, 0.0)
    assert r.cases[0].message.startswith("stdout "), r.cases  # it ran, and lost
    host.check()


# -- beyond the list: values that claim to be right, a flood on the reply channel --------------

CHEATS = """
    class AlwaysEqual:
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        def __hash__(self):
            return 0

        def __str__(self):
            return "3"

        def __repr__(self):
            return "3"

    class Str(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    class List(list):
        def __eq__(self, other):
            return True

    def add(a, b):
        return {cheat}
    """


@pytest.mark.parametrize("how", ["exact", "float", "unordered", "tokens"])
@pytest.mark.parametrize("cheat", ["AlwaysEqual()", "Str('x')", "List()", "float('nan')"])
def test_values_that_claim_equality_do_not_pass(
    dg: DeepGym, host: HostGuard, cheat: str, how: str
) -> None:
    env = fn_env(
        "attack-eq",
        "add",
        [{"args": [1, 2], "expected": 3 if how != "unordered" else [3]}],
        compare=how,
    )
    r = dg.run(env, answer(CHEATS.replace("{cheat}", cheat)))
    judged(r, 0.0)
    assert r.error_type is None, r
    host.check()


def test_flood_on_the_reply_channel(dg: DeepGym, host: HostGuard) -> None:
    """Bytes with no newline on the solution's own reply pipe: the verifier must not drown."""
    src = """
        import os

        def add(a, b):
            chunk = b"z" * 2**20
            while True:
                os.write(4, chunk)
        """
    t0 = time.monotonic()
    r = dg.run(ADD, answer(src))
    within_backstop(time.monotonic() - t0, ADD.timeout)
    if held_back(r):
        return
    judged(r, 0.0)
    assert r.error_type in (None, "solution_timeout"), r
    host.check()


# -- 7, 8: test data and the verifier ---------------------------------------------------------

PROBE = """
    import glob, os, stat, sys

    SKIP = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/proc", "/sys",
            os.path.realpath(sys.base_prefix)}
    NAMES = {"test_cases.json", "verifier.py", "job.json"}

    def probe(token, plant=False):
        if plant:  # the control: a file it can reach that holds the token
            with open("/tmp/planted.txt", "w") as f:
                f.write(token)
        found = []
        direct = [
            "/judge/env/test_cases.json", "/judge/env/verifier.py", "/judge/job.json",
            "/proc/1/root/judge/env/test_cases.json", "/proc/1/cwd/job.json",
            "../judge/env/test_cases.json", "/tmp/job.json",
            *glob.glob("/tmp/deepgym-*/envs/*/*"), *glob.glob("/tmp/deepgym-*/*/*"),
            *glob.glob("/dev/shm/deepgym-*/envs/*/*"), *glob.glob("/dev/shm/deepgym-*/*/*"),
        ]
        for path in direct:
            try:
                with open(path, "rb") as f:
                    f.read(1)
                found.append("opened " + path)
            except OSError:
                pass
        for root, dirs, files in os.walk("/"):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in SKIP]
            for name in files:
                path = os.path.join(root, name)
                if name in NAMES and not path.startswith("/opt/deepgym/"):
                    found.append("named " + path)
                try:
                    st = os.stat(path)
                    if stat.S_ISREG(st.st_mode) and st.st_size < 2**20:
                        with open(path, "rb") as f:
                            if token.encode() in f.read():
                                found.append("holds the token: " + path)
                except OSError:
                    pass
        return NOTFOUND if not found else found
    """


def test_test_data_is_out_of_reach(dg: DeepGym, host: HostGuard) -> None:
    token = "tok-" + secrets.token_hex(16)
    cases = [
        {"args": [token], "expected": NOTFOUND},
        {"args": [token, True], "expected": ["holds the token: /tmp/planted.txt"]},
    ]
    env = fn_env("attack-read-data", "probe", cases, case_timeout=4.0, timeout=8.0)
    r = dg.run(env, answer(PROBE))
    assert r.has_verdict, r
    # The probe found nothing of the test data, and found the file it planted itself.
    assert r.score == 1.0, r.cases
    host.check()


def test_verifier_source_is_out_of_reach(dg: DeepGym, host: HostGuard) -> None:
    token = "tok-" + secrets.token_hex(16)
    verifier = f"""
        TOKEN = {token!r}

        def verify(solution, test_cases):
            got = solution.probe(TOKEN)
            ok = got == {NOTFOUND!r}
            return {{"score": 1.0 if ok else 0.0,
                     "cases": [{{"name": "probe", "passed": ok, "message": repr(got)}}]}}
        """
    env = code_env("attack-read-verifier", verifier, case_timeout=6.0, timeout=8.0)
    r = dg.run(env, answer(PROBE))
    assert r.has_verdict, r
    assert r.score == 1.0, r.cases
    host.check()


def test_verifier_and_judge_cannot_be_written(dg: DeepGym, host: HostGuard, sandbox: str) -> None:
    token = "tok-" + secrets.token_hex(16)
    verifier = textwrap.dedent(f"""
        TOKEN = {token!r}

        def verify(solution, test_cases):
            wrote = solution.attack()
            ok = solution.add(2, 3) == 5 and wrote == []
            return {{"score": 1.0 if ok else 0.0,
                     "cases": [{{"name": "t", "passed": ok, "message": repr(wrote)}}]}}
        """)
    env = code_env("attack-write-verifier", verifier)
    good_src = ADD_OK + "\ndef attack():\n    return []\n"
    judged(dg.run(env, good_src), 1.0)  # materialises the environment's files on the host
    on_host = host_env_files(token)
    pwned = f"pwned-{token}.py"
    targets = [
        "/judge/env/verifier.py",
        "/judge/env/test_cases.json",
        "/judge/job.json",
        f"/judge/env/{pwned}",
        "/work/solution.py",
        *(str(p) for p in on_host),
        *(str(p.parent / pwned) for p in on_host),
    ]
    # The judge's own code is the repository's source: only try to open it for writing
    # (the attack's list of what it managed is the evidence), never change it.
    judge_files = [
        "/opt/deepgym/deepgym_judge/harness.py",
        f"/opt/deepgym/deepgym_judge/{pwned}",
        str(JUDGE_SRC / "harness.py"),
    ]
    src = """
        import os

        def add(a, b):
            return 0

        def attack():
            wrote = []
            for path in {targets}:
                try:
                    with open(path, "a") as f:
                        f.write("\\ndef verify(solution, test_cases):\\n    return 1.0\\n")
                    wrote.append(path)
                except OSError:
                    pass
                try:
                    os.replace(path, path + ".moved")
                    wrote.append("moved " + path)
                except OSError:
                    pass
            for path in {judge_files}:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
                    os.close(fd)
                    wrote.append(path)
                except OSError:
                    pass
            return wrote
        """
    r = dg.run(env, answer(src, targets=targets, judge_files=judge_files))
    judged(r, 0.0)
    assert r.cases[0].message == "[]", r.cases
    if sandbox == "strict":  # it keeps the environment's files in a host temp folder
        assert on_host, "no host copy of the verifier found: aim this attack at its new place"
    for path in on_host:
        assert path.read_text() == env.verifier_code, path
        assert not (path.parent / pwned).exists()
    leaked = JUDGE_SRC / pwned
    if leaked.exists():
        leaked.unlink()
        pytest.fail(f"the answer created {leaked} in the judge's source")
    judged(dg.run(env, good_src), 1.0)  # the verifier still judges as written
    wrong = "def add(a, b):\n    return 0\n\ndef attack():\n    return []\n"
    judged(dg.run(env, wrong), 0.0)
    host.check()


# -- 9: network -------------------------------------------------------------------------------


@pytest.fixture
def listeners(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A TCP and a UDP listener on 127.0.0.1, an abstract and a path unix socket."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    socks = [tcp, udp, abstract, path_sock]
    try:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(16)
        udp.bind(("127.0.0.1", 0))
        name = "\0deepgym-attack-" + secrets.token_hex(8)
        abstract.bind(name)
        abstract.listen(16)
        sock_path = str(tmp_path / "listener.sock")
        path_sock.bind(sock_path)
        path_sock.listen(16)
        for s in socks:
            s.setblocking(False)
        yield {
            "tcp": tcp.getsockname()[1],
            "udp": udp.getsockname()[1],
            "abstract": name,
            "path": sock_path,
            "socks": socks,
        }
    finally:
        for s in socks:
            s.close()


def _accepted_nothing(s: socket.socket) -> bool:
    try:
        if s.type == socket.SOCK_DGRAM:
            s.recvfrom(65536)
        else:
            conn, _ = s.accept()
            conn.close()
    except BlockingIOError:
        return True
    return False


def test_no_network_to_the_host(dg: DeepGym, host: HostGuard, listeners: dict[str, Any]) -> None:
    src = """
        import socket

        def probe():
            reached = []
            attempts = [
                ("tcp 127.0.0.1", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", {tcp})),
                ("tcp localhost", socket.AF_INET, socket.SOCK_STREAM, ("localhost", {tcp})),
                ("abstract", socket.AF_UNIX, socket.SOCK_STREAM, {abstract}),
                ("path", socket.AF_UNIX, socket.SOCK_STREAM, {path}),
            ]
            for label, family, kind, address in attempts:
                s = socket.socket(family, kind)
                s.settimeout(0.3)
                try:
                    s.connect(address)
                    s.sendall(b"hello")
                    reached.append(label)
                except OSError:
                    pass
                finally:
                    s.close()
            try:
                u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                for _ in range(5):
                    u.sendto(b"hello", ("127.0.0.1", {udp}))
                u.close()
            except OSError:
                pass
            return reached or NOTFOUND
        """
    values = {k: v for k, v in listeners.items() if k != "socks"}
    code = answer(src, **values)
    # Control: run in this process, the same probe reaches every listener.
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    assert {"tcp 127.0.0.1", "abstract", "path"} <= set(namespace["probe"]())
    time.sleep(0.1)
    for s in listeners["socks"]:
        assert not _accepted_nothing(s), f"the control did not reach {s}"
        while not _accepted_nothing(s):  # drain what the control sent
            pass
    env = fn_env("attack-network", "probe", [{"args": [], "expected": NOTFOUND}])
    r = dg.run(env, code)
    assert r.has_verdict, r
    assert r.score == 1.0, r.cases
    time.sleep(0.1)
    for s in listeners["socks"]:
        assert _accepted_nothing(s), f"the answer reached {s}"
    host.check()


# -- 10, 11: disk and output floods -----------------------------------------------------------


@pytest.mark.timeout(60)
def test_two_gigabyte_file(dg: DeepGym, host: HostGuard, tmp_path: Path) -> None:
    token = secrets.token_hex(8)
    targets = [f"/work/big-{token}.bin", f"/tmp/big-{token}.bin", str(tmp_path / "big.bin")]
    free_before = {
        d: shutil.disk_usage(d).free for d in ("/work", tempfile.gettempdir(), str(base_dir()))
    }
    src = """
        def add(a, b):
            chunk = b"x" * 2**20
            written = []
            for path in {targets}:
                n = 0
                try:
                    with open(path, "wb") as f:
                        for _ in range(2048):
                            f.write(chunk)
                            n += 1
                except OSError:
                    pass
                written.append(n)
            return written
        """
    env = fn_env("attack-disk", "add", [{"args": [1, 2], "expected": 3}], max_file_mb=64)
    t0 = time.monotonic()
    try:
        r = dg.run(env, answer(src, targets=targets))
    finally:
        escaped = [p for p in targets if Path(p).exists()]
        for p in escaped:  # never leave 2 GB behind, even when the test fails
            Path(p).unlink()
    assert not escaped, f"the answer wrote {escaped} on the host"
    judged(r, 0.0)
    assert time.monotonic() - t0 < 10.0
    got = re.search(r"got \[(\d+), (\d+), (\d+)\]$", r.cases[0].message)
    if got is not None:  # it finished (not killed by the memory limit): the file size limit held
        work, tmp, host_file = map(int, got.groups())
        assert work <= env.max_file_mb and tmp <= env.max_file_mb and host_file == 0, r.cases
    for d, free in free_before.items():
        assert shutil.disk_usage(d).free > free - 512 * 2**20, d
    host.check(files=targets)


def test_no_uncapped_tmpfs(dg: DeepGym, host: HostGuard) -> None:
    """Many small files wherever the answer can write: only the capped tmpfs mounts take any.

    tmpfs pages are not process memory (RLIMIT_AS misses them) and a host may have no memory
    cgroup, so an uncapped writable mount would let an answer fill the host's RAM.
    """
    src = """
        import os

        def add(a, b):
            chunk = b"x" * 2**20
            budget = 200  # MiB in all: under the memory limit, so the answer lives to report
            written = {}
            for d in ("/", "/opt", "/dev", "/dev/shm", "/proc", "/judge", "/work", "/tmp"):
                n = 0
                for i in range(1000):
                    if budget <= 0:
                        break
                    try:
                        with open(os.path.join(d, f"fill-{i}.bin"), "wb") as f:
                            for _ in range(8):
                                f.write(chunk)
                                n += 1
                                budget -= 1
                    except OSError:
                        break
                written[d] = n
            return written
        """
    env = fn_env("attack-tmpfs", "add", [{"args": [1, 2], "expected": 3}], case_timeout=5.0)
    r = dg.run(env, answer(src))
    judged(r, 0.0)
    got = re.search(r"got (\{.*\})$", r.cases[0].message)
    assert got, r.cases
    written = ast.literal_eval(got.group(1))
    cap = 2 * env.max_file_mb  # what a capped mount holds, with room for a partial file
    for d, mib in written.items():
        assert mib <= (cap if d in ("/dev/shm", "/work", "/tmp") else 0), written
    host.check()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_gigabyte_output_flood(dg: DeepGym, host: HostGuard, stream: str) -> None:
    src = """
        import sys

        def add(a, b):
            chunk = b"y" * 2**20
            for _ in range(1024):
                sys.{stream}.buffer.write(chunk)
            return a - b
        """.replace("{stream}", stream)
    t0 = time.monotonic()
    r = dg.run(ADD, answer(src))
    elapsed = time.monotonic() - t0
    judged(r, 0.0)
    assert elapsed < 6.0, elapsed
    assert r.evidence.limit_fired == "output_size", r.evidence
    assert len(r.stdout) <= KEPT_OUTPUT_BYTES and len(r.stderr) <= KEPT_OUTPUT_BYTES
    host.check()


def test_script_output_flood(dg: DeepGym, host: HostGuard) -> None:
    env = Environment(
        name="attack-flood-script",
        kind="script",
        test_cases=[{"stdin": "1 2\n", "expected_stdout": "3"}],
        **LIMITS,
    )
    src = "import sys\nfor _ in range(1024):\n    sys.stdout.buffer.write(b'3' * 2**20)\n"
    t0 = time.monotonic()
    r = dg.run(env, src)
    judged(r, 0.0)
    assert time.monotonic() - t0 < 6.0
    host.check()


# -- 12: killing the parent -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kill",
    [
        "os.kill(os.getppid(), 9)",
        "os.kill(-1, 9)",
        "os.killpg(0, 9)",
        "os.kill(1, 9)",
        "os.kill({test_pid}, 9)",
        "os.kill({test_parent}, 9)",
    ],
)
def test_killing_the_parent(dg: DeepGym, host: HostGuard, kill: str) -> None:
    body = kill.replace("{test_pid}", str(os.getpid())).replace("{test_parent}", str(os.getppid()))
    src = f"""
        import os

        def _kill():
            try:
                {body}
            except OSError:
                pass

        _kill()

        def add(a, b):
            _kill()
            return a + b
        """
    r = dg.run(ADD, answer(src))
    assert r.has_verdict, r
    assert r.score in (0.0, 1.0), r
    assert r.error_type is None, r
    os.kill(os.getppid(), 0)  # our parent lives (raises if not)
    judged(dg.run(ADD, ADD_OK), 1.0)  # and the client still works
    host.check()


# -- 13: secrets ------------------------------------------------------------------------------


def test_host_secrets_are_invisible(
    dg: DeepGym, host: HostGuard, monkeypatch: pytest.MonkeyPatch, module_secret: str
) -> None:
    secret = "secret-" + secrets.token_hex(16)
    monkeypatch.setenv("DEEPGYM_ATTACK_SECRET", secret)
    names = ["DEEPGYM_ATTACK_SECRET", MODULE_SECRET_VAR]
    digests = [hashlib.sha256(v.encode()).hexdigest() for v in (secret, module_secret)]
    shadow = Path("/etc/shadow")
    shadow_digest = (
        hashlib.sha256(shadow.read_bytes()).hexdigest()
        if os.access(shadow, os.R_OK)
        else "no-shadow-on-host"
    )
    # One probe for both sides: the verifier's process must not see them either.
    probe = textwrap.dedent("""
        import hashlib, os

        def look(names, digests, shadow_digest):
            found = []
            for name in names:
                if name in os.environ:
                    found.append("env name " + name)
            for key, value in os.environ.items():
                if hashlib.sha256(value.encode()).hexdigest() in digests:
                    found.append("env value " + key)
            procs = [p for p in os.listdir("/proc") if p.isdigit()]
            paths = ["/etc/shadow", "/proc/1/root/etc/shadow"]
            paths += [f"/proc/{p}/{f}" for p in procs for f in ("environ", "cmdline")]
            for path in paths:
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if hashlib.sha256(data).hexdigest() == shadow_digest:
                    found.append("shadow " + path)
                if any(n.encode() in data for n in names):
                    found.append("environ " + path)
            return found
        """)
    verifier = probe + textwrap.dedent(f"""
        def verify(solution, test_cases):
            args = ({names!r}, {digests!r}, {shadow_digest!r})
            mine = look(*args)
            theirs = solution.look(*args)
            env = solution.environ()
            ok = mine == [] and theirs == []
            return {{"score": 1.0 if ok else 0.0,
                     "cases": [{{"name": "secrets", "passed": ok,
                                 "message": repr((mine, theirs, sorted(env)))}}]}}
        """)
    # Control: run in this process, the same probe finds the secrets.
    namespace: dict[str, Any] = {}
    exec(probe, namespace)
    control = namespace["look"](names, digests, shadow_digest)
    assert {f"env name {n}" for n in names} <= set(control), control
    assert f"env value {names[0]}" in control, control
    if shadow_digest != "no-shadow-on-host":
        assert "shadow /etc/shadow" in control, control
    env = code_env("attack-secrets", verifier)
    src = probe + "\ndef environ():\n    print(dict(os.environ))\n    return dict(os.environ)\n"
    r = dg.run(env, src)
    assert r.has_verdict, r
    assert r.score == 1.0, r.cases
    dump = r.model_dump_json()
    for value in (secret, module_secret):
        assert value not in dump
    host.check()


# -- 14: concurrent runs ----------------------------------------------------------------------


def test_concurrent_runs_do_not_see_each_other(dg: DeepGym, host: HostGuard) -> None:
    src = """
        import glob, os, time

        ME = {me}
        PLACES = ("/work", "/tmp", "/dev/shm")

        def probe():
            for d in PLACES:
                with open(os.path.join(d, "marker-" + ME), "w") as f:
                    f.write(ME)
            seen = []
            end = time.monotonic() + 0.8
            while time.monotonic() < end:
                for d in PLACES:
                    for p in glob.glob(os.path.join(d, "marker-*")):
                        if not p.endswith("marker-" + ME) and p not in seen:
                            seen.append(p)
                time.sleep(0.02)
            return seen or NOTFOUND
        """
    # The verifier reports when the probe ran, to show that the two runs overlapped.
    verifier = f"""
        import time

        def verify(solution, test_cases):
            start = time.time()
            got = solution.probe()
            ok = got == {NOTFOUND!r}
            window = f"{{start}} {{time.time()}}"
            return {{"score": 1.0 if ok else 0.0,
                     "cases": [{{"name": "probe", "passed": ok, "message": repr(got)}},
                               {{"name": "window", "passed": True, "message": window}}]}}
        """
    env = code_env("attack-concurrent", verifier)
    outputs = [answer(src, me=me) for me in ("alpha", "beta")]
    batch = dg.run_batch(env, outputs, max_parallel=2)
    for r in batch.results:
        assert r.has_verdict, r
        assert r.score == 1.0, r.cases
    windows = [tuple(map(float, r.cases[1].message.split())) for r in batch.results]
    assert max(w[0] for w in windows) < min(w[1] for w in windows), windows  # they overlapped
    host.check()


# -- 15: the contract's examples, as written --------------------------------------------------

FLAKY_VERIFIER = """
    import os, sys

    def _answer_path():
        # The judge of the run in progress (a pool worker keeps older ones in memory).
        for name, module in list(sys.modules.items()):
            current = getattr(module, "_CURRENT", None) if name.endswith(".harness") else None
            if current is not None:
                return current.job["answer_path"]
        raise LookupError("no job")

    def verify(solution, test_cases):
        # An outage stand-in that strikes one run of a batch before its answer is in play:
        # the answer file's size (os.stat, not open) picks the run without using the answer.
        if os.stat(_answer_path()).st_size == 0:
            raise RuntimeError("verifier outage")
        return 1.0 if solution.add(2, 3) == 5 else 0.0
    """


def test_contract_examples_against_a_real_batch(dg: DeepGym, host: HostGuard) -> None:
    env = code_env("attack-contract", FLAKY_VERIFIER)
    outputs = [ADD_OK, "def add(a, b):\n    return a - b\n", ""]
    solutions = outputs

    # The "Verdicts" example.
    batch = dg.run_batch(env, outputs)
    rewards = [r.score if r.has_verdict else None for r in batch.results]  # None: leave it out
    assert rewards == [1.0, 0.0, None], batch.results
    assert batch.results[2].error_type == "verifier_error"

    # The GRPO example.
    batch = dg.run_batch(env, solutions, max_parallel=8)
    judged = [r.score for r in batch.results if r.has_verdict]
    if judged:
        mean = sum(judged) / len(judged)
        std = (sum((s - mean) ** 2 for s in judged) / len(judged)) ** 0.5
        advantages = [
            (r.score - mean) / (std + 1e-8) if r.has_verdict else None  # None: leave it out
            for r in batch.results
        ]
    assert judged == [1.0, 0.0]
    assert advantages[2] is None
    assert advantages[0] is not None and advantages[1] is not None
    assert math.isclose(advantages[0], 1.0, rel_tol=1e-6)
    assert math.isclose(advantages[1], -1.0, rel_tol=1e-6)

    # The totals stay conservative.
    assert batch.no_verdict_count == 1 and batch.judged_count == 2
    assert batch.passed == 1 and batch.pass_rate == pytest.approx(1 / 3)
    assert batch.judged_pass_rate == pytest.approx(0.5)
    host.check()


# -- 16: dating a verifier's failure ----------------------------------------------------------

DATING = {
    "raise_before": (
        """
        def verify(solution, test_cases):
            raise RuntimeError("broken before the answer")
        """,
        False,
        "verifier_error",
    ),
    "raise_after": (
        """
        def verify(solution, test_cases):
            solution.add(1, 2)
            raise RuntimeError("broken while handling the answer")
        """,
        True,
        "solution_error",
    ),
    "nan_before": (
        """
        def verify(solution, test_cases):
            return float("nan")
        """,
        False,
        "invalid_score",
    ),
    "nan_after": (
        """
        def verify(solution, test_cases):
            solution.add(1, 2)
            return float("nan")
        """,
        True,
        "solution_error",
    ),
    # A returned status cannot mask the answer's sample, nor stand beside a score: here the
    # score is what the answer computed, as a verifier that returns the answer's value has it.
    "status_after": (
        """
        def verify(solution, test_cases):
            return {"status": "sandbox_error", "score": solution.add(0.5, 0.5), "passed": True}
        """,
        True,
        "solution_error",
    ),
    "status_before": (
        """
        def verify(solution, test_cases):
            return {"status": "timeout"}
        """,
        False,
        "verifier_error",
    ),
    "exit_2": (
        """
        import sys

        def verify(solution, test_cases):
            sys.exit(2)
        """,
        False,
        "verifier_error",
    ),
    "exit_2_after": (
        """
        import sys

        def verify(solution, test_cases):
            solution.add(1, 2)
            sys.exit(2)
        """,
        False,
        "verifier_error",
    ),
}


@pytest.mark.parametrize("case", sorted(DATING))
def test_verifier_failures_are_dated(dg: DeepGym, host: HostGuard, case: str) -> None:
    code, verdict, error_type = DATING[case]
    r = dg.run(code_env(f"attack-dating-{case}", code), ADD_OK)
    assert r.has_verdict is verdict, r
    assert r.error_type == error_type, r
    assert r.score == 0.0 and not r.passed, r
    host.check()


def test_verifier_that_exits_without_reporting_raises(dg: DeepGym, host: HostGuard) -> None:
    env = code_env(
        "attack-dating-silent",
        """
        import os

        def verify(solution, test_cases):
            os._exit(0)
        """,
    )
    with pytest.raises(VerifierError) as info:
        dg.run(env, ADD_OK)
    assert info.value.result is not None and not info.value.result.has_verdict
    batch = dg.run_batch(env, [ADD_OK])
    assert not batch.results[0].has_verdict
    assert batch.results[0].error_type == "verifier_error"
    host.check()


def test_the_answer_cannot_make_a_user_namespace(dg: DeepGym, host: HostGuard) -> None:
    """A user namespace of its own would give the answer capabilities over new namespaces and the
    kernel's less-trodden paths: unshare(CLONE_NEWUSER) must fail. The probe first checks that
    the same call works where nothing forbids it (a forked child here, on the host)."""
    probe = textwrap.dedent("""
        import ctypes, os

        def try_userns():
            pid = os.fork()
            if pid == 0:
                libc = ctypes.CDLL(None, use_errno=True)
                os._exit(0 if libc.unshare(0x10000000) == 0 else 1)
            _, status = os.waitpid(pid, 0)
            return "made" if os.WEXITSTATUS(status) == 0 else "refused"
    """)
    namespace: dict[str, Any] = {}
    exec(probe, namespace)
    assert namespace["try_userns"]() == "made"  # the probe works where nothing forbids it
    env = fn_env("attack-userns", "try_userns", [{"args": [], "expected": "refused"}])
    r = dg.run(env, probe)
    assert r.has_verdict and r.score == 1.0, r
    host.check()


PRIVILEGE_PROBE = textwrap.dedent("""
    import ctypes, os

    def privileges():
        libc = ctypes.CDLL(None, use_errno=True)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [(n, ctypes.c_uint32) for n in ("effective", "permitted", "inheritable")]

        header, data = Header(0x20080522, 0), (Data * 2)()
        assert libc.capget(ctypes.byref(header), ctypes.byref(data)) == 0
        caps = sum(d.effective | d.permitted | d.inheritable for d in data)
        bounding = sum(1 for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1)

        def refused(ret):
            return "allowed" if ret == 0 else os.strerror(ctypes.get_errno())

        try:
            os.setuid(0)
            setuid = "allowed"
        except OSError:  # EPERM, or EINVAL where no uid 0 is mapped at all
            setuid = "refused"
        return {
            "uid": os.getuid(),
            "capabilities": caps,
            "bounding_set": bounding,
            "mount": refused(libc.mount(b"tmpfs", b"/work", b"tmpfs", 0, None)),
            "umount": refused(libc.umount2(b"/proc", 2)),
            "sethostname": refused(libc.sethostname(b"mine", 4)),
            "setuid": setuid,
        }
""")


def test_the_answer_holds_no_privilege(dg: DeepGym, host: HostGuard) -> None:
    """uid 65534, no capability in any set, an empty bounding set, and every privileged call
    refused: the answer can neither uncover what is hidden from it nor change its identity."""
    refused = os.strerror(1)  # EPERM
    expected = {
        "uid": 65534,
        "capabilities": 0,
        "bounding_set": 0,
        "mount": refused,
        "umount": refused,
        "sethostname": refused,
        "setuid": "refused",
    }
    env = fn_env("attack-privileges", "privileges", [{"args": [], "expected": expected}])
    r = dg.run(env, PRIVILEGE_PROBE)
    assert r.has_verdict and r.score == 1.0, r.cases[0].message
    host.check()


# -- an exit code of ours, from the answer --------------------------------------------------------

SETUP_CODE = 121  # deepgym.judge.codes.SETUP_FAILED: a solution process's own set-up failed


@pytest.mark.parametrize("how", ["script", "call"])
def test_the_answer_exiting_with_the_set_up_failure_code_is_its_own_zero(
    dg: DeepGym, host: HostGuard, how: str
) -> None:
    """The number that says a solution process's set-up failed (ours: no verdict) is the
    answer's own exit code once it runs: its 0, never a way to escape it."""
    if how == "script":
        env = Environment(
            name="attack-exit-code",
            kind="script",
            test_cases=[{"stdin": "", "expected_stdout": "3\n"}],
            **LIMITS,
        )
        r = dg.run(env, f"import sys\nsys.exit({SETUP_CODE})\n")
    else:
        env = fn_env("attack-exit-code", "add", [{"args": [1, 2], "expected": 3}])
        r = dg.run(env, f"import os\n\ndef add(a, b):\n    os._exit({SETUP_CODE})\n")
    judged(r, 0.0)
    assert not r.cases[0].passed, r.cases
    host.check()
