"""Sessions on a container image's root (``deepgym.sandbox.image_root``): the pure parts, then
real sessions on a Debian busybox root (``image_fixtures``) and the attacks against them.

Run inside a pid namespace of its own (``unshare --pid --fork --mount-proc``); each session is
bounded in time (its lifetime, its step timeout) and memory (its cgroup); the only traffic is a
listener on loopback that nothing should reach.
"""

from __future__ import annotations

import asyncio
import os
import socket
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from deepgym.exceptions import ConfigError, SandboxDiedError, SandboxUnavailableError
from deepgym.models import Environment
from deepgym.sandbox import cgroups, host, image_root, policy
from deepgym.sandbox.host import HostLoader
from deepgym.sandbox.image_root import RootImage
from deepgym.sandbox.sessions import LocalSession, LocalSessions
from tests.sandbox.image_fixtures import debian_root, setuid_root, tree_state

__all__ = ["debian_root", "setuid_root"]  # fixtures, imported for pytest

LOADER = HostLoader(
    loader="/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    lib_dirs=("/usr/lib/x86_64-linux-gnu", "/usr/lib"),
    prefix="/home/u/.pyenv/versions/3.11.7",
    python="/home/u/.pyenv/versions/3.11.7/bin/python3.11",
)

VERIFY = """
import os, subprocess

def verify(work, tests):
    answer = open(os.path.join(work, "answer.txt")).read().strip()
    debian = subprocess.run(["cat", "/etc/debian_version"], capture_output=True, text=True)
    on_image = debian.stdout.startswith("12")
    agent_system_change = os.path.exists("/etc/agent-mark")
    ok = answer == "done" and on_image and not agent_system_change
    return {"score": 1.0 if ok else 0.0, "message": f"image {on_image}, mark {agent_system_change}"}
"""


USERS = ("agent", "root")
"""The attacks run against both: the default uid 65534, and uid 0 of the sandbox's own user
namespace (``Environment.user = "root"``)."""
UID = {"agent": "65534", "root": "0"}


def _env(**fields: Any) -> Environment:
    base: dict[str, Any] = {
        "name": "image-session",
        "kind": "session",
        "image": "test/debian:bookworm",
        "verifier_code": textwrap.dedent(VERIFY),
        "memory_mb": 128,
        "max_processes": 32,
        "max_file_mb": 8,
        "step_timeout": 10.0,
        "lifetime": 60.0,
        "timeout": 20.0,
    }
    return Environment(**{**base, **fields})


# -- pure ----------------------------------------------------------------------------------


def test_image_only_for_sessions() -> None:
    with pytest.raises(ValueError, match="image applies to kinds 'session' and 'function'"):
        Environment(name="s", kind="script", test_cases=[{"expected_stdout": "1"}], image="x")
    assert _env().image == "test/debian:bookworm"


def test_image_env_keeps_the_image_and_drops_the_loader_and_ours() -> None:
    env = image_root.parse_env(["PATH=/usr/local/bin:/bin", "A=b=c", "LD_PRELOAD=/x.so", "bad"])
    env.update({"HOME": "/root", "DEEPGYM_SESSION": "forged", "": "x", "NUL": "a\0b"})
    assert image_root.image_env(env) == {"PATH": "/usr/local/bin:/bin", "A": "b=c"}
    assert image_root.parse_env({"K": "v"}) == {"K": "v"}
    assert image_root.parse_env(None) == {}


def test_python_mount_never_shadows_the_image_system() -> None:
    assert image_root.python_mount("/home/u/.pyenv/versions/3.11.7") == LOADER.prefix
    for prefix in ("/usr", "/usr/local", "/opt/deepgym/x", "/"):
        assert image_root.python_mount(prefix) == image_root.IN_PYTHON
    assert image_root.python_mount("/usrx") == "/usrx"


