"""``deepgym.sandbox.doctor``, ``userns`` and the bwrap choice, against restrictions made here.

The refusals this host does not have are made: a fake bwrap that fails as a refused one does
(Ubuntu's AppArmor, a container's masked /proc), stands first in the candidates, so the fallback
to the next one runs for real; and a seccomp filter that refuses namespaces as a container's
default profile does (``seccomp_refuse_ns.c``, built here with ``cc``) wraps a real run.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.exceptions import SandboxUnavailableError
from deepgym.languages import LANGUAGES
from deepgym.runtimes import RUNTIMES
from deepgym.sandbox import cgroups, doctor, host, userns
from tests.sandbox.conftest import ADD, ADD_OK

HERE = Path(__file__).resolve().parent
APPARMOR_REFUSAL = "bwrap: setting up uid map: Permission denied"
PROC_REFUSAL = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"


def fake_bwrap(tmp_path: Path, message: str) -> host.Bwrap:
    """A 'wheel' bwrap that refuses every sandbox with ``message``, as a refused one does."""
    (tmp_path / "refusal.txt").write_text(message + "\n")
    path = tmp_path / "bwrap"
    path.write_text(f"#!/bin/sh\ncat '{tmp_path / 'refusal.txt'}' >&2\nexit 1\n")
    path.chmod(0o755)
    return host.Bwrap(path=str(path), ro_dirs=(), source="wheel")


def real_bwrap(source: str = "system") -> host.Bwrap:
    """This host's working bwrap, as if it came from ``source``."""
    bw = host.find_bwrap()
    return host.Bwrap(path=bw.path, ro_dirs=bw.ro_dirs, source=source)


def facts(step: str, err: int, **kw: object) -> userns.Facts:
    base: dict[str, object] = {"uid": 1000, "step": step, "errno": err}
    return userns.Facts(**{**base, **kw})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Why namespaces are refused: the pure rule
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "why", "fix"),
    [
        (facts("user", errno.EPERM, seccomp=2), "seccomp filter", "seccomp=unconfined"),
        (facts("user", errno.ENOSPC, max_user_namespaces=0), "max_user_namespaces = 0", "sysctl"),
        (
            facts("user", errno.EPERM, unprivileged_userns_clone=0),
            "unprivileged_userns_clone = 0",
            "unprivileged_userns_clone=1",
        ),
        (facts("maps", errno.EPERM, apparmor_restrict=1), "AppArmor", "apt install bubblewrap"),
        (facts("others", errno.EPERM, apparmor_restrict=1), "AppArmor", "apt install bubblewrap"),
        (facts("user", errno.EINVAL), "no user namespaces", "kernel"),
        (facts("user", errno.EPERM, uid=0, unprivileged_userns_clone=0), "refused", "remote"),
    ],
)
def test_each_refusal_is_named_with_its_fix(f: userns.Facts, why: str, fix: str) -> None:
    got_why, got_fix = userns.diagnosis(f)
    assert why in got_why and fix in got_fix
    assert userns.cause(f) == f"{got_why}: {got_fix}"


def test_allowed_namespaces_have_no_cause() -> None:
    assert userns.diagnosis(facts("done", 0)) == ("", "")
    assert userns.cause(facts("done", 0)) == ""


def test_this_host_allows_namespaces() -> None:
    found = userns.read_facts()
    assert found.allowed, userns.cause(found)
    assert found.uid == os.geteuid()


# ---------------------------------------------------------------------------------------------
# Which bwrap: the first that runs, said so; none that runs, the cause named
# ---------------------------------------------------------------------------------------------


@pytest.mark.sandbox
def test_a_refused_wheel_bwrap_gives_way_to_the_systems(tmp_path: Path) -> None:
    chosen, refused = host.first_running([fake_bwrap(tmp_path, APPARMOR_REFUSAL), real_bwrap()])
    assert chosen is not None and chosen.source == "system"
    assert refused == [f"the wheel bwrap ({tmp_path / 'bwrap'}) is refused: {APPARMOR_REFUSAL}"]
    assert chosen.note == f"{refused[0]}; the system bwrap runs"


