"""The bwrap policy of every deepgym sandbox, as one table of rules.

Each row (``Rule``) is one rule: what it does, why (the threat it answers), the roles that get it,
and its bwrap arguments. The roles:

- ``solution``: ``strict``'s sandbox of one answer's process (hostile code);
- ``build``: a compiler's sandbox over an answer's source (``sandbox.programs``): the
  ``solution`` policy, with a ``/proc`` of its own pid namespace (rustc and the JVM read
  ``/proc/self``), as an agent session has;
- ``verifier``: ``strict``'s sandbox of one run's verifier (trusted code, sandboxed all the same);
- ``worker``: a pool worker, which runs verifiers and has its zygote fork each answer's process
  (``deepgym.judge.worker`` isolates each solution further, inside this sandbox);
- ``probe``: the plainest sandbox with the system in it (the host check, the benchmarks' floor);
- ``session``: an agent session's sandbox (hostile code, many steps: a shell, its own /proc),
  and the fresh one its final verifier runs in over a snapshot of the agent's work dir.

``argv(role, params)`` is the bwrap command line of a role: its rows, in table order. Order is
meaning, because bwrap applies mount operations in the order given: a ``--size`` comes right
before the ``--tmpfs`` it caps, and the ``--remount-ro`` row comes after every mount beneath the
folders it makes read-only. Pure: nothing here reads the host or starts a process; the host's
facts (the bwrap binary, the system's folders, the judge's) come in ``Params``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from deepgym.judge.codes import IN_RUNTIME, IN_RUNTIMES, SOLUTION_UID

SOLUTION = "solution"
BUILD = "build"
VERIFIER = "verifier"
WORKER = "worker"
PROBE = "probe"
SESSION = "session"
ROLES = (SOLUTION, BUILD, VERIFIER, WORKER, PROBE, SESSION)
"""Every sandbox role the table knows."""

ROOT_UID = 0
"""A session's uid on an image whose task runs as root: uid 0 of its own user namespace only."""
JUDGE_UID = 1000
"""The uid and gid of the judge's sandboxes (verifier, worker, probe): never the solution's."""
IN_JUDGE = "/opt/deepgym/deepgym_judge"
"""Where the judge package is mounted in a sandbox (its name there: ``deepgym_judge``)."""
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The variables every sandboxed process starts from; nothing else of the host's."""
RUN_CGROUP = "/cg/{}.procs"
"""Where a ``solution`` sandbox finds the run's ``cgroup.procs`` file of a controller."""
POOL_CGROUP = "/cg/{}"
"""Where a ``worker`` sandbox finds the pool's parent group of a controller."""


@dataclass(frozen=True)
class Params:
    """What a role's rows are built from: the host's facts and the sandbox's own paths.

    A field serves the roles named beside it; the others ignore it."""

    bwrap: str
    """The bwrap binary (``host.find_bwrap().path``)."""
    system: Sequence[str] = ()
    """bwrap arguments that mount the system's programs read-only (``host.system_binds()``)."""
    judge_dir: str = ""
    """The judge package on the host (solution, verifier, worker)."""
    python: str = ""
    """The interpreter that runs ``_boot.py`` (solution, verifier, worker)."""
    command: Sequence[str] = ()
    """``_boot.py``'s arguments: the judge's role and its own (solution, verifier, worker)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set inside, over ``BASE_ENV`` (verifier, worker)."""
    run_dir: str = ""
    """The run's folder on the host: ``answer/solution.py`` and ``job.json`` (verifier,
    solution)."""
    env_dir: str = ""
    """The run's staged environment files (verifier)."""
    envs_dir: str = ""
    """Every staged environment, one folder each (worker)."""
    cgroups: Mapping[str, str] = field(default_factory=dict)
    """Controller -> a host path: the run's ``cgroup.procs`` file (solution), or the pool's
    parent group (worker)."""
    size: int = 0
    """The size cap, in bytes, of each writable tmpfs (solution, session)."""
    seed_dir: str = ""
    """Files copied into a session's work dir when it opens (session)."""
    snapshot_dir: str = ""
    """The agent's work dir, for the final verifier (session)."""
    base_env: Mapping[str, str] = field(default_factory=dict)
    """Variables set over ``BASE_ENV`` and under ``env``: an image's (session)."""
    launcher: Sequence[str] = ()
    """What ``python`` runs under: on an image, the host's dynamic loader and its library path
    (``image_root.launcher``); empty on the host (session)."""
    runtime_dir: str = ""
    """The answer's runtime on the host (``deepgym.runtimes``), or empty: none (solution)."""
    runtimes_dir: str = ""
    """Every built runtime's folder on the host, or empty: none (worker)."""
    writable_root: bool = False
    """The root is an image's overlay with a tmpfs layer of the sandbox's own: not remounted
    read-only (session)."""
    uid: int = SOLUTION_UID
    """The uid and gid inside (solution, build, session): ``SOLUTION_UID``, or ``ROOT_UID``
    for a session on an image whose task runs as root (``Environment.user``)."""
    seccomp_fd: int = -1
    """A session run as root: the descriptor of ``seccomp.chown_noop_filter`` for bwrap."""
    headers_dir: str = ""
    """A folder holding a precompiled header the compiler may use (``sandbox.headers``; build:
    none where empty)."""


