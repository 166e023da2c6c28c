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
the sandbox's failure, never the answer's."""

STATUS_FD_ENV = "DEEPGYM_STATUS_FD"
"""The variable that names, to a strict solution sandbox's init (``judge.init.supervise``), the
pipe on which it writes the solution process's wait status for the host."""

SOLUTION_UID = 65534
"""The uid (and gid) every solution process runs as, in every sandbox: never the verifier's, so
the answer cannot read the verifier's memory (``/proc/<pid>/mem``; there is no Yama LSM)."""

MSG_MAX = 65536
"""The largest message on a control socket (a spawn request and its reply, between a verifier
and the host or a pool worker's zygote)."""

KEPT_STDOUT_CHARS = 2**20
"""The most of one case's stdout a script task that keeps its output (``keep_output``) reports;
the report travels as one line, which the host reads up to a few MiB."""

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
