"""The bwrap policy table, row by row (pure: no sandbox starts).

Each row must reach exactly the roles this file names for it, and each role's command line must
be the one the backends built before the table existed (captured below as data, with made-up
host facts). bwrap applies mounts in order, so order is checked as well as membership.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from deepgym.judge.codes import IN_RUNTIME, IN_RUNTIMES, SOLUTION_UID
from deepgym.sandbox import policy
from deepgym.sandbox.policy import JUDGE_UID, ROOT_UID, RULES, Params, Rule, argv, rules_for

SOLUTION, VERIFIER, WORKER, PROBE, SESSION = "solution", "verifier", "worker", "probe", "session"
BUILD = "build"
EVERY = {SOLUTION, BUILD, VERIFIER, WORKER, PROBE, SESSION}
JUDGES = {VERIFIER, WORKER}
HOSTILE = {SOLUTION, BUILD, SESSION}

EXPECTED_ROLES: dict[str, set[str]] = {
    "namespaces": EVERY,
    "init_of_ours": {SOLUTION, BUILD},
    "own_user_namespace": HOSTILE,
    "no_user_namespaces": HOSTILE,
    "no_capabilities": HOSTILE,
    "die_with_parent": EVERY,
    "new_session": {SOLUTION, BUILD, VERIFIER, WORKER, SESSION},
    "clean_environment": JUDGES | {SESSION},
    "private_tmp": JUDGES,
    "system_read_only": EVERY,
    "judge_read_only": {SOLUTION, BUILD, VERIFIER, WORKER, SESSION},
    "runtime_read_only": {SOLUTION},
    "runtimes_read_only": {WORKER},
    "run_files": {VERIFIER},
    "session_files": {SESSION},
    "staged_environments": {WORKER},
    "work_mount_point": {WORKER},
    "pool_cgroups": {WORKER},
    "devices": EVERY,
    "no_proc": {SOLUTION},
    "own_proc": {BUILD, VERIFIER, WORKER, PROBE, SESSION},
    "capped_work_dir": HOSTILE,
    "answer_read_only": {SOLUTION, BUILD},
    "precompiled_headers": {BUILD},
    "run_cgroups": HOSTILE,
    "capped_tmp": HOSTILE,
    "capped_shm": HOSTILE,
    "read_only_rest": HOSTILE,
    "solution_uid": HOSTILE,
    "root_chown": {SESSION},
    "judge_uid": {VERIFIER, WORKER, PROBE},
    "solution_hostname": HOSTILE,
    "judge_hostname": JUDGES,
    "solution_workdir": HOSTILE,
    "judge_workdir": JUDGES,
    "boot": {SOLUTION, BUILD, VERIFIER, WORKER, SESSION},
}
"""Which roles each rule reaches: this file's own statement, checked against the table."""

HOST = Params(
    bwrap="/usr/bin/bwrap",
    system=("--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib"),
    judge_dir="/site/deepgym/judge",
    python="/usr/bin/python3.11",
)
LIMITS = '{"cpu_s": 4, "fsize_bytes": 16777216, "nofile": 256, "nproc": 16, "core": 0}'
RUN_DIR = "/tmp/deepgym-abc/run-xyz"
ENVS = "/tmp/deepgym-abc/envs"
RUN_PROCS = {
    "memory": "/sys/fs/cgroup/memory/deepgym/r1/cgroup.procs",
    "pids": "/sys/fs/cgroup/pids/deepgym/r1/cgroup.procs",
}
POOL_PARENTS = {
    "memory": "/sys/fs/cgroup/memory/deepgym",
    "pids": "/sys/fs/cgroup/pids/deepgym",
}
SIZE = 32 * 2**20
RUNTIMES = "/home/u/.deepgym/runtimes"


def params(case: str) -> Params:
    """The parameters each backend passed for ``case`` (a role, or a solution's mode)."""
    if case == BUILD:
        command = ("solution", "build", "/work/solution.py", LIMITS, "{}")
        return replace(HOST, command=command, run_dir=RUN_DIR, cgroups=RUN_PROCS, size=SIZE)
    if case.startswith(SOLUTION):
        mode, args = ("script", ("a", "1")) if case.endswith("script") else ("module", ())
        command = ("solution", mode, "/work/solution.py", LIMITS, *args)
        return replace(HOST, command=command, run_dir=RUN_DIR, cgroups=RUN_PROCS, size=SIZE)
    if case == VERIFIER:
        command = ("verifier", "/judge/job.json", "7")
        return replace(HOST, command=command, run_dir=RUN_DIR, env_dir=f"{ENVS}/0123")
    if case == WORKER:
        procs = ("/cg/memory/pool-1-ab/cgroup.procs", "/cg/pids/pool-1-ab/cgroup.procs")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "HOME": "/work"}
        return replace(
            HOST,
            command=("worker", "5", "6", *procs),
            env={**env, "LD_BIND_NOW": "1"},
            envs_dir=ENVS,
            cgroups=POOL_PARENTS,
        )
    if case == SESSION:
        return replace(
            HOST,
            command=("session",),
            env={"HOME": "/work"},
            cgroups=RUN_PROCS,
            size=SIZE,
            seed_dir=f"{ENVS}/0123/repo",
        )
    return Params(bwrap=HOST.bwrap, system=HOST.system)


