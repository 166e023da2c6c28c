"""The numbers, paths and names that the host and the judge must agree on, in one place.

Standard library only and no imports at all: ``deepgym.verdict`` (the pure contract) reads
``VERIFIER_BROKEN`` from here without loading any of the judge's sandbox code, and inside the
sandbox (where this package is ``deepgym_judge``) it costs one small module.
"""

VERIFIER_BROKEN = 2
"""The exit code of a verifier that reports its own failure: no verdict, in play or not. The
judge also exits with it when a verifier misuses calls sent ahead."""

SETUP_FAILED = 121
"""The exit code of a solution process whose own set-up failed (before any of the answer ran):
the sandbox's failure, never the answer's. An answer may exit with it too: a script's or a
program's process says on its reply pipe when the answer begins (``BEGAN``), and from then on
its exit code is the answer's, whatever it is."""
BEGAN = b"S"
"""What a script's or a program's solution process writes on its reply pipe once its set-up is
done, just before the answer runs (then the pipe is closed to it: a program's on its ``exec``)."""
EXEC_FAILED = b"X"
"""Written after ``BEGAN`` where a program's ``exec`` failed: the answer never ran (ours)."""

KILLED_BY = "killed by signal"
"""How the judge says a solution process ended by a signal (``... killed by signal 9``): the host
names the memory limit in a case whose process ``SIGKILL`` ended at that limit."""

STOP_SIGNALS = frozenset({1, 2, 9, 15})
"""SIGHUP, SIGINT, SIGKILL and SIGTERM, by number (this module imports nothing): the signals
that end a process only when another process (or the kernel's OOM killer) sends them. A
process's own faults end it with others (SIGSEGV, SIGBUS, SIGABRT, SIGXCPU, ...). The contract
(``deepgym.verdict``) and a compiled language's build (``build``) read the same set."""
STATUS_FD_ENV = "DEEPGYM_STATUS_FD"
"""The variable that names, to a strict solution sandbox's init (``judge.init.supervise``), the
pipe on which it writes the solution process's wait status for the host."""

SOLUTION_UID = 65534
"""The uid (and gid) every solution process runs as, in every sandbox: never the verifier's, so
the answer cannot read the verifier's memory (``/proc/<pid>/mem``; there is no Yama LSM)."""

MSG_MAX = 65536
"""The largest message on a control socket (a spawn request and its reply, between a verifier
and the host or a pool worker's zygote)."""

KEPT_OUTPUT_BYTES = 2**20
"""How much of each output stream of a solution process comes back by default (an environment's
``kept_output_kb``): ``RunResult.stdout`` and ``stderr``, and each kept case's output. Past it,
the stream's first part and its last ``OUTPUT_TAIL_BYTES`` come back (``launch.Stream``)."""

OUTPUT_TAIL_BYTES = 4096
"""The end of a stream kept beside its first part, whatever its size: a traceback's last frames
and its error, which a case's message names."""

MAX_OUTPUT_BYTES = 16 * 2**20
"""Every task's output limit: the bytes one solution process may write to stdout and stderr
together (and a reply it sends). Past it the process is killed (``limit_fired:
"output_size"``): the answer's judged 0, as a contest judge's output limit. A script case whose
``expected_stdout`` is longer is refused before anything runs: no answer could pass it."""

MAX_CASE_ARGS_BYTES = 32 * 1024
"""A script case's arguments at most, as JSON: they travel in the spawn request (``MSG_MAX``,
beside the job's paths and limits, and a compiled program's command line), and a case whose
arguments could not would never start. Refused when the environment is made."""

REPORT_MAX_BYTES = 2**24
"""The longest line the host reads on the result channel. The judge fits its report under it
(``report.fit``), so a report is never lost to its size: what the answer printed cannot turn
its verdict into none."""

IN_RUNTIME = "/opt/deepgym/runtime"
"""Where an answer's runtime (``deepgym.runtimes``: packages beside the judge's interpreter) is
mounted read-only in its sandbox, when its environment names one: its packages are in
``site-packages`` there."""

IN_RUNTIMES = "/opt/deepgym/runtimes"
"""Where a pool worker's sandbox mounts every built runtime, read-only: each solution process
mounts its run's own at ``IN_RUNTIME``, and sees none of the others (the zygote covers them)."""

RUNTIME_ENV = "DEEPGYM_RUNTIME"
"""The variable that names, to a solution process, the folder of its runtime's packages (it
takes it out of the environment the answer sees, and puts the folder last on ``sys.path``)."""

ANSWER_PATH = "/tmp/answer/solution.py"
"""Where a pool worker puts each run's answer: its own tmpfs, which every solution process covers
with a fresh one once it has read the answer (the zygote never reads it). The host names this
path in the job."""

MODEL_FAULT_STATUSES = frozenset(
    {
        "invalid_patch",
        "patch_apply_failed",
        "test_infra_tampering",
        "solution_error",
        "solution_timeout",
        "policy_sandbox_failure",
        "compile_error",
    }
)
"""The failures that are the answer's (``deepgym.verdict.MODEL_FAULT_ERRORS`` is built from
them): the only statuses besides ``ok`` a verifier's returned value may report."""
