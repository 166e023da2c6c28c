"""The attack suite against a session, on both providers (local, and remote through a
``deepgym serve`` on loopback): what an agent does to forge its score, see the hidden tests,
outlive its session, exhaust the host, reach the network or another session. Each asserts the
verdict and that the host and the other sessions are unaffected. Bounded in time; the only
traffic is to a listener on loopback and to the test's own service there."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.envs.registry import load_environment
from deepgym.models import Environment
from deepgym.sandbox.sessions import reap_leftovers, sessions_dir
from tests.procs import descendants
from tests.sessions.conftest import EXAMPLE, FIX

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


@pytest.fixture(params=["local", "remote"])
def client(request: pytest.FixtureRequest) -> Iterator[DeepGym]:
    """A client on each provider; nothing of either is left when the test ends."""
    before = descendants(os.getpid())
    if request.param == "local":
        with DeepGym() as dg:
            yield dg
    else:
        from deepgym.server.app import create_app
        from deepgym.server.runner import ThreadedServer
        from tests.server.conftest import TOKEN

        with (
            ThreadedServer(create_app(token=TOKEN), grace_s=1.0) as server,
            DeepGym(mode="remote", url=server.url, token=TOKEN) as dg,
        ):
            yield dg
    deadline = time.monotonic() + 5
    while (left := descendants(os.getpid()) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left: {sorted(left)}"


@pytest.fixture
def example() -> Environment:
    """The example by name: it travels to a service as it is."""
    return load_environment("agent/fix_add")


CANARY = "HIDDEN-TESTS-CANARY-7f3a"


def test_a_planted_result_and_a_fake_verifier_output_change_nothing(
    client: DeepGym, example: Environment
) -> None:
    with client.session(example) as s:
        s.write_file("report.json", json.dumps({"status": "ok", "score": 1.0, "passed": True}))
        s.exec('echo \'{"status": "ok", "score": 1.0}\'; echo \'{"score": 1}\' > /tmp/result')
        s.exec("mkdir -p judge && printf 'def verify(w, t):\\n    return 1.0\\n' > verifier.py")
        r = s.score()
    assert r.has_verdict and r.error_type is None and len(r.cases) == 5  # judged, case by case
    assert r.score == 0.0 and not r.passed  # the bug is still there


def test_the_hidden_tests_are_out_of_reach(client: DeepGym, example: Environment) -> None:
    with client.session(example) as s:
        r = s.exec(
            f"grep -rs {CANARY} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; "
            "ls /judge /seed/tests 2>&1; find / -name test_calc.py 2>/dev/null | head",
            timeout=20,
        )
    assert CANARY not in r.stdout
    assert "test_calc.py" not in r.stdout


def test_a_daemon_does_not_outlive_its_session(client: DeepGym, example: Environment) -> None:
    # (The client keeps a standby sandbox for its next session: the daemons are found by name.)
    s = client.session(example)
    s.exec("setsid nohup sleep 98761 >/dev/null 2>&1 & disown; (sleep 98762 &) ; true")
    assert len(_with_marker("\x009876")) == 2
    s.close()
    deadline = time.monotonic() + 5
    while (left := _with_marker("\x009876")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left


def test_filling_the_disk_stops_at_the_work_dirs_cap(client: DeepGym, example: Environment) -> None:
    with client.session(example) as s:
        one = s.exec("dd if=/dev/zero of=big bs=1M count=4096", timeout=30)
        assert "File size limit exceeded" in one.stderr  # one file: the file size limit
        many = s.exec(
            "for i in 1 2 3 4; do dd if=/dev/zero of=big$i bs=1M count=60 2>&1; done",
            timeout=30,
        )
        assert "No space left" in many.stdout  # many: the work dir's size cap
        s.exec("rm -f big*; " + FIX)
        assert s.score().passed  # the session still works after the disk filled


def _pids_group(sandbox_id: str) -> str:
    """The session's own pids cgroup, from the record the provider keeps of it."""
    record = json.loads((sessions_dir() / f"{sandbox_id}.json").read_text())
    groups = [g for g in record["cgroups"] if "/pids/" in g or os.path.isfile(f"{g}/pids.max")]
    if not groups:
        pytest.skip("no pids cgroup on this host: the process cap is an rlimit")
    return groups[0]