def role_of(case: str) -> str:
    return SOLUTION if case.startswith(SOLUTION) else case


_SOLUTION_BEFORE = [
    "/usr/bin/bwrap",
    "--unshare-all",
    "--as-pid-1",
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/usr",
    "/usr",
    "--symlink",
    "usr/lib",
    "/lib",
    "--ro-bind",
    "/site/deepgym/judge",
    "/opt/deepgym/deepgym_judge",
    "--dev",
    "/dev",
    "--tmpfs",
    "/proc",
    "--size",
    "33554432",
    "--tmpfs",
    "/work",
    "--ro-bind",
    "/tmp/deepgym-abc/run-xyz/answer/solution.py",
    "/work/solution.py",
    "--bind",
    "/sys/fs/cgroup/memory/deepgym/r1/cgroup.procs",
    "/cg/memory.procs",
    "--bind",
    "/sys/fs/cgroup/pids/deepgym/r1/cgroup.procs",
    "/cg/pids.procs",
    "--size",
    "33554432",
    "--tmpfs",
    "/tmp",
    "--size",
    "33554432",
    "--tmpfs",
    "/dev/shm",
    "--remount-ro",
    "/dev",
    "--remount-ro",
    "/proc",
    "--remount-ro",
    "/",
    "--uid",
    "65534",
    "--gid",
    "65534",
    "--hostname",
    "sandbox",
    "--chdir",
    "/work",
    "/usr/bin/python3.11",
    "-I",
    "-S",
    "/opt/deepgym/deepgym_judge/_boot.py",
    "solution",
]
BEFORE: dict[str, list[str]] = {
    "solution-module": [*_SOLUTION_BEFORE, "module", "/work/solution.py", LIMITS],
    "solution-script": [*_SOLUTION_BEFORE, "script", "/work/solution.py", LIMITS, "a", "1"],
    "verifier": [
        "/usr/bin/bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib",
        "/lib",
        "--ro-bind",
        "/site/deepgym/judge",
        "/opt/deepgym/deepgym_judge",
        "--ro-bind",
        "/tmp/deepgym-abc/envs/0123",
        "/judge/env",
        "--ro-bind",
        "/tmp/deepgym-abc/run-xyz/answer",
        "/judge/answer",
        "--ro-bind",
        "/tmp/deepgym-abc/run-xyz/job.json",
        "/judge/job.json",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "judge",
        "--chdir",
        "/tmp",
        "/usr/bin/python3.11",
        "-I",
        "-S",
        "/opt/deepgym/deepgym_judge/_boot.py",
        "verifier",
        "/judge/job.json",
        "7",
    ],
    "worker": [
        "/usr/bin/bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "PYTHONHASHSEED",
        "0",
        "--setenv",
        "HOME",
        "/work",
        "--setenv",
        "LD_BIND_NOW",
        "1",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib",
        "/lib",
        "--ro-bind",
        "/site/deepgym/judge",
        "/opt/deepgym/deepgym_judge",
        "--ro-bind",
        "/tmp/deepgym-abc/envs",
        "/judge/envs",
        "--dir",
        "/work",
        "--bind",
        "/sys/fs/cgroup/memory/deepgym",
        "/cg/memory",
        "--bind",
        "/sys/fs/cgroup/pids/deepgym",
        "/cg/pids",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--hostname",
        "judge",
        "--chdir",
        "/tmp",
        "/usr/bin/python3.11",
        "-I",
        "-S",
        "/opt/deepgym/deepgym_judge/_boot.py",
        "worker",
        "5",
        "6",
        "/cg/memory/pool-1-ab/cgroup.procs",
        "/cg/pids/pool-1-ab/cgroup.procs",
    ],
    "probe": [
        "/usr/bin/bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/lib",
        "/lib",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--uid",
        "1000",
        "--gid",
        "1000",
    ],
}
"""Each role's command line as the backends built it inline before the policy table (captured
from that code with the host facts of ``HOST`` and the paths of ``params``)."""