@pytest.mark.sandbox
def test_the_first_bwrap_that_runs_has_no_note(tmp_path: Path) -> None:
    chosen = host.choose_bwrap([real_bwrap("wheel"), fake_bwrap(tmp_path, APPARMOR_REFUSAL)])
    assert chosen.source == "wheel" and chosen.note == ""


def test_no_bwrap_that_runs_is_a_named_error_never_a_weaker_sandbox(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailableError) as caught:
        host.choose_bwrap([fake_bwrap(tmp_path, APPARMOR_REFUSAL)])
    message = str(caught.value)
    assert APPARMOR_REFUSAL in message and "run `deepgym doctor`" in message
    with pytest.raises(SandboxUnavailableError, match=r"no bwrap binary.*deepgym doctor"):
        host.choose_bwrap([])


def test_deepgym_bwrap_is_the_only_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPGYM_BWRAP", "/opt/my/bwrap")
    assert host.bwrap_candidates() == [
        host.Bwrap(path="/opt/my/bwrap", ro_dirs=("/opt/my",), source="DEEPGYM_BWRAP")
    ]


@pytest.fixture
def fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's bwrap choice made over a refused wheel bwrap and the real one."""
    candidates = [fake_bwrap(tmp_path, APPARMOR_REFUSAL), real_bwrap()]
    monkeypatch.setattr(host, "bwrap_candidates", lambda: candidates)
    host.find_bwrap.cache_clear()
    host.check_bwrap.cache_clear()
    yield
    host.find_bwrap.cache_clear()
    host.check_bwrap.cache_clear()


@pytest.mark.sandbox
@pytest.mark.parametrize("sandbox", ["strict", "pool"])
def test_each_result_names_the_fallback_bwrap(fallback: None, sandbox: str) -> None:
    with DeepGym(sandbox=sandbox) as dg:
        result = dg.run(ADD, ADD_OK)
    assert result.score == 1.0
    used = result.evidence.limit_mechanism["bwrap"]
    assert used.startswith(host.find_bwrap().path) and "wheel bwrap" in used
    assert APPARMOR_REFUSAL in used and "the system bwrap runs" in used


@pytest.mark.sandbox
def test_without_a_fallback_results_name_no_bwrap() -> None:
    with DeepGym(sandbox="strict") as dg:
        result = dg.run(ADD, ADD_OK)
    assert result.score == 1.0 and "bwrap" not in result.evidence.limit_mechanism


# ---------------------------------------------------------------------------------------------
# The doctor's report
# ---------------------------------------------------------------------------------------------


def _by_name(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name: c for c in report.checks}