@dataclass(frozen=True)
class Rule:
    """One rule of the policy: its bwrap arguments, for the roles that get it."""

    name: str
    roles: frozenset[str]
    does: str
    why: str
    args: Callable[[Params], list[str]]


def _fixed(*args: str) -> Callable[[Params], list[str]]:
    return lambda p: list(args)


def _setenv(p: Params) -> list[str]:
    out = ["--clearenv"]
    for key, value in {**BASE_ENV, **p.base_env, **p.env}.items():
        out += ["--setenv", key, value]
    return out


def _run_files(p: Params) -> list[str]:
    return [
        *("--ro-bind", p.env_dir, "/judge/env"),
        *("--ro-bind", f"{p.run_dir}/answer", "/judge/answer"),
        *("--ro-bind", f"{p.run_dir}/job.json", "/judge/job.json"),
    ]


def _binds(target: str) -> Callable[[Params], list[str]]:
    """Writable binds of ``params.cgroups``, each at ``target`` formatted with its controller."""

    def args(p: Params) -> list[str]:
        out: list[str] = []
        for ctrl, path in p.cgroups.items():
            out += ["--bind", path, target.format(ctrl)]
        return out

    return args


def _capped_tmpfs(target: str) -> Callable[[Params], list[str]]:
    return lambda p: ["--size", str(p.size), "--tmpfs", target]


def boot_command(python: str, judge: str, args: Sequence[str]) -> list[str]:
    """The judge's entry point, ``judge/_boot.py`` with ``args``, in an isolated interpreter."""
    return [python, "-I", "-S", f"{judge}/_boot.py", *args]


ALL = frozenset(ROLES)
JUDGES = frozenset({VERIFIER, WORKER})