ARITY = {
    "--unshare-all": 0,
    "--as-pid-1": 0,
    "--unshare-user": 0,
    "--disable-userns": 0,
    "--die-with-parent": 0,
    "--new-session": 0,
    "--clearenv": 0,
    "--cap-drop": 1,
    "--tmpfs": 1,
    "--dev": 1,
    "--proc": 1,
    "--dir": 1,
    "--remount-ro": 1,
    "--uid": 1,
    "--gid": 1,
    "--hostname": 1,
    "--chdir": 1,
    "--seccomp": 1,
    "--setenv": 2,
    "--ro-bind": 2,
    "--bind": 2,
    "--symlink": 2,
}
"""How many arguments each bwrap option these sandboxes use takes (``--size`` aside)."""


def operations(args: Sequence[str]) -> list[tuple[str, ...]]:
    """bwrap's operations, in order: each option with its arguments, ``--size N --tmpfs X`` as
    one operation (the size applies to that tmpfs only), then the command as one."""
    ops: list[tuple[str, ...]] = []
    i = 0
    while i < len(args):
        if args[i] == "--size":
            assert args[i + 2] == "--tmpfs", f"--size not followed by --tmpfs: {args[i:]}"
            ops.append(("--tmpfs", args[i + 3], "size=" + args[i + 1]))
            i += 4
        elif args[i] in ARITY:
            n = ARITY[args[i]]
            ops.append(tuple(args[i : i + 1 + n]))
            i += 1 + n
        else:
            assert not args[i].startswith("--"), f"an option this test does not know: {args[i]}"
            ops.append(("command", *args[i:]))
            break
    return ops


def contains(ops: list[tuple[str, ...]], part: list[tuple[str, ...]]) -> bool:
    """Whether ``part`` occurs in ``ops`` as one unbroken run."""
    return any(ops[i : i + len(part)] == part for i in range(len(ops) - len(part) + 1))


CASES = ["solution-module", "solution-script", BUILD, VERIFIER, WORKER, PROBE, SESSION]
BY_NAME = {rule.name: rule for rule in RULES}


def test_the_table_has_exactly_the_rules_this_file_checks() -> None:
    assert [r.name for r in RULES] == list(EXPECTED_ROLES)  # in the order bwrap applies them
    assert set(policy.ROLES) == EVERY
    for rule in RULES:
        assert rule.does and rule.why, rule.name
        assert rule.roles and rule.roles <= EVERY, rule.name


FULL = replace(
    HOST,
    command=("role", "args"),
    env={"HOME": "/work"},
    run_dir=RUN_DIR,
    env_dir=f"{ENVS}/0123",
    envs_dir=ENVS,
    cgroups=RUN_PROCS,
    size=SIZE,
    seed_dir="/tmp/deepgym-abc/envs/0123/repo",
    snapshot_dir="/tmp/deepgym-abc/session-1/snapshot",
    seccomp_fd=9,
    headers_dir="/home/u/.deepgym/pch/cpp-0123",
    runtime_dir=f"{RUNTIMES}/scientific-cpython-311-x86_64-0123456789ab",
    runtimes_dir=RUNTIMES,
)
"""Every parameter set: a rule adds something for any role, so one that is absent is absent
because of the role, not for want of a path."""


@pytest.mark.parametrize("name", list(EXPECTED_ROLES))
@pytest.mark.parametrize("role", sorted(EVERY))
def test_a_rule_reaches_its_roles_and_no_other(name: str, role: str) -> None:
    rule: Rule = BY_NAME[name]
    wanted = role in EXPECTED_ROLES[name]
    assert (rule in rules_for(role)) == wanted
    part = operations(rule.args(FULL))
    assert part, f"{name} adds nothing"
    assert contains(operations(argv(role, FULL)[1:]), part) == wanted


@pytest.mark.parametrize("case", [c for c in CASES if c not in (SESSION, BUILD)])  # no before
def test_each_role_is_the_command_line_the_backends_built_before(case: str) -> None:
    assert argv(role_of(case), params(case)) == BEFORE[case]


@pytest.mark.parametrize("case", CASES)
def test_every_cap_and_read_only_remount_is_in_its_place(case: str) -> None:
    ops = operations(argv(role_of(case), params(case))[1:])  # (a --size alone would raise)
    mounts = [i for i, op in enumerate(ops) if op[0] in ("--tmpfs", "--ro-bind", "--bind")]
    remounts = [i for i, op in enumerate(ops) if op[0] == "--remount-ro"]
    assert all(r > max(mounts) for r in remounts)  # nothing mounted over a read-only folder
    if role_of(case) in HOSTILE:
        capped = {op[1] for op in ops if op[0] == "--tmpfs" and len(op) == 3}
        assert capped == {"/work", "/tmp", "/dev/shm"}  # every writable tmpfs is capped
        assert [ops[r][1] for r in remounts] == ["/dev", "/proc", "/"]