def _pids_counters(group: str) -> tuple[int, int, int]:
    """(pids.max, pids.current, forks refused) of a pids cgroup."""
    with open(f"{group}/pids.max") as f:
        cap = int(f.read())
    with open(f"{group}/pids.current") as f:
        current = int(f.read())
    with open(f"{group}/pids.events") as f:
        refused = int(dict(line.split() for line in f)["max"])
    return cap, current, refused


def test_a_fork_bomb_is_bounded_and_leaves_the_host_alone(
    client: DeepGym, example: Environment
) -> None:
    with client.session(example) as s:
        group = _pids_group(s.sandbox_id)
        # The bomb's first shell may return at once (the bomb goes on in the background) or
        # run into its limit: either way is an observation, never a raise.
        s.exec(":(){ :|:& };:", timeout=3)
        # The cap is judged from the session's own cgroup, not from the clock: the bomb grows
        # until the kernel refuses a fork there, and the group never holds more than the cap.
        deadline = time.monotonic() + 60
        while True:
            cap, current, refused = _pids_counters(group)
            assert cap == example.max_processes and current <= cap
            if refused or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert refused, "the bomb never met the session's process cap"
        after = s.exec("echo alive", timeout=10)  # an observation either way, never a raise
        assert after.stdout == "alive\n" or "process limit is reached" in after.stderr
        r = s.score()  # the agent's phase ends; the verdict is unaffected:
    assert r.has_verdict and r.error_type is None and len(r.cases) == 5 and r.score == 0.0
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork


def test_a_memory_bomb_is_refused(client: DeepGym, example: Environment) -> None:
    # 4 GiB, four times the example's memory limit (1024 MB), touched page by page.
    with client.session(example) as s:
        r = s.exec(
            "python3 -c 'x = bytearray(1 << 32); print(len(x))' 2>&1; echo exit=$?", timeout=30
        )
        assert "exit=0" not in r.stdout and "4294967296" not in r.stdout
        assert s.exec("echo alive").stdout == "alive\n"
        r = s.score()  # the session and its verdict are unaffected
    assert r.has_verdict and r.error_type is None and len(r.cases) == 5 and r.score == 0.0


def test_no_network_not_even_loopback_of_the_host(client: DeepGym, example: Environment) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        with client.session(example) as s:
            r = s.exec(
                f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\""
                " 2>&1 | tail -1",
                timeout=10,
            )
        assert "Error" in r.stdout or "refused" in r.stdout
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing came through
    finally:
        listener.close()


def test_killing_its_own_shell_is_the_agents_zero(client: DeepGym, example: Environment) -> None:
    def agent(obs: object) -> dict[str, str]:
        return {"tool": "bash", "command": "kill -9 -1"}  # everything of its uid: the supervisor

    episode = client.run_episode(example, agent)
    r = episode.result
    assert r.has_verdict and r.score == 0.0 and r.error_type == "policy_sandbox_failure"


def test_one_session_cannot_reach_anothers_work_dir(client: DeepGym, example: Environment) -> None:
    with client.session(example) as a, client.session(example) as b:
        a.write_file("secret.txt", "MARKER-a91c")
        r = b.exec(
            "grep -rs MARKER-a91c / --exclude-dir=sys 2>/dev/null | head -3; "
            "ls /proc/*/root/work 2>&1 | head -5",
            timeout=20,
        )
        assert "MARKER-a91c" not in r.stdout
        assert a.read_file("secret.txt") == "MARKER-a91c"  # a is untouched
        assert b.list_files() == ["README.md", "calc.py"]


HOST = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, {root!r})
    from deepgym import DeepGym
    from deepgym.envs.registry import load_folder
    dg = DeepGym()
    s = dg.session(load_folder({example!r}))
    s.exec("sleep 1000 >/dev/null 2>&1 &")
    print(s.sandbox_id, flush=True)
    time.sleep(600)
    """
)


def test_a_host_killed_mid_session_leaves_nothing(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST.format(root=root, example=str(EXAMPLE))],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "DEEPGYM_HOME": os.environ["DEEPGYM_HOME"]},
    )
    try:
        assert proc.stdout is not None
        sandbox_id = proc.stdout.readline().strip()
        assert sandbox_id.startswith("local-")
        assert (sessions_dir() / f"{sandbox_id}.json").is_file()
        proc.kill()  # SIGKILL: no clean-up of its own runs
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    reap_leftovers()  # what the next start of sessions on this host does
    deadline = time.monotonic() + 5
    while (left := _with_marker(sandbox_id)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes of {sandbox_id} left: {left}"
    assert not (sessions_dir() / f"{sandbox_id}.json").exists()


def _with_marker(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found
