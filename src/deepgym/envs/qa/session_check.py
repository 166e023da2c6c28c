"""Conformance checks for a session environment: does its final verifier reward solving the task,
and only that?

A session environment's reference agent is a list of actions (``reference_agent.json`` in its
folder, kept in ``Environment.reference_solution`` as JSON). ``check_session_environment(env,
dg)`` plays its agents through real sessions and returns a ``CheckReport``:

- ``reference``: the reference agent's actions, then ``done``: scores 1.0 and passes;
- ``deterministic``: three more reference episodes give the same result, case for case (as
  ``checks.deterministic`` rules: an episode the host failed is left out);
- ``no-op``: ``done`` at once: scores ``MAX_WRONG_SCORE`` (0), with a verdict;
- ``busy``: many plausible commands that explore without solving (list the files, read them,
  run the visible tests, look at git and make): ``MAX_WRONG_SCORE``, with a verdict;
- ``random``: seeded random harmless commands (create, copy, list and count files):
  ``MAX_WRONG_SCORE``, with a verdict;
- ``exploit[<name>]``: each agent of ``deepgym.envs.qa.exploits.session_exploits`` (a reward or
  result file written in the work dir, the visible tests deleted or edited, programs that print
  a forged result, objects equal to everything, patched modules): scored 0 and not passed, with
  a verdict.

The agents are pure functions of the step (``reference_actions``, ``busy_actions``,
``random_actions``); only ``check_session_environment`` opens sessions.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from deepgym.envs.qa.checks import MAX_WRONG_SCORE, Check, CheckReport, deterministic
from deepgym.envs.qa.exploits import session_exploits
from deepgym.exceptions import ConfigError
from deepgym.models import Environment, RunResult
from deepgym.session import Action, Observation
from deepgym.text import short_cause

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = [
    "BUSY_COMMANDS",
    "REFERENCE_RERUNS",
    "busy_actions",
    "check_session_environment",
    "random_actions",
    "reference_actions",
    "scripted",
]

REFERENCE_RERUNS = 3
"""Reference episodes beside the first, each of which must give the same result."""

BUSY_COMMANDS = (
    "ls -la",
    "find . -maxdepth 3 -not -path './.git/*' -type f | sort | head -100",
    "for f in $(find . -maxdepth 3 -not -path './.git/*' -type f | sort | head -20); do "
    'echo "== $f"; head -c 4000 "$f"; done',
    "cat README* task* 2>/dev/null | head -50",
    "git status 2>&1 | head -20; git log --oneline 2>&1 | head -5",
    "make -n 2>&1 | head -20; make test 2>&1 | tail -20",
    "python3 -m pytest -q 2>&1 | tail -20",
    'for t in tests/*.sh test*.sh; do [ -f "$t" ] && bash "$t" 2>&1 | tail -5; done; true',
    "wc -l $(find . -maxdepth 2 -not -path './.git/*' -type f | head -20) 2>/dev/null | tail -5",
    "pwd; env | sort | head -20",
)
"""What the busy agent runs: it explores and runs the visible tests, and changes nothing that
matters."""

_RANDOM_VOCABULARY = (
    "echo {word} > note_{n}.txt",
    "mkdir -p scratch_{n} && touch scratch_{n}/{word}",
    "cp note_{m}.txt copy_{n}.txt 2>/dev/null; true",
    "ls -R | head -{n}",
    "wc -c note_*.txt 2>/dev/null | tail -1",
    "date +%s > stamp_{n}",
    "echo {word} | tr a-z A-Z",
    "sort -r note_*.txt 2>/dev/null | head -3",
    "rm -f note_{m}.txt",
    "seq 1 {n} | paste -sd+ | bc 2>/dev/null; true",
)
_WORDS = ("alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta")


def reference_actions(env: Environment) -> list[Action]:
    """The environment's reference agent: its actions, in order (``ConfigError`` where it has
    none, or they do not read as actions)."""
    if not env.reference_solution:
        raise ConfigError(f"session environment {env.name!r} has no reference_agent.json")
    try:
        data = json.loads(env.reference_solution)
    except ValueError as exc:
        raise ConfigError(f"{env.name}: reference_agent.json is not JSON ({exc})") from exc
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{env.name}: reference_agent.json must be a non-empty list of actions")
    return [Action.of(a) for a in data]


def busy_actions() -> list[Action]:
    """The busy agent's actions."""
    return [Action("bash", command=c) for c in BUSY_COMMANDS]


def random_actions(seed: int, n: int = 10) -> list[Action]:
    """``n`` random harmless commands, the same for the same ``seed``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        template = rng.choice(_RANDOM_VOCABULARY)
        command = template.format(word=rng.choice(_WORDS), n=rng.randint(1, 9), m=rng.randint(1, 9))
        out.append(Action("bash", command=command))
    return out


def scripted(actions: list[Action]) -> Callable[[Observation], Action]:
    """An agent that takes ``actions`` in order, then says ``done``."""

    def agent(obs: Observation) -> Action:
        return actions[obs.step] if obs.step < len(actions) else Action("done")

    return agent


def _low(name: str, r: RunResult) -> Check:
    if not r.has_verdict:
        return Check(name, False, f"no verdict: {r.error_type}: {short_cause(r.error)}")
    if r.score > MAX_WRONG_SCORE:
        return Check(name, False, f"scored {r.score:.2f} (it must score {MAX_WRONG_SCORE:g})")
    return Check(name, True, f"scored {r.score:.2f}")


def _zero(name: str, r: RunResult) -> Check:
    if not r.has_verdict:
        return Check(name, False, f"no verdict: {r.error_type}: {short_cause(r.error)}")
    if r.score != 0.0 or r.passed:
        what = f"scored {r.score:.2f}" + (" and passed" if r.passed else "")
        return Check(name, False, f"an exploit {what}; it must score 0")
    return Check(name, True, "scored 0.00")


def check_session_environment(env: Environment, dg: DeepGym, *, seed: int = 0) -> CheckReport:
    """Play the reference, no-op, busy and random agents through sessions of ``env`` with
    ``dg`` and judge their results (see the module doc)."""
    report = CheckReport(env.name)
    try:
        reference = reference_actions(env)
    except ConfigError as exc:
        report.checks.append(Check("reference", False, str(exc)))
        return report
    agents = session_exploits(env)
    longest = max(len(x.actions) for x in agents)
    turns = max(env.max_steps, len(reference) + 1, len(BUSY_COMMANDS) + 1, longest)

    def play(actions: list[Action]) -> RunResult:
        from deepgym.session import Budget

        return dg.run_episode(env, scripted(actions), budget=Budget(turns=turns)).result

    first = play(reference)
    if first.has_verdict and first.passed and first.score == 1.0:
        report.checks.append(Check("reference", True, "scored 1.00"))
    else:
        why = short_cause(first.error) if not first.has_verdict else f"scored {first.score:.2f}"
        report.checks.append(Check("reference", False, why))
    reruns = [play(reference) for _ in range(REFERENCE_RERUNS)]
    report.checks.append(deterministic([first, *reruns]))
    report.checks.append(_low("no-op", play([])))
    report.checks.append(_low("busy", play(busy_actions())))
    report.checks.append(_low("random", play(random_actions(seed))))
    for x in agents:
        report.checks.append(_zero(f"exploit[{x.name}]", play(list(x.actions))))
    return report