def test_session_argv_on_an_image(tmp_path: Path) -> None:
    base = policy.Params(bwrap="bwrap", system=("--ro-bind", "/usr", "/usr"), judge_dir="/j")
    img = RootImage(rootfs=tmp_path, env={"PATH": "/img/bin", "LD_PRELOAD": "x"})
    params = image_root.image_params(base, img, LOADER)
    argv = policy.argv(policy.SESSION, params)
    joined = " ".join(argv)
    assert f"--overlay-src {tmp_path} --tmp-overlay /" in joined
    assert "--ro-bind /usr /usr" not in joined  # the host's system is not there
    assert "--remount-ro /dev --remount-ro /proc --chdir" not in joined  # no --remount-ro /
    assert "--remount-ro /dev --remount-ro /proc" in joined
    assert argv[argv.index("--remount-ro") : argv.index("--remount-ro") + 5].count("/") == 0
    assert "--setenv PATH /img/bin" in joined and "LD_PRELOAD" not in joined
    i = argv.index(f"{image_root.IN_HOST_LIBS}/0/ld-linux-x86-64.so.2")
    assert argv[i + 1 : i + 4] == [
        "--library-path",
        f"{LOADER.prefix}/lib:{image_root.IN_HOST_LIBS}/0:{image_root.IN_HOST_LIBS}/1",
        LOADER.python,
    ]
    # the first mount of the role is the root: everything else is mounted on top of it
    mounts = [a for a in argv if a.startswith("--") and a not in ("--setenv", "--clearenv")]
    assert mounts[mounts.index("--overlay-src") - 1] == "--new-session"
    with pytest.raises(ConfigError, match="not an unpacked root"):
        image_root.image_params(base, RootImage(rootfs=Path("relative")), LOADER)
    (tmp_path / "a,b").mkdir()
    with pytest.raises(ConfigError, match="in its path"):
        image_root.image_params(base, RootImage(rootfs=tmp_path / "a,b"), LOADER)
    host_argv = policy.argv(policy.SESSION, base)
    assert host_argv[host_argv.index("/proc", host_argv.index("--remount-ro")) + 1 :][:2] == [
        "--remount-ro",
        "/",
    ]


def test_lib_dirs_from_a_loader_help() -> None:
    text = (
        "Shared library search path:\n  (libraries located via /etc/ld.so.cache)\n"
        "  /lib/x86_64-linux-gnu (system search path)\n  /usr/lib (system search path)\n"
    )
    assert host.lib_dirs_from_help(text) == ["/lib/x86_64-linux-gnu", "/usr/lib"]


def test_elf_interpreter(tmp_path: Path) -> None:
    interp = host.elf_interpreter(host.SANDBOX_PYTHON)
    assert os.path.isfile(interp) and "ld" in os.path.basename(interp)
    (tmp_path / "script").write_text("#!/bin/sh\n")
    with pytest.raises(SandboxUnavailableError, match="not an ELF"):
        host.elf_interpreter(str(tmp_path / "script"))


