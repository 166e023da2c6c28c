"""What a backend tells the judge about one run: the job's kind and paths, the solution's
rlimits and environment, and the host's own wall limit on a run (``wall_limit``).

Pure functions of a ``Job``, shared by every backend (``strict``, ``unsafe``, ``pool``).
"""

from __future__ import annotations

import math
import os
from typing import Any

from deepgym import languages
from deepgym.judge.blame import BACKSTOP
from deepgym.judge.build import RUN_NAME
from deepgym.sandbox import cgroups
from deepgym.sandbox.base import Job
from deepgym.sandbox.policy import BASE_ENV

START_GRACE_S = 2.0
"""How far past a run's own backstop its sandbox may go before the host kills it (starting
the sandbox and sending the report take time too)."""


def wall_limit(job: Job) -> float:
    """The host's wall limit on a whole run, in seconds: the judge's backstop (``BACKSTOP``
    times the run's limit, which the judge counts in the answer's CPU time) and the start grace.
    Shorter, and the host would kill a run the judge is still fairly waiting on: a right answer
    held back by a busy host, which is to be judged once it has run, or has no verdict."""
    return BACKSTOP * job.timeout + START_GRACE_S


def job_spec(job: Job, env_in: str, answer_path: str) -> dict[str, Any]:
    """What the judge needs of a job, with paths as its sandbox sees them (``env_in``: the
    environment's folder; ``answer_path``: the answer's file, for the in-play audit)."""
    env = job.env
    custom = env.verifier_code is not None or env.verifier_path is not None
    return {
        "kind": env.kind,
        "entry_point": env.entry_point,
        "compare": env.compare,
        "timeout": job.timeout,
        "case_timeout": job.case_timeout,
        "test_cases_path": f"{env_in}/test_cases.json" if env.test_cases is not None else None,
        "verifier_path": f"{env_in}/verifier.py" if custom else None,
        "repo_path": f"{env_in}/repo" if env.repo_path is not None else None,
        "answer_path": answer_path,
        "run_argv": run_argv(job) if env.language != "python" else None,
        "report": languages.LANGUAGES[env.language].report if env.language != "python" else None,
        "proc": env.language != "python" and languages.LANGUAGES[env.language].proc,
        "checker_path": f"{env_in}/checker.py" if env.checker_path is not None else None,
        "case_limit": env.case_limit,
        "stop_on_failure": env.stop_on_failure,
        "keep_output": env.keep_output,
        "kept_output": env.kept_output_kb * 1024,
        "timeout_kind": env.timeout_kind,
        **_input_spec(job),
    }


def _input_spec(job: Job) -> dict[str, Any]:
    """The run's own cases (inline, in place of the staged file) and files, where it has any
    (``base.RunInput``)."""
    given = job.input
    if given is None:
        return {}
    out: dict[str, Any] = {}
    if given.cases is not None:
        out["test_cases"], out["test_cases_path"] = list(given.cases), None
    if given.files:
        out["files"] = dict(given.files)
    if given.fetch:
        out["fetch"] = list(given.fetch)
    return out


def run_argv(job: Job) -> list[str]:
    """A compiled language's command line for each case (``judge.build``'s ``exec`` mode):
    its programs' full paths, the run's memory limit filled in, ``{program}`` kept."""
    lang = languages.language(job.env.language)
    tools = languages.toolchain(lang.name).tools
    env, words = languages.run_words(lang.run_argv)
    words = [w.replace("{memory_mb}", str(job.env.memory_mb)) for w in words]
    program = tools.get(words[0], words[0])
    # A program that finds its libraries beside its own real path ($ORIGIN, as the JDK's
    # launcher does) reads that path from /proc, which a solution lacks: say it here.
    origin = [f"LD_ORIGIN_PATH={os.path.dirname(os.path.realpath(program))}"] if lang.origin else []
    # A program that must run under a name of its own (a test runner's file): a copy so named.
    named = [f"{RUN_NAME}={lang.run_name}"] if lang.run_name else []
    return [*env, *origin, *named, program, *words[1:]]


def rlimits(job: Job, group: cgroups.RunCgroup | cgroups.Slot) -> dict[str, int]:
    """The solution process's hard limits (``solution_host.apply_limits``); memory as an
    address-space limit only where no memory cgroup holds it."""
    env = job.env
    limits = {
        "cpu_s": math.ceil(job.timeout) + 1,
        "fsize_bytes": env.max_file_mb * 2**20,
        "nofile": 256,
        "nproc": env.max_processes,
        "core": 0,
    }
    if not group.holds("memory"):
        lang = languages.LANGUAGES.get(env.language)
        slack = lang.extra_address_space_mb if lang is not None else 0
        limits["as_bytes"] = (env.memory_mb + slack) * 2**20
    return limits


def work_bytes(job: Job) -> int:
    """The size cap of each of a solution's writable tmpfs (its work dir, /tmp, /dev/shm)."""
    return job.env.max_file_mb * 2 * 2**20


def solution_env(home: str) -> dict[str, str]:
    """The whole environment of a solution process: nothing of the host's."""
    return {**BASE_ENV, "PYTHONHASHSEED": "0", "HOME": home}
