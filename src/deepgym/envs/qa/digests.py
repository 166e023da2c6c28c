"""A session's state as one digest: the evidence that tells a session's equivalent mutants.

A session mutant drops one action of the reference agent. Whether that changes anything the
final verifier can see is a fact of the states the reference passes through, so the reference
agent is played once with ``DIGEST_COMMAND`` before its first action and after each
(``reference_digests``): an action after which the digest is what it was before changed
nothing, and dropping it is equivalent (``unchanged_drops``: such a mutant is not played). Every
mutant played gets a digest of its final state too (``play``), and one that ends with the
reference's final digest is equivalent (``same_ending``): the verifier judges the same files.

The digest covers what a later action or the verifier can read: the work dir (each path's type,
mode, link target and contents, ``__pycache__`` aside; a git index by what it stages, not by the
file stat cache that ``git status`` refreshes) and the persistent shell's state (working dir,
variables, functions, umask). Not covered: processes an action leaves running, files
outside the work dir. The digest command runs in a subshell and reads only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deepgym.envs.qa.mutate import Mutant
from deepgym.models import Environment, RunResult

if TYPE_CHECKING:
    from deepgym.client import DeepGym
    from deepgym.session import Action, Episode

__all__ = [
    "DIGEST_COMMAND",
    "digest_of",
    "play",
    "read_only_actions",
    "reference_digests",
    "same_ending",
    "unchanged_drops",
]

DIGEST_COMMAND = (
    "( pwd; declare -p 2>/dev/null | grep -E '^declare -[^ ]* [A-Za-z_][A-Za-z0-9_]*=' | "
    "grep -Ev '^declare -[^ ]* (_|__dg_[A-Za-z_]*|BASH[A-Z0-9_]*|COMP_WORDBREAKS|DIRSTACK|"
    "DEEPGYM_SESSION|GROUPS|OLDPWD|RANDOM|SRANDOM|SECONDS|EPOCH[A-Z]*|LINENO|PIPESTATUS|"
    "FUNCNAME|HISTCMD|SHLVL|PPID|COLUMNS|LINES|SHELLOPTS)='; declare -f; umask; cd /work && "
    "find . -name __pycache__ -prune -o -printf '%y %m %p %l\\n' | LC_ALL=C sort && "
    "find . -name __pycache__ -prune -o -path ./.git/index -prune -o -type f -print0 | "
    "LC_ALL=C sort -z | xargs -0 -r sha256sum; [ -d .git ] && git ls-files -s; true ) 2>&1 | "
    "sha256sum"
)
"""A bash command that prints one digest of a session's state: the shell's working dir, the
variables that hold a value (less those bash, or the session's shell between commands, sets by
itself: ``BASH*``, ``RANDOM``, ``OLDPWD``, the session's id, ...), functions and umask, and
every path under the work dir with its type, mode, link target and contents (``__pycache__``
aside: a cache, not the agent's work; a git index by what it stages: ``git ls-files -s``).
Run in a subshell, it changes nothing."""


def digest_of(output: str) -> str | None:
    """The digest ``DIGEST_COMMAND`` printed (``<64 hex>  -``), or None for anything else."""
    word = output.split()[:1]
    if word and len(word[0]) == 64 and all(ch in "0123456789abcdef" for ch in word[0]):
        return word[0]
    return None


def read_only_actions(digests: Sequence[str]) -> set[int]:
    """The actions (numbered from 1) after which the state's digest is what it was before:
    ``digests[0]`` is the state before the first action, ``digests[i]`` after action ``i``."""
    return {i for i in range(1, len(digests)) if digests[i] == digests[i - 1]}


def unchanged_drops(mutants: Sequence[Mutant], digests: Sequence[str]) -> dict[str, str]:
    """The mutants that drop a read-only action (see ``read_only_actions``), with why."""
    unchanged = read_only_actions(digests)
    return {
        m.id: (
            f"action {m.line} left the work dir and the shell as they were (the same digest "
            "before and after it): dropping it changes nothing"
        )
        for m in mutants
        if m.operator == "action" and m.line in unchanged
    }


def same_ending(final: Mapping[str, str | None], reference: str | None) -> dict[str, str]:
    """The mutants (by id) whose final digest is the reference's, with why."""
    if reference is None:
        return {}
    why = "ends with the work dir the reference ends with (the same digest): the verifier "
    return {mid: why + "judges the same files" for mid, d in final.items() if d == reference}


def _digested(actions: Sequence[Action], every: bool) -> list[Action]:
    """``actions`` with ``DIGEST_COMMAND`` before the first and after each (``every``), or
    only after the last."""
    from deepgym.session import Action

    probe = Action("bash", command=DIGEST_COMMAND)
    if not every:
        return [*actions, probe]
    out = [probe]
    for a in actions:
        out += [a, probe]
    return out


def _digests(episode: Episode) -> list[str | None]:
    return [
        digest_of(step.output.stdout)
        for step in episode.trajectory
        if step.action.command == DIGEST_COMMAND and step.output is not None
    ]


def _episode(env: Environment, dg: DeepGym, actions: list[Action]) -> Episode:
    from deepgym.envs.qa.session_check import scripted
    from deepgym.session import Budget

    budget = Budget(turns=max(env.max_steps, len(actions) + 1))
    return dg.run_episode(env, scripted(actions), budget=budget)


def _actions(listed: Sequence[Any]) -> list[Action]:
    from deepgym.session import Action

    return [Action.of(a) for a in listed]


def reference_digests(env: Environment, dg: DeepGym) -> list[str]:
    """The digest of the state before the reference agent's first action and after each; empty
    when that episode could not be played (then nothing is settled by digests)."""
    actions = _actions(json.loads(env.reference_solution or "[]"))
    found = _digests(_episode(env, dg, _digested(actions, True)))
    kept = [d for d in found if d is not None]
    return kept if len(kept) == len(actions) + 1 else []


def play(env: Environment, dg: DeepGym, actions: Sequence[Any]) -> tuple[RunResult, str | None]:
    """An episode of ``actions``, then ``done``: its result, and the digest of its final state
    (taken after the last action, before the verifier runs)."""
    episode = _episode(env, dg, _digested(_actions(actions), False))
    found = _digests(episode)
    return episode.result, found[-1] if found else None