def test_overlay_refusal_names_an_old_bwrap(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Unknown option --overlay-src' >&2\nexit 1\n")
    fake.chmod(0o755)
    why = host.overlay_refusal(host.Bwrap(path=str(fake), ro_dirs=()), str(tmp_path))
    assert why == "bwrap: Unknown option --overlay-src"


# -- real sessions ---------------------------------------------------------------------------


def _resolver(root: Path, **config: Any) -> Callable[[str], RootImage]:
    def resolve(ref: str) -> RootImage:
        assert ref == "test/debian:bookworm"
        return RootImage(rootfs=root, **config)

    return resolve


def _run(root: Path, body: Callable[[LocalSessions], Awaitable[None]], **config: Any) -> None:
    async def go() -> None:
        provider = LocalSessions(images=_resolver(root, **config))
        try:
            await body(provider)
        finally:
            await provider.close()

    asyncio.run(go())


async def _sh(session: LocalSession, command: str, timeout: float | None = None) -> str:
    done = await session.exec(command, timeout)
    return done.stdout.strip()


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGYM_HOME", str(tmp_path / "home"))


@pytest.mark.sandbox
@pytest.mark.timeout(120)
@pytest.mark.parametrize("user", USERS)
def test_a_session_runs_on_the_image_and_is_scored_there(user: str, debian_root: Path) -> None:
    host_only = next(
        p
        for p in ("/usr/bin/gcc", "/usr/bin/python3", "/usr/bin/perl", "/usr/bin/git")
        if os.path.exists(p) and not os.path.lexists(debian_root / p.lstrip("/"))
    )
    before = tree_state(debian_root)
    config = {"env": {"IMAGE_VAR": "from-image", "LD_PRELOAD": "/nope.so"}}

    async def body(provider: LocalSessions) -> None:
        s = await provider.open(_env(user=user))
        assert await _sh(s, "pwd") == "/work"  # the work dir, whatever the image's WorkingDir
        assert (await _sh(s, "cat /etc/debian_version")).startswith("12")
        assert await _sh(s, "command -v busybox") == "/bin/busybox"
        assert await _sh(s, f"test -e {host_only} && echo yes || echo no") == "no"
        assert await _sh(s, 'echo "$IMAGE_VAR/${LD_PRELOAD:-unset}"') == "from-image/unset"
        assert await _sh(s, "id -u") == UID[user]
        await _sh(s, "echo done > /work/answer.txt && echo x > /etc/agent-mark")
        result = await s.score()
        assert result.has_verdict and result.score == 1.0, result
        await s.close()

    _run(debian_root, body, **config)
    assert tree_state(debian_root) == before


@pytest.mark.sandbox
@pytest.mark.timeout(120)
@pytest.mark.parametrize("user", USERS)
def test_writes_stay_in_their_own_session(user: str, debian_root: Path) -> None:
    before = tree_state(debian_root)

    async def body(provider: LocalSessions) -> None:
        one = await provider.open(_env(user=user))
        two = await provider.open(_env(user=user))
        mark = "echo one > /etc/mark && mkdir -p /usr/local/bin && echo x > /usr/local/bin/t"
        await _sh(one, f"{mark} && rm /bin/ls && echo ok")
        assert await _sh(one, "cat /etc/mark") == "one"
        assert await _sh(two, "cat /etc/mark 2>&1; test -e /bin/ls && echo ls") == (
            "cat: can't open '/etc/mark': No such file or directory\nls"
        )
        await one.close()
        three = await provider.open(_env(user=user))
        assert await _sh(three, "test -e /etc/mark || test -e /usr/local/bin/t || echo clean")
        await two.close()
        await three.close()

    _run(debian_root, body)
    assert tree_state(debian_root) == before


@pytest.mark.sandbox
@pytest.mark.timeout(120)
@pytest.mark.parametrize("user", USERS)
def test_limits_fire_inside_the_image(user: str, debian_root: Path) -> None:
    probe = cgroups.create(64, 8)
    has_memory = probe.holds("memory")
    probe.remove()
    if not has_memory:
        pytest.skip("no memory cgroup here: image sessions are refused (see the next test)")

    async def body(provider: LocalSessions) -> None:
        s = await provider.open(_env(memory_mb=64, user=user))
        spin = await s.exec("while :; do :; done", 1.0)
        assert spin.timed_out
        # the writable layer is memory: 40 files of 8 MiB (320 MiB) against a 64 MiB group
        bomb = "for i in $(seq 1 40); do head -c 8388608 /dev/zero > /var/f$i || exit 7; done"
        try:
            done = await s.exec(bomb, 20.0)
        except SandboxDiedError:
            return  # the group's OOM killer took the supervisor: the session ended
        assert done.exit_code != 0 and not done.timed_out, done
        kept = await _sh(s, "du -sk /var | cut -f1")
        assert int(kept) < 64 * 1024, kept
        await s.close()

    _run(debian_root, body)


@pytest.mark.sandbox
@pytest.mark.timeout(60)
def test_no_memory_cgroup_is_refused_in_a_line(debian_root: Path) -> None:
    async def body(provider: LocalSessions) -> None:
        with pytest.raises(SandboxUnavailableError, match="needs a memory cgroup"):
            provider.host_for(_env(), cgroups.RunCgroup(dirs={}))
        assert provider.host_for(_env(image=None)) is provider.host

    _run(debian_root, body)


@pytest.mark.sandbox
@pytest.mark.timeout(120)
@pytest.mark.parametrize("user", USERS)
def test_a_setuid_root_binary_gives_nothing(user: str, setuid_root: Path) -> None:
    async def body(provider: LocalSessions) -> None:
        s = await provider.open(_env(user=user))
        assert (await _sh(s, "ls -ln /bin/busybox-suid | cut -c1-10")) == "-rwsr-sr-x"
        ids = await _sh(s, "/bin/busybox-suid id -u; /bin/busybox-suid id -g")
        assert ids == f"{UID[user]}\n{UID[user]}"
        assert await _sh(
            s, "grep -E '^(NoNewPrivs|CapEff)' /proc/self/status | tr -s '\t' ' '"
        ) == ("CapEff: 0000000000000000\nNoNewPrivs: 1")
        await s.close()

    _run(setuid_root, body)


@pytest.mark.sandbox
@pytest.mark.timeout(120)
@pytest.mark.parametrize("user", USERS)
def test_the_host_beyond_the_policy_is_unreachable(
    user: str, debian_root: Path, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    canary.write_text("HOST-CANARY")
    shadow = Path("/etc/shadow").read_text() if os.access("/etc/shadow", os.R_OK) else ""
    home = Path.home()
    image_home = {p.name for p in (debian_root / home.relative_to("/")).glob("*")}
    prefix_top = os.path.realpath(host.host_loader().prefix)
    allowed = set(image_home)
    if prefix_top.startswith(str(home) + "/"):  # the host's Python, mounted at its own path
        allowed.add(Path(prefix_top).relative_to(home).parts[0])

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.2)
        port = listener.getsockname()[1]

        async def body(provider: LocalSessions) -> None:
            s = await provider.open(_env(user=user))
            assert "HOST-CANARY" not in await _sh(s, f"cat {canary} 2>&1")
            got = await _sh(s, "cat /etc/shadow 2>&1")
            assert not shadow.strip() or shadow.strip() not in got
            listed = await _sh(s, f"ls -A {home} 2>/dev/null")
            assert set(listed.split()) <= allowed, listed
            net = await _sh(s, f"echo hi > /dev/tcp/127.0.0.1/{port} && echo sent || echo refused")
            assert net.endswith("refused")
            assert await _sh(s, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '") == "lo"
            await s.close()

        _run(debian_root, body)
        with pytest.raises(TimeoutError):
            listener.accept()


def _host_uids(session: LocalSession) -> set[str]:
    """The real uids, as the host sees them, of ``session``'s processes inside its sandbox."""
    from deepgym.judge.blame import tree_pids

    assert session.proc is not None
    uids = set()
    for pid in tree_pids(session.proc.pid) - {session.proc.pid}:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uids |= {line.split()[1] for line in status.splitlines() if line.startswith("Uid:")}
    return uids


@pytest.mark.sandbox
@pytest.mark.timeout(120)
def test_root_in_the_sandbox_is_a_number_not_a_privilege(debian_root: Path) -> None:
    """uid 0 of the sandbox's own user namespace: /root and root-owned files as the task
    expects, and nothing more than the agent's uid 65534 has."""

    async def body(provider: LocalSessions) -> None:
        root = await provider.open(_env(user="root"))
        agent = await provider.open(_env())
        assert await _sh(root, "id -u; id -g; echo $HOME; pwd") == "0\n0\n/root\n/work"
        assert await _sh(root, "stat -c %u /etc/debian_version") == "0"  # the image's owner
        caps = await _sh(root, "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
        assert {line.split()[1] for line in caps.splitlines()} == {"0000000000000000"}, caps
        # chown succeeds and changes nothing (the namespace has no other owner to give)
        owner = await _sh(root, "echo x > /work/f && chown 1:1 /work/f && stat -c %u:%g /work/f")
        assert owner == "0:0"
        assert await _sh(agent, "echo x > f; chown 1:1 f 2>/dev/null || echo refused") == "refused"
        refused = {
            "mount": "mount -t tmpfs none /mnt",
            "remount": "mount -o remount,rw /opt/deepgym",
            "userns": "unshare -U true",
            "sysctl": "echo 1 > /proc/sys/kernel/sysrq",
        }
        for what, command in refused.items():
            got = await _sh(root, f"{command} 2>/dev/null && echo done || echo refused")
            assert got == "refused", (what, got)
        # the same host uid as the agent's session: a number inside, nothing outside
        assert _host_uids(root) == _host_uids(agent) != set()
        await root.close()
        await agent.close()

    _run(debian_root, body)


def test_the_doctor_says_whether_images_run() -> None:
    from deepgym.sandbox import doctor

    bw = host.Bwrap(path="/x/bwrap", ro_dirs=())
    assert doctor.check_images(None, None, True).status == doctor.SKIPPED
    old = doctor.check_images(bw, "bwrap: Unknown option --overlay-src", True)
    assert old.status == doctor.ABSENT and "Unknown option --overlay-src" in old.found
    assert "0.11" in old.fix
    assert "no memory cgroup" in doctor.check_images(bw, None, False).found
    assert doctor.check_images(bw, None, True).status == doctor.OK


def test_the_store_seam_keeps_the_env_and_not_the_working_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    class Store:
        def lookup(self, ref: str) -> str:
            return "sha256:0"

        def resolve(self, ref: str) -> Any:
            config = types.SimpleNamespace(env=["A=1"], working_dir="/app", user="", cmd=None)
            return types.SimpleNamespace(digest="sha256:0", rootfs=str(tmp_path), config=config)

    fake = types.ModuleType("deepgym.images.store")
    fake.ImageStore = Store  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "deepgym.images.store", fake)
    assert image_root.store_resolver("x:1") == RootImage(tmp_path, {"A": "1"})


# -- function tasks --------------------------------------------------------------------------

PROBE_ANSWER = """
import os, subprocess

def probe():
    debian = subprocess.run(["cat", "/etc/debian_version"], capture_output=True, text=True)
    try:
        open("/etc/answer-mark", "w").close()
        wrote = "wrote"
    except OSError:
        wrote = "read-only"
    return [debian.stdout[:3], wrote, os.path.exists("/bin/busybox-suid"), os.getuid()]
"""


def _function_env(**fields: Any) -> Environment:
    base: dict[str, Any] = {
        "name": "image-function",
        "image": "test/debian:bookworm",
        "entry_point": "probe",
        "test_cases": [{"args": [], "expected": ["12.", "read-only", True, 65534]}],
        "timeout": 20.0,
        "memory_mb": 256,
    }
    return Environment(**{**base, **fields})


@pytest.mark.sandbox
@pytest.mark.timeout(120)
def test_a_function_task_runs_on_the_image_read_only(setuid_root: Path) -> None:
    from deepgym import DeepGym
    from deepgym.sandbox.strict import StrictBackend

    before = tree_state(setuid_root)  # the test root with a file of its own: /bin/busybox-suid
    with DeepGym(backend=StrictBackend(images=_resolver(setuid_root))) as dg:
        result = dg.run(_function_env(), PROBE_ANSWER)
        assert result.has_verdict and result.score == 1.0, result
        wrong = dg.run(_function_env(), "def probe():\n    return []\n")
        assert wrong.has_verdict and wrong.score == 0.0
    assert tree_state(setuid_root) == before


@pytest.mark.sandbox
@pytest.mark.timeout(60)
def test_the_pool_refuses_a_task_on_an_image_in_a_line() -> None:
    from deepgym import DeepGym

    with (
        DeepGym(sandbox="pool", workers=1) as dg,
        pytest.raises(ConfigError, match="the pool backend runs no image; use sandbox='strict'"),
    ):
        dg.run(_function_env(), PROBE_ANSWER)


@pytest.mark.sandbox
@pytest.mark.timeout(120)
def test_the_example_session_scores_on_the_image(debian_root: Path) -> None:
    """The built-in example (its verifier starts ``sys.executable`` on the agent's code) on the
    image: the fix scores 1.0, no fix 0.0."""
    from deepgym.envs.registry import load_folder
    from tests.sessions.conftest import EXAMPLE, FIX

    env = load_folder(EXAMPLE).model_copy(update={"image": "test/debian:bookworm"})

    async def body(provider: LocalSessions) -> None:
        fixed = await provider.open(env)
        done = await fixed.exec(FIX)
        assert done.exit_code == 0, done
        assert (await fixed.score()).score == 1.0
        await fixed.close()
        idle = await provider.open(env)
        await idle.exec("true")
        unfixed = await idle.score()
        assert unfixed.has_verdict and unfixed.score == 0.0, unfixed
        await idle.close()

    _run(debian_root, body)