RULES: tuple[Rule, ...] = (
    Rule(
        "namespaces",
        ALL,
        "New pid, mount, network, ipc, uts and cgroup namespaces (and a user one, where allowed).",
        "No network, and no view of the host's processes, mounts, hostname or IPC objects.",
        _fixed("--unshare-all"),
    ),
    Rule(
        "init_of_ours",
        frozenset({SOLUTION, BUILD}),
        "bwrap starts no init of its own: pid 1 is the judge's (deepgym.judge.init), which "
        "makes itself non-dumpable before it forks the solution process, pid 2, and passes "
        "its exit status on.",
        "bwrap's init would be a process of the answer's own uid that it could ptrace; and an "
        "answer that were pid 1 itself would ignore its own signals (raise(SIGTERM) returning, "
        "abort() ending by SIGSEGV). The pool's solution is pid 2 or higher under an init of "
        "ours too.",
        _fixed("--as-pid-1"),
    ),
    Rule(
        "own_user_namespace",
        frozenset({SOLUTION, BUILD, SESSION}),
        "A user namespace of its own, required rather than tried.",
        "The answer's uid and capabilities exist only there, never on the host; and "
        "--disable-userns needs it.",
        _fixed("--unshare-user"),
    ),
    Rule(
        "no_user_namespaces",
        frozenset({SOLUTION, BUILD, SESSION}),
        "No further user namespaces inside.",
        "A nested user namespace would give the answer a full set of capabilities again, and the "
        "kernel's namespace code to attack.",
        _fixed("--disable-userns"),
    ),
    Rule(
        "no_capabilities",
        frozenset({SOLUTION, BUILD, SESSION}),
        "No capabilities, the bounding set included.",
        "Nothing privileged to use, and nothing a later exec (a setuid program) could regain.",
        _fixed("--cap-drop", "ALL"),
    ),
    Rule(
        "die_with_parent",
        ALL,
        "The sandbox is killed when the process that started it dies.",
        "No sandbox outlives a host process that crashed or was killed.",
        _fixed("--die-with-parent"),
    ),
    Rule(
        "new_session",
        frozenset({SOLUTION, BUILD, VERIFIER, WORKER, SESSION}),
        "A session of its own (setsid): no controlling terminal.",
        "TIOCSTI: nothing typed into the host's terminal from inside.",
        _fixed("--new-session"),
    ),
    Rule(
        "clean_environment",
        JUDGES | {SESSION},
        "Nothing of the host's environment: BASE_ENV and the role's own variables only.",
        "Secrets in the host's environment. (A solution gets its whole environment from the "
        "process that starts it, which passes no host variable.)",
        _setenv,
    ),
    Rule(
        "private_tmp",
        JUDGES,
        "A private, empty /tmp.",
        "Nothing of the host's /tmp, where other users' and other runs' files live.",
        _fixed("--tmpfs", "/tmp"),
    ),
    Rule(
        "system_read_only",
        ALL,
        "The system's programs and libraries (with /etc/alternatives, the links that name "
        "some of them), and the interpreter's prefix, read-only; for a session on an image, "
        "the image's root at / under a tmpfs layer of its own, and the host's interpreter and "
        "libraries read-only under /opt/deepgym (image_root.system_args).",
        "No other host file is visible, and none of these is writable (an image's files on "
        "disk neither: writes land in the sandbox's own layer, gone with it).",
        lambda p: list(p.system),
    ),
    Rule(
        "judge_read_only",
        frozenset({SOLUTION, BUILD, VERIFIER, WORKER, SESSION}),
        f"The judge package, read-only, at {IN_JUDGE}.",
        "The code that judges a run cannot be changed from inside its sandbox.",
        lambda p: ["--ro-bind", p.judge_dir, IN_JUDGE],
    ),
    Rule(
        "runtime_read_only",
        frozenset({SOLUTION}),
        f"The answer's runtime, where its environment names one (its packages beside the "
        f"judge's interpreter: deepgym.runtimes), read-only, at {IN_RUNTIME}.",
        "The answer imports the runtime's packages and changes none of them; nothing else of "
        "the host's packages is there.",
        lambda p: ["--ro-bind", p.runtime_dir, IN_RUNTIME] if p.runtime_dir else [],
    ),
    Rule(
        "runtimes_read_only",
        frozenset({WORKER}),
        f"Every built runtime, read-only, at {IN_RUNTIMES}, and an empty {IN_RUNTIME}.",
        "Each solution mounts its run's runtime (if any) at the same place as strict's, then "
        "covers this folder: an answer sees its own runtime only, and can change none.",
        lambda p: (
            ["--ro-bind", p.runtimes_dir, IN_RUNTIMES, "--dir", IN_RUNTIME]
            if p.runtimes_dir
            else []
        ),
    ),
    Rule(
        "run_files",
        frozenset({VERIFIER}),
        "The run's environment files, answer and job, read-only, under /judge.",
        "The verifier sees its own run only, and changes none of it.",
        _run_files,
    ),
    Rule(
        "session_files",
        frozenset({SESSION}),
        "What the session starts from, read-only: the environment's seed files at /seed; for "
        "the final verifier, the agent's work dir at /snapshot and the environment (verifier, "
        "hidden tests) at /judge/env.",
        "The agent's sandbox never holds the hidden tests or the verifier; the verifier reads a "
        "copy of the agent's work that nothing of the agent's can change any more.",
        lambda p: [
            *(["--ro-bind", p.seed_dir, "/seed"] if p.seed_dir else []),
            *(["--ro-bind", p.snapshot_dir, "/snapshot"] if p.snapshot_dir else []),
            *(["--ro-bind", p.env_dir, "/judge/env"] if p.snapshot_dir else []),
        ],
    ),
    Rule(
        "staged_environments",
        frozenset({WORKER}),
        "Every staged environment's files, read-only, under /judge/envs.",
        "A worker judges any environment, and can change none (test data, verifiers).",
        lambda p: ["--ro-bind", p.envs_dir, "/judge/envs"],
    ),
    Rule(
        "work_mount_point",
        frozenset({WORKER}),
        "An empty /work folder.",
        "Each solution mounts its capped work dir there, in a root the zygote has made "
        "read-only by then.",
        _fixed("--dir", "/work"),
    ),
    Rule(
        "pool_cgroups",
        frozenset({WORKER}),
        "The pool's cgroup folders, one per controller, writable, under /cg.",
        "The host sets each run's memory and process limits on the worker's group, and each "
        "solution joins it: limits over everything the answer starts.",
        _binds(POOL_CGROUP),
    ),
    Rule(
        "devices",
        ALL,
        "A minimal /dev (null, zero, full, random, urandom, tty, and the like).",
        "No host device nodes.",
        _fixed("--dev", "/dev"),
    ),
    Rule(
        "no_proc",
        frozenset({SOLUTION}),
        "An empty /proc.",
        "No process information at all: no other process's memory, environment or command "
        "line to read.",
        _fixed("--tmpfs", "/proc"),
    ),
    Rule(
        "own_proc",
        frozenset({BUILD, VERIFIER, WORKER, PROBE, SESSION}),
        "A /proc of the sandbox's own pid namespace.",
        "The judge reads its own solution processes there (CPU time, for a timeout's blame); "
        "nothing outside the sandbox shows.",
        _fixed("--proc", "/proc"),
    ),
    Rule(
        "capped_work_dir",
        frozenset({SOLUTION, BUILD, SESSION}),
        "A size-capped, empty work dir at /work.",
        "A file on tmpfs is memory that RLIMIT_AS does not count (and a cgroup may be missing): "
        "the size cap bounds it.",
        _capped_tmpfs("/work"),
    ),
    Rule(
        "answer_read_only",
        frozenset({SOLUTION, BUILD}),
        "The answer's file, and only it, read-only at /work/solution.py.",
        "No test data or verifier source to read, and the answer stays as it was sent.",
        lambda p: ["--ro-bind", f"{p.run_dir}/answer/solution.py", "/work/solution.py"],
    ),
    Rule(
        "precompiled_headers",
        frozenset({BUILD}),
        "A folder of precompiled headers (sandbox.headers), read-only, at /pch, where the "
        "build uses one.",
        "Built once by deepgym from the system's headers, never from an answer; no build can "
        "change what the next one reads.",
        lambda p: ["--ro-bind", p.headers_dir, "/pch"] if p.headers_dir else [],
    ),
    Rule(
        "run_cgroups",
        frozenset({SOLUTION, BUILD, SESSION}),
        "The run's cgroup.procs files, one per controller, at /cg/<controller>.procs.",
        "The solution host joins the run's groups before the answer runs: memory and process "
        "limits over everything the answer starts.",
        _binds(RUN_CGROUP),
    ),
    Rule(
        "capped_tmp",
        frozenset({SOLUTION, BUILD, SESSION}),
        "A size-capped, empty /tmp.",
        "As for the work dir: tmpfs pages escape RLIMIT_AS.",
        _capped_tmpfs("/tmp"),
    ),
    Rule(
        "capped_shm",
        frozenset({SOLUTION, BUILD, SESSION}),
        "A size-capped, empty /dev/shm.",
        "As for the work dir: shared memory on tmpfs escapes RLIMIT_AS.",
        _capped_tmpfs("/dev/shm"),
    ),
    Rule(
        "read_only_rest",
        frozenset({SOLUTION, BUILD, SESSION}),
        "bwrap's own root, /dev and /proc remounted read-only, after every mount beneath them.",
        "Nothing writable but the capped tmpfs: bwrap's root and /dev are tmpfs that no limit "
        "counts. (An image's root stays writable: its layer is charged to the session's memory "
        "cgroup, without which an image session is refused.)",
        lambda p: [
            *("--remount-ro", "/dev", "--remount-ro", "/proc"),
            *([] if p.writable_root else ["--remount-ro", "/"]),
        ],
    ),
    Rule(
        "solution_uid",
        frozenset({SOLUTION, BUILD, SESSION}),
        f"Runs as uid and gid {SOLUTION_UID}; a session on an image whose task runs as root "
        f"(Environment.user) as {ROOT_UID} of its own user namespace.",
        "Never the verifier's uid: with no Yama LSM, a process can read the memory of any "
        "process with its uid. Root inside is the same host uid as the agent's, with no "
        "capabilities (no_capabilities drops the bounding set too: an exec as root regains "
        "none) and no_new_privs: a number for tasks that expect /root and root-owned files.",
        lambda p: ["--uid", str(p.uid), "--gid", str(p.uid)],
    ),
    Rule(
        "root_chown",
        frozenset({SESSION}),
        "A session run as root: the chown family succeeds and changes nothing (a seccomp "
        "filter, seccomp.chown_noop_filter).",
        "Its namespace maps one uid and root there has no capabilities, so a task's chown (tar "
        "-x as root) would fail where its container's root succeeds; the filter grants nothing.",
        lambda p: ["--seccomp", str(p.seccomp_fd)] if p.seccomp_fd >= 0 else [],
    ),
    Rule(
        "judge_uid",
        frozenset({VERIFIER, WORKER, PROBE}),
        f"Runs as uid and gid {JUDGE_UID}: not root in its namespace.",
        "An unprivileged uid, and not the solution's (see solution_uid).",
        _fixed("--uid", str(JUDGE_UID), "--gid", str(JUDGE_UID)),
    ),
    Rule(
        "solution_hostname",
        frozenset({SOLUTION, BUILD, SESSION}),
        "The hostname 'sandbox'.",
        "The host's name is not the answer's to read (it identifies the machine).",
        _fixed("--hostname", "sandbox"),
    ),
    Rule(
        "judge_hostname",
        JUDGES,
        "The hostname 'judge'.",
        "The host's name is not the verifier's to read either.",
        _fixed("--hostname", "judge"),
    ),
    Rule(
        "solution_workdir",
        frozenset({SOLUTION, BUILD, SESSION}),
        "Starts in its work dir, /work.",
        "Never in a host folder (bwrap keeps the starter's working dir where it exists inside).",
        _fixed("--chdir", "/work"),
    ),
    Rule(
        "judge_workdir",
        JUDGES,
        "Starts in its private /tmp.",
        "Never in a host folder (bwrap keeps the starter's working dir where it exists inside).",
        _fixed("--chdir", "/tmp"),
    ),
    Rule(
        "boot",
        frozenset({SOLUTION, BUILD, VERIFIER, WORKER, SESSION}),
        "Runs the judge's entry point in an isolated interpreter (-I -S).",
        "Nothing outside the judge (no PYTHON* variable, user site or site hook) decides what "
        "runs first.",
        lambda p: [*p.launcher, *boot_command(p.python, IN_JUDGE, p.command)],
    ),
)
"""The policy, in bwrap's order of operations."""


def rules_for(role: str) -> list[Rule]:
    """The rules ``role`` gets, in table order; ``ValueError`` for an unknown role."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    return [rule for rule in RULES if role in rule.roles]


def argv(role: str, params: Params) -> list[str]:
    """The bwrap command line of a ``role`` sandbox: its rules' arguments, in table order."""
    if params.uid != SOLUTION_UID and (role != SESSION or not params.writable_root):
        raise ValueError(f"uid {params.uid} is for a session on an image only, not {role!r}")
    if params.uid == ROOT_UID and params.seccomp_fd < 0:
        raise ValueError("a session run as root needs its seccomp filter (seccomp_fd)")
    out = [params.bwrap]
    for rule in rules_for(role):
        out += rule.args(params)
    return out