def test_the_solution_never_shares_the_judges_uid() -> None:
    assert SOLUTION_UID != JUDGE_UID
    for role in sorted(EVERY):
        ops = operations(argv(role, params(role))[1:])
        assert ("--uid", str(SOLUTION_UID if role in HOSTILE else JUDGE_UID)) in ops


def test_a_build_is_the_solution_sandbox_with_a_proc_of_its_own() -> None:
    solution = argv(SOLUTION, params("solution-script"))
    build = argv(BUILD, params(BUILD))
    i = solution.index("--tmpfs")
    assert solution[i : i + 2] == ["--tmpfs", "/proc"]
    assert build[:i] == solution[:i] and build[i : i + 2] == ["--proc", "/proc"]
    assert build[i + 2 : build.index("solution")] == solution[i + 2 : solution.index("solution")]


def test_an_unknown_role_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'guest'"):
        argv("guest", HOST)


def test_root_inside_is_a_session_on_an_image_only_and_keeps_every_other_rule() -> None:
    """``Environment.user = "root"``: uid 0 of the session's own user namespace, with the same
    rules otherwise (no capabilities, no nested namespaces, the same mounts)."""
    image = replace(params(SESSION), writable_root=True)
    as_root = argv(SESSION, replace(image, uid=ROOT_UID, seccomp_fd=7))
    plain = argv(SESSION, image)
    ops = operations(as_root[1:])
    assert ("--uid", "0") in ops and ("--gid", "0") in ops and ("--seccomp", "7") in ops
    at = as_root.index("--seccomp")
    swapped = [str(SOLUTION_UID) if a == "0" else a for a in as_root[:at] + as_root[at + 2 :]]
    assert swapped == plain  # nothing but the uid and the chown filter differs
    with pytest.raises(ValueError, match="seccomp filter"):
        argv(SESSION, replace(image, uid=ROOT_UID))
    assert "--cap-drop" in as_root and "--disable-userns" in as_root
    for role, p in [(SESSION, params(SESSION)), (SOLUTION, params("solution-script"))]:
        with pytest.raises(ValueError, match="session on an image only"):
            argv(role, replace(p, uid=ROOT_UID, seccomp_fd=7, writable_root=role == SOLUTION))


def test_the_chown_filter_jumps_where_it_means_to() -> None:
    """The BPF program, run by hand: the chown family returns 0 (errno 0), every other call
    and every other architecture's ABI runs."""
    import struct

    from deepgym.sandbox.seccomp import CHOWN_CALLS, chown_noop_filter

    def run(program: bytes, arch: int, nr: int) -> int:
        ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
        pc, acc = 0, 0
        while True:
            code, jt, jf, k = ops[pc]
            if code == 0x20:
                acc = arch if k == 4 else nr
            elif code == 0x15:
                pc += jt if acc == k else jf
            elif code == 0x06:
                return k
            pc += 1

    for machine, (arch, calls) in CHOWN_CALLS.items():
        program = chown_noop_filter(machine)
        for nr in calls:
            assert run(program, arch, nr) == 0x00050000
        for nr in (0, 1, 2, 59, 101, 157, 272, 435):
            if nr not in calls:
                assert run(program, arch, nr) == 0x7FFF0000
        assert run(program, 0x40000003, calls[0]) == 0x7FFF0000  # another ABI
    with pytest.raises(ValueError, match="no chown filter"):
        chown_noop_filter("mips")


def test_a_runtime_is_mounted_read_only_for_the_answer_alone() -> None:
    """An answer's runtime: read-only at ``IN_RUNTIME`` in its solution sandbox, before the root
    is made read-only (its mount point is bwrap's to make); a pool worker gets every runtime
    read-only and the mount point; the verifier none. Without one, nothing is mounted."""
    built = f"{RUNTIMES}/scientific-cpython-311-x86_64-0123456789ab"
    solution = operations(argv(SOLUTION, replace(params("solution-script"), runtime_dir=built))[1:])
    mount = ("--ro-bind", built, IN_RUNTIME)
    assert solution.count(mount) == 1
    assert solution.index(mount) < solution.index(("--remount-ro", "/"))
    assert solution.index(mount) > solution.index(("--ro-bind", "/usr", "/usr"))
    worker = operations(argv(WORKER, replace(params(WORKER), runtimes_dir=RUNTIMES))[1:])
    assert contains(worker, [("--ro-bind", RUNTIMES, IN_RUNTIMES), ("--dir", IN_RUNTIME)])
    verifier = operations(argv(VERIFIER, FULL)[1:])
    assert not any(IN_RUNTIME in op or IN_RUNTIMES in op for op in verifier)
    for case in CASES:  # no runtime named: nothing of one
        ops = argv(role_of(case), params(case))
        assert IN_RUNTIME not in ops and IN_RUNTIMES not in ops, case