@pytest.mark.sandbox
def test_this_host_gets_full_limits_in_a_few_seconds() -> None:
    # On the CPU time the doctor and its probes use, not on the clock: a loaded host (make test
    # beside a load generator) stretched the clock past 5 s while the doctor's own work was 3 s.
    def cpu_s() -> float:
        own, probes = (
            resource.getrusage(resource.RUSAGE_SELF),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        return own.ru_utime + own.ru_stime + probes.ru_utime + probes.ru_stime

    c0 = cpu_s()
    report = doctor.diagnose()
    assert cpu_s() - c0 < 5.0
    checks = _by_name(report)
    assert list(checks) == [
        "python",
        "user namespaces",
        "bwrap",
        "/proc",
        "tmp",
        "memory limit",
        "process limit",
        "images",
        "image builds",
        *(f"language {name}" for name in LANGUAGES),
        *(f"runtime {name}" for name in RUNTIMES),
    ]
    full = {"memory", "pids"} <= set(cgroups.v1_controllers())
    assert report.exit_code == (0 if full else 1), report.summary
    assert checks["bwrap"].found.startswith("the wheel bwrap") or "DEEPGYM_BWRAP" in (
        checks["bwrap"].found
    )
    assert json.loads(json.dumps(report.to_dict()))["exit_code"] == report.exit_code


@pytest.mark.sandbox
def test_the_doctor_reports_the_fallback(tmp_path: Path) -> None:
    report = doctor.diagnose([fake_bwrap(tmp_path, APPARMOR_REFUSAL), real_bwrap()])
    bwrap = _by_name(report)["bwrap"]
    assert bwrap.status == doctor.OK
    assert APPARMOR_REFUSAL in bwrap.found and "the system bwrap runs" in bwrap.found
    assert "limit_mechanism['bwrap']" in bwrap.means
    assert report.exit_code < 2


def test_no_bwrap_that_runs_is_exit_2(tmp_path: Path) -> None:
    report = doctor.diagnose([fake_bwrap(tmp_path, APPARMOR_REFUSAL)])
    checks = _by_name(report)
    assert report.exit_code == 2
    assert checks["bwrap"].status == doctor.FAIL and APPARMOR_REFUSAL in checks["bwrap"].found
    assert checks["/proc"].status == doctor.SKIPPED
    assert report.summary == "the sandbox cannot run here (bwrap)"


def test_a_masked_proc_is_named_with_the_container_flag(tmp_path: Path) -> None:
    report = doctor.diagnose([fake_bwrap(tmp_path, PROC_REFUSAL)])
    proc = _by_name(report)["/proc"]
    assert proc.status == doctor.FAIL and PROC_REFUSAL in proc.found
    assert "systempaths=unconfined" in proc.fix and "procMount: Unmasked" in proc.fix


def test_no_bwrap_at_all_is_exit_2() -> None:
    report = doctor.diagnose([])
    assert report.exit_code == 2
    assert "apt install bubblewrap" in _by_name(report)["bwrap"].fix


def test_refused_namespaces_with_a_running_bwrap_are_not_a_failure() -> None:
    apparmor = facts("maps", errno.EPERM, apparmor_restrict=1)
    check = doctor.check_userns(apparmor, sandbox_runs=True)
    assert check.status == doctor.OK and "AppArmor" in check.found
    failed = doctor.check_userns(apparmor, sandbox_runs=False)
    assert failed.status == doctor.FAIL and "apt install bubblewrap" in failed.fix


def test_rlimits_only_are_weak_and_say_what_they_cannot_hold() -> None:
    rows = doctor.check_limits((), "no cgroup v2 group")
    assert [r.status for r in rows] == [doctor.WEAK, doctor.WEAK]
    assert "RLIMIT_AS" in rows[0].means and "RLIMIT_NPROC" in rows[1].means
    assert doctor.Report(tuple(rows)).exit_code == 1
    assert doctor.Report(tuple(rows)).summary.endswith("(memory limit, process limit)")
    half = doctor.check_limits(("memory",), "")
    assert [r.status for r in half] == [doctor.OK, doctor.WEAK]
    full = doctor.check_limits(("memory", "pids"), "")
    assert doctor.Report(tuple(full)).exit_code == 0


HYBRID = """\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
"""
UNIFIED = "29 24 0:25 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
NESTED = "40 24 0:25 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"


@pytest.mark.parametrize(
    ("mountinfo", "cgroup", "group"),
    [
        (
            UNIFIED,
            "0::/user.slice/user-1000.slice/app.scope\n",
            "/sys/fs/cgroup/user.slice/user-1000.slice/app.scope",
        ),
        (HYBRID, "4:memory:/x\n0::/\n", "/sys/fs/cgroup/unified"),
        (HYBRID + UNIFIED, "0::/a\n", "/sys/fs/cgroup/a"),
        (NESTED, "0::/a\n", None),
        (UNIFIED, "4:memory:/x\n", None),
    ],
)
def test_the_v2_group_is_read_from_mountinfo(
    mountinfo: str, cgroup: str, group: str | None
) -> None:
    assert cgroups.own_v2_group(mountinfo, cgroup) == group


def test_what_v2_offers(tmp_path: Path) -> None:
    own = tmp_path / "svc" / "main"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpu io\n")
    assert doctor.v2_found(str(own)).endswith("without memory and pids controllers")
    (own.parent / "cgroup.controllers").write_text("cpu io memory pids\n")
    found = doctor.v2_found(str(own))
    assert found == f"cgroup v2 group {own}: memory and pids, writable: give it as DEEPGYM_CGROUP"
    assert doctor.v2_found(None) == "no cgroup v2 group"


def test_python_and_tmp_checks(tmp_path: Path) -> None:
    assert doctor.check_python((3, 10, 12)).status == doctor.FAIL
    assert doctor.check_python((3, 13, 0)).status == doctor.OK
    assert doctor.check_tmp(str(tmp_path / "missing")).status == doctor.FAIL
    assert doctor.check_tmp(str(tmp_path)).status == doctor.OK


# ---------------------------------------------------------------------------------------------
# A container's default seccomp profile, made here
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def refuse_ns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``seccomp_refuse_ns``, built with the host's C compiler."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler (cc) to build the seccomp filter")
    out = tmp_path_factory.mktemp("seccomp") / "refuse_ns"
    subprocess.run([cc, "-O1", "-o", str(out), str(HERE / "seccomp_refuse_ns.c")], check=True)
    return out


def _under_filter(refuse_ns: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(refuse_ns), sys.executable, "-m", "deepgym", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.sandbox
def test_a_seccomp_filter_is_named_by_the_first_error(refuse_ns: Path, tmp_path: Path) -> None:
    answer = tmp_path / "answer.py"
    answer.write_text("def add(a, b):\n    return a + b\n")
    done = _under_filter(
        refuse_ns, "run", "--sandbox", "strict", "add_duration_format", str(answer)
    )
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: no verdict (SandboxUnavailableError): bwrap cannot create")
    assert "seccomp filter refuses to create namespaces" in line
    assert "seccomp=unconfined" in line and "mode='remote'" in line
    assert line.endswith("run `deepgym doctor` for this host's check")


@pytest.mark.sandbox
def test_the_doctor_under_a_seccomp_filter_is_exit_2(refuse_ns: Path) -> None:
    done = _under_filter(refuse_ns, "doctor", "--json")
    assert done.returncode == 2, done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["user namespaces"]["status"] == "fail"
    assert "seccomp filter" in checks["user namespaces"]["found"]
    assert "seccompProfile.type: Unconfined" in checks["user namespaces"]["fix"]
    assert checks["bwrap"]["status"] == "fail"


def test_the_image_builds_line_says_what_maps_and_how_steps_reach_the_network() -> None:
    from deepgym.exceptions import ImageError
    from deepgym.images.mapped import id_ranges

    def slirp() -> str:
        return "/usr/bin/slirp4netns"

    ok = doctor.check_image_builds(lambda: id_ranges(0, 0, "root", "", ""), slirp)
    assert ok.status == doctor.OK and "its own ids (root)" in ok.found
    assert "outbound through /usr/bin/slirp4netns" in ok.found
    assert "never this host's loopback" in ok.means
    ranged = doctor.check_image_builds(lambda: id_ranges(7, 7, "u", "u:1:9\n", "u:1:9\n"), slirp)
    assert ranged.status == doctor.OK and "/etc/subuid range" in ranged.found

    def none() -> object:
        raise ImageError("building an image needs a range for u in /etc/subuid (add ...)")

    absent = doctor.check_image_builds(none, slirp)
    assert absent.status == doctor.ABSENT and absent.found.endswith("in /etc/subuid")
    assert "/etc/subuid and /etc/subgid" in (absent.fix or "")

    def no_slirp() -> str:
        raise ImageError("no slirp4netns")

    offline = doctor.check_image_builds(lambda: id_ranges(0, 0, "root", "", ""), no_slirp)
    assert offline.status == doctor.ABSENT and "a step has no way out" in offline.found
    assert "--network none" in offline.means and offline.fix == "apt-get install slirp4netns"


def test_a_line_per_runtime_says_whether_it_is_built_and_how_to_build_it(tmp_path: Path) -> None:
    from deepgym.runtimes import RuntimeStore
    from tests.built_runtimes import fake_scientific

    store = RuntimeStore(tmp_path)
    stdlib, missing = doctor.check_runtimes(store)
    assert (stdlib.name, stdlib.status) == ("runtime stdlib", doctor.OK)
    assert host.SANDBOX_PYTHON in stdlib.found and "standard library only" in stdlib.found
    assert (missing.name, missing.status) == ("runtime scientific", doctor.ABSENT)
    assert missing.found == f"not built for Python {sys.version.split()[0]} in {tmp_path}"
    assert "built at the first run that names it" in missing.means
    assert missing.fix == "deepgym runtime build scientific"
    folder = fake_scientific(tmp_path)
    _, built = doctor.check_runtimes(store)
    assert built.status == doctor.OK and not built.fix
    assert built.found.startswith("numpy stand-in") and str(folder) in built.found
