"""Whether this host lets a process make the namespaces a sandbox needs, and if not, why.

``read_facts()`` gathers what decides it (the sysctls, AppArmor's restriction, the seccomp mode,
the effective capabilities, and how far a throwaway child got making namespaces: ``_nsprobe``);
``cause(facts)`` is the pure rule that names the refusal in one line, with its fix. Both the
doctor's table and the first ``SandboxUnavailableError`` a user sees use the same ``cause``.

The causes, in the order the rule tries them:

- seccomp: a filter refuses ``unshare`` and namespace flags to ``clone`` (Docker's and
  Kubernetes' default profiles do so for a process without ``CAP_SYS_ADMIN``);
- ``user.max_user_namespaces = 0``: no user namespaces for anyone;
- ``kernel.unprivileged_userns_clone = 0`` (Debian's older kernels), for a process that is not
  root;
- ``kernel.apparmor_restrict_unprivileged_userns = 1`` (Ubuntu 23.10 and later): a program
  without an AppArmor profile gets a user namespace without capabilities, so bwrap cannot set
  it up; the system's ``/usr/bin/bwrap`` has a profile and is allowed.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROBE_SCRIPT = Path(__file__).with_name("_nsprobe.py")
CAP_SYS_ADMIN = 21
"""The capability's bit in ``CapEff``."""

SECCOMP_FIX = (
    "run the container with --security-opt seccomp=unconfined (Docker) or "
    "securityContext.seccompProfile.type: Unconfined (Kubernetes), or score on a host that "
    "allows sandboxes with DeepGym(mode='remote') (see the Deploy page)"
)
APPARMOR_FIX = (
    "install the system's bubblewrap (apt install bubblewrap: its /usr/bin/bwrap has an "
    "AppArmor profile, and deepgym uses it by itself), or set "
    "kernel.apparmor_restrict_unprivileged_userns=0"
)


@dataclass(frozen=True)
class Facts:
    """What decides whether this process may make a sandbox's namespaces."""

    uid: int
    """The effective uid (root is exempt from ``unprivileged_userns_clone``)."""
    step: str
    """How far ``_nsprobe`` got: ``user``, ``maps`` or ``others`` failed, or ``done``."""
    errno: int
    """The errno of the step that failed (0: ``done``)."""
    seccomp: int = 0
    """``Seccomp`` of ``/proc/self/status``: 0 none, 1 strict, 2 a filter."""
    cap_sys_admin: bool = False
    """``CAP_SYS_ADMIN`` is in the effective set."""
    max_user_namespaces: int | None = None
    """``user.max_user_namespaces`` (None: not readable)."""
    unprivileged_userns_clone: int | None = None
    """``kernel.unprivileged_userns_clone`` (None: the kernel has no such sysctl)."""
    apparmor_restrict: int | None = None
    """``kernel.apparmor_restrict_unprivileged_userns`` (None: no such sysctl)."""

    @property
    def allowed(self) -> bool:
        """A process like this one made every namespace a sandbox needs."""
        return self.step == "done"


def _sysctl(name: str) -> int | None:
    try:
        text = Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None
    return int(text) if text.lstrip("-").isdigit() else None


def _status() -> dict[str, str]:
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            out[key] = value.strip()
    except OSError:
        pass
    return out


def run_probe(timeout: float = 10.0) -> tuple[str, int]:
    """Run ``_nsprobe`` in a throwaway child: (the step that failed, errno) or ("done", 0)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", str(PROBE_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        return str(data["step"]), int(data["errno"])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, KeyError):
        return "user", 0


def read_facts() -> Facts:
    """This process's facts, with a fresh namespace probe."""
    status = _status()
    caps = int(status.get("CapEff", "0"), 16) if status.get("CapEff") else 0
    step, errno = run_probe()
    return Facts(
        uid=os.geteuid(),
        step=step,
        errno=errno,
        seccomp=int(status.get("Seccomp", "0") or 0),
        cap_sys_admin=bool(caps >> CAP_SYS_ADMIN & 1),
        max_user_namespaces=_sysctl("user.max_user_namespaces"),
        unprivileged_userns_clone=_sysctl("kernel.unprivileged_userns_clone"),
        apparmor_restrict=_sysctl("kernel.apparmor_restrict_unprivileged_userns"),
    )


def diagnosis(facts: Facts) -> tuple[str, str]:
    """(why namespaces are refused here, the fix), or ("", "") when they are allowed."""
    if facts.allowed:
        return "", ""
    how = f"{facts.step} step, {os.strerror(facts.errno)}" if facts.errno else facts.step
    if facts.step == "user" and facts.seccomp == 2:
        return (
            "a seccomp filter refuses to create namespaces (a container's default profile "
            f"does, without CAP_SYS_ADMIN; {how})",
            SECCOMP_FIX,
        )
    if facts.step == "user" and facts.max_user_namespaces == 0:
        return (
            "user namespaces are disabled (user.max_user_namespaces = 0)",
            "sysctl -w user.max_user_namespaces=15000",
        )
    if facts.step == "user" and facts.unprivileged_userns_clone == 0 and facts.uid != 0:
        return (
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        )
    if facts.step in ("maps", "others") and facts.apparmor_restrict == 1:
        return (
            "AppArmor restricts unprivileged user namespaces to programs with a profile "
            f"(kernel.apparmor_restrict_unprivileged_userns = 1; {how})",
            APPARMOR_FIX,
        )
    if facts.step == "user" and facts.errno == errno.EINVAL:
        return (
            "this kernel has no user namespaces (CONFIG_USER_NS)",
            "use a kernel or host that has them",
        )
    return (
        f"namespaces are refused ({how}; seccomp mode {facts.seccomp}, "
        f"CAP_SYS_ADMIN {'held' if facts.cap_sys_admin else 'not held'})",
        "run deepgym on a host or container that allows them, or score through "
        "DeepGym(mode='remote') on one that does",
    )


def cause(facts: Facts) -> str:
    """Why namespaces are refused here and the fix, one line ("" when they are allowed)."""
    why, fix = diagnosis(facts)
    return f"{why}: {fix}" if why else ""
