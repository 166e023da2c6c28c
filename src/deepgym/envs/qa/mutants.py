"""Mutation testing of verifiers: would an environment's tests catch a subtly wrong answer?

Each mutant of the environment's reference (``deepgym.envs.qa.mutate``) is submitted as an
answer and judged by the environment's own verifier in the real sandbox, as one pooled batch. A
good verifier fails every mutant that behaves differently from the reference; the share it fails
is the **mutation score**:

    score = killed / (mutants - equivalent - no_verdict)

so a survivor and an undecided mutant count alike, against it (the report's shape and fields:
``deepgym.envs.qa.report.Mutation``). Each mutant the verifier passes is then looked at:

- a function or patch task's (``deepgym.envs.qa.differential``): run against the reference on
  generated inputs in the task's domain. One that disagrees is a **survivor** carrying the input
  that kills it, a test case with the reference's value; one that agrees on at least
  ``EQUIVALENCE_INPUTS`` distinct inputs, every boundary value among them, is **likely
  equivalent** and left out of the score; one that agrees on fewer is **undecided**;
- a session's (``deepgym.envs.qa.digests``): the reference agent is played once with a digest
  of the work dir and the shell after each action. A mutant that drops an action after which
  the digest did not change is equivalent by that evidence (and is not played); a played mutant
  whose work dir ends with the reference's digest is equivalent too (the verifier judges the
  same files);
- a script task's: a survivor as it is.

A line of the reference marked ``# deepgym: equivalent-mutant OPERATOR`` declares its mutants
equivalent (``deepgym.envs.qa.mutate``): they are never run.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepgym.envs.qa import differential, digests
from deepgym.envs.qa.differential import (
    EQUIVALENCE_INPUTS,
    GENERATED_INPUTS,
    Agreement,
    Call,
    Comparison,
    compare_survivors,
)
from deepgym.envs.qa.mutate import Mutant, equivalent_markers, generate, is_marked_equivalent
from deepgym.envs.qa.report import Equivalent, Mutation, Survivor, Undecided
from deepgym.judge.patch import PatchError, apply_diff, make_diff, parse_diff
from deepgym.models import Environment, RunResult
from deepgym.text import clip

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = [
    "EQUIVALENCE_INPUTS",
    "GATED_KINDS",
    "GENERATED_INPUTS",
    "MAX_SESSION_MUTANTS",
    "MUTATION_THRESHOLD",
    "SESSION_PARALLEL",
    "Candidate",
    "MutationReport",
    "candidates",
    "mutation_summary",
    "mutation_test",
    "mutation_tests",
    "tally",
]

MUTATION_THRESHOLD = 0.90
"""The mutation score every built-in environment must reach (``deepgym qa --mutants``)."""
GATED_KINDS = frozenset({"function", "script", "patch", "session"})
"""The kinds whose mutation score ``qa --mutants`` and ``check --mutants`` hold to the
threshold: every kind, now that a session's dropped read-only action is told apart by the
digests of its work dir."""
MAX_SESSION_MUTANTS = 24
"""The most mutants of a session environment (each is an episode, a sandbox of its own)."""
SESSION_PARALLEL = 4
"""Session mutant episodes played at once."""

# -- candidates: mutants as answers to an environment ------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A mutant as an answer to its environment: what is submitted (``answer``), how it differs
    from the reference (``diff``), and whether the reference marks it equivalent (``marked``)."""

    mutant: Mutant
    answer: str
    diff: str
    marked: bool = False


def candidates(env: Environment) -> list[Candidate]:
    """Every mutant of ``env``'s reference, as an answer (see ``mutation_test``); empty when the
    environment has no reference or its reference does not parse."""
    if not env.reference_solution:
        return []
    try:
        if env.kind == "session":
            return _session_candidates(env.reference_solution)
        if env.kind == "patch":
            return _patch_candidates(env)
        return _program_candidates(env.reference_solution)
    except (SyntaxError, ValueError, OSError, PatchError):
        return []


def _unified(before: str, after: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), path, path
        )
    )


def _program_candidates(reference: str) -> list[Candidate]:
    marks = equivalent_markers(reference)
    return [
        Candidate(m, m.source, _unified(reference, m.source, "reference"), _marked(m, marks))
        for m in generate(reference)
    ]


def _marked(mutant: Mutant, marks: dict[int, frozenset[str]]) -> bool:
    return is_marked_equivalent(mutant, marks)


def _added_lines(before: str, after: str) -> set[int]:
    """The numbers (1-based) of ``after``'s lines that are not in ``before``."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    added: set[int] = set()
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            added.update(range(j1 + 1, j2 + 1))
    return added


def _patch_candidates(env: Environment) -> list[Candidate]:
    """Mutants of the lines the reference diff adds: each file the diff touches is patched,
    mutated, and each mutant whose change falls on an added line is turned back into a diff."""
    if env.repo_path is None or env.reference_solution is None:
        return []
    patches = parse_diff(env.reference_solution)
    old = {}
    for fp in patches:
        if fp.old_path is not None:
            old[fp.old_path] = (env.repo_path / fp.old_path).read_text(encoding="utf-8")
    new = apply_diff(old, patches)
    out: list[Candidate] = []
    for path in sorted(new):
        if not path.endswith(".py"):
            continue
        patched = new[path]
        added = _added_lines(old.get(path, ""), patched)
        marks = equivalent_markers(patched)
        for m in generate(patched):
            if m.line not in added:
                continue
            answer = make_diff(old, {**new, path: m.source})
            diff = _unified(patched, m.source, path)
            described = Mutant(m.id, m.source, m.operator, m.line, f"{path} {m.description}")
            out.append(Candidate(described, answer, diff, _marked(m, marks)))
    return out


def _session_candidates(reference: str) -> list[Candidate]:
    """The reference agent with one action dropped, then the AST mutants of each Python file it
    writes; at most ``MAX_SESSION_MUTANTS`` (the drops first, the rest evenly sampled)."""
    actions = json.loads(reference)
    if not isinstance(actions, list):
        return []
    listed = "".join(json.dumps(a) + "\n" for a in actions)
    drops: list[Candidate] = []
    for i, action in enumerate(actions):
        rest = actions[:i] + actions[i + 1 :]
        if not rest:
            continue
        what = action.get("command") or action.get("path") or action.get("tool", "")
        digest = hashlib.sha256(json.dumps(rest).encode()).hexdigest()[:8]
        mutant = Mutant(
            id=f"action-A{i + 1}-{digest}",
            source=json.dumps(rest),
            operator="action",
            line=i + 1,
            description=f"action {i + 1} dropped: `{clip(str(what), 48)}`",
        )
        diff = _unified(listed, "".join(json.dumps(a) + "\n" for a in rest), "reference_agent")
        drops.append(Candidate(mutant, mutant.source, diff))
    files: list[Candidate] = []
    for i, action in enumerate(actions):
        path = str(action.get("path", ""))
        if action.get("tool") != "write_file" or not path.endswith(".py"):
            continue
        content = str(action.get("content", ""))
        marks = equivalent_markers(content)
        for m in generate(content):
            changed = [*actions[:i], {**action, "content": m.source}, *actions[i + 1 :]]
            described = Mutant(
                m.id, json.dumps(changed), m.operator, m.line, f"{path} {m.description}"
            )
            diff = _unified(content, m.source, path)
            files.append(Candidate(described, described.source, diff, _marked(m, marks)))
    room = max(MAX_SESSION_MUTANTS - len(drops), 0)
    if len(files) > room:
        step = len(files) / room if room else 0
        files = [files[int(k * step)] for k in range(room)]
    return drops + files


# -- the report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MutationReport:
    """What mutation testing found for one environment.

    ``score`` = killed / (mutants - equivalent - no_verdict), None when that is 0 (a survivor
    and an undecided mutant count alike); ``ok`` when the score reaches ``threshold``, or when
    nothing was left to kill with every mutant judged. ``kills``: each survivor's killing
    input as values (the mutant's id, the call, the reference's value), for ``--augment``.
    """

    env: str
    kind: str
    mutants: int
    killed: int
    no_verdict: int
    survivors: tuple[Survivor, ...] = ()
    equivalents: tuple[Equivalent, ...] = ()
    undecideds: tuple[Undecided, ...] = ()
    seconds: float = 0.0
    threshold: float = MUTATION_THRESHOLD
    kills: tuple[tuple[str, Call, Any], ...] = ()

    @property
    def survived(self) -> int:
        """How many mutants the verifier passed that are not equivalent nor undecided."""
        return len(self.survivors)

    @property
    def undecided(self) -> int:
        """How many mutants the verifier passed on too little evidence either way."""
        return len(self.undecideds)

    @property
    def score(self) -> float | None:
        """killed / (mutants - equivalent - no_verdict); None when that denominator is 0."""
        counted = self.mutants - len(self.equivalents) - self.no_verdict
        return self.killed / counted if counted > 0 else None

    @property
    def gated(self) -> bool:
        """Whether the threshold decides the command's exit (``GATED_KINDS``)."""
        return self.kind in GATED_KINDS

    @property
    def ok(self) -> bool:
        """The score reaches the threshold (no score: ok only when no mutant lacks a verdict
        and there was something to test)."""
        score = self.score
        if score is None:
            return self.no_verdict == 0 and self.mutants > 0
        return score >= self.threshold

    def to_json(self) -> dict[str, Any]:
        """The report as plain data, in the one wire shape ``deepgym.envs.qa.report.Mutation``
        (``deepgym qa --mutants --json``; the console reads it)."""
        return Mutation(
            env=self.env,
            kind=self.kind,
            mutants=self.mutants,
            killed=self.killed,
            equivalent=len(self.equivalents),
            survived=self.survived,
            undecided=self.undecided,
            no_verdict=self.no_verdict,
            score=self.score,
            seconds=round(self.seconds, 3),
            threshold=self.threshold,
            ok=self.ok,
            gated=self.gated,
            survivors=list(self.survivors),
            undecideds=list(self.undecideds),
            equivalents=list(self.equivalents),
        ).model_dump()


def mutation_summary(reports: Sequence[MutationReport]) -> str:
    """One line: how many gated environments reach the threshold and which do not (with how
    many undecided mutants they hold), and any others' scores, reported as they are."""
    gated = [m for m in reports if m.gated]
    below = [m for m in gated if not m.ok]
    parts = []
    if gated:
        named = ", ".join(
            m.env + (f" ({m.undecided} undecided)" if m.undecided else "") for m in below
        )
        parts.append(
            f"{len(gated) - len(below)}/{len(gated)} environments reach the mutation threshold "
            f"{MUTATION_THRESHOLD}" + (f"; below: {named}" if below else "")
        )
    ungated = [m for m in reports if not m.gated]
    if ungated:
        scores = ", ".join(
            f"{m.env} {'-' if m.score is None else f'{m.score:.2f}'}" for m in ungated
        )
        parts.append(f"not gated, reported as they are: {scores}")
    return "\n".join(parts)


def _fields(c: Candidate) -> dict[str, Any]:
    m = c.mutant
    return {
        "id": m.id,
        "operator": m.operator,
        "line": m.line,
        "description": m.description,
        "diff": c.diff,
    }


def _looked_at(
    c: Candidate, a: Agreement | None, comparison: Comparison | None
) -> Survivor | Equivalent | Undecided:
    """A mutant the verifier passed, judged by its comparison with the reference (see the
    module's docstring); no comparison for its kind: a survivor as it is."""
    if comparison is None:
        return Survivor(**_fields(c), killing_input=None)
    dom = comparison.domain
    if a is None or dom is None:
        return Undecided(**_fields(c), why=f"not compared with the reference: {comparison.why}")
    if a.disagreed:
        return Survivor(**_fields(c), killing_input=a.killing_input)
    if not a.judged:
        return Undecided(**_fields(c), why="its comparison with the reference had no verdict")
    if a.equivalent():
        why = (
            f"agrees with the reference on the verifier's tests and on {a.agreed} distinct "
            f"generated inputs in the task, all {dom.boundaries} boundary values among them"
        )
        return Equivalent(**_fields(c), why=why, agreed=a.agreed)
    if a.agreed < EQUIVALENCE_INPUTS:
        why = (
            f"no input told it apart, but it agreed on only {a.agreed} distinct inputs in the "
            f"task ({EQUIVALENCE_INPUTS} needed; {dom.tried} were generated, the rest are "
            "outside the task or past the time budget)"
        )
    else:
        why = (
            f"no input told it apart, but its comparison asked only {a.boundaries} of the "
            f"{dom.boundaries} boundary values in the task"
        )
    why += ": mark it equivalent in the reference, or add a test that kills it"
    return Undecided(**_fields(c), why=why, agreed=a.agreed)


def tally(
    env: Environment,
    found: Sequence[Candidate],
    results: Mapping[str, RunResult],
    agreements: Mapping[str, Agreement] | None = None,
    *,
    comparison: Comparison | None = None,
    settled: Mapping[str, str] | None = None,
    seconds: float = 0.0,
) -> MutationReport:
    """The report from each candidate's result (``results``, by mutant id; a marked or settled
    candidate needs none), each survivor's ``Agreement`` with the reference (by mutant id) and
    the ``comparison`` they came from (None: the kind is not compared), and ``settled``: the
    mutants equivalent by other evidence (a session's digests), with why.

    Killed = judged and not passed. No verdict (after the retry) is left out of the score and
    never counted killed.
    """
    agreements = agreements or {}
    settled = settled or {}
    killed = no_verdict = 0
    survivors: list[Survivor] = []
    equivalents: list[Equivalent] = []
    undecided: list[Undecided] = []
    kills: list[tuple[str, Call, Any]] = []
    for c in found:
        mid = c.mutant.id
        if c.marked:
            why = f"marked in the reference: # deepgym: equivalent-mutant {c.mutant.operator}"
            equivalents.append(Equivalent(**_fields(c), why=why))
            continue
        r = results.get(mid)
        if mid in settled and (r is None or (r.has_verdict and r.passed)):
            equivalents.append(Equivalent(**_fields(c), why=settled[mid]))
        elif r is None or not r.has_verdict:
            no_verdict += 1
        elif not r.passed:
            killed += 1
        else:
            a = agreements.get(mid)
            found_as = _looked_at(c, a, comparison)
            if isinstance(found_as, Survivor):
                survivors.append(found_as)
                if a is not None and a.kill is not None:
                    kills.append((mid, *a.kill))
            elif isinstance(found_as, Equivalent):
                equivalents.append(found_as)
            else:
                undecided.append(found_as)
    return MutationReport(
        env=env.name,
        kind=env.kind,
        mutants=len(found),
        killed=killed,
        no_verdict=no_verdict,
        survivors=tuple(survivors),
        equivalents=tuple(equivalents),
        undecideds=tuple(undecided),
        seconds=seconds,
        kills=tuple(kills),
    )


# -- running -----------------------------------------------------------------------------------


def mutation_test(
    env: Environment,
    dg: DeepGym,
    *,
    extra_inputs: int = GENERATED_INPUTS,
    max_parallel: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> MutationReport:
    """Run every mutant of ``env``'s reference through the real sandbox with ``dg`` and report
    the mutation score (see ``tally``).

    The mutants run as one pooled batch (``dg.run_batch``; a session's as episodes, a few at a
    time, after one digested episode of the reference: ``deepgym.envs.qa.digests``); a mutant
    without a verdict is run once more. The survivors of a function or patch task are then
    compared with the reference (``deepgym.envs.qa.differential``, on up to ``extra_inputs``
    generated inputs; 0: not compared). ``progress(done, total)`` follows the mutants' batch.
    """
    start = time.perf_counter()
    found = candidates(env)
    states = digests.reference_digests(env, dg) if env.kind == "session" and found else []
    settled = digests.unchanged_drops([c.mutant for c in found], states)
    pending = [c for c in found if not c.marked and c.mutant.id not in settled]
    results, final = _run(env, dg, pending, max_parallel, progress)
    settled.update(digests.same_ending(final, states[-1] if states else None))
    alive = [
        c
        for c in found
        if c.mutant.id not in settled
        and (r := results.get(c.mutant.id)) is not None
        and r.has_verdict
        and r.passed
    ]
    comparison, agreements = _compared(env, dg, alive, extra_inputs, max_parallel)
    seconds = time.perf_counter() - start
    return tally(
        env, found, results, agreements, comparison=comparison, settled=settled, seconds=seconds
    )


def _run(
    env: Environment,
    dg: DeepGym,
    pending: list[Candidate],
    max_parallel: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[dict[str, RunResult], dict[str, str | None]]:
    """Each candidate's result (one without a verdict is run once more), and a session
    mutant's final digest, by mutant id."""
    results: dict[str, RunResult] = {}
    final: dict[str, str | None] = {}
    for attempt in range(2):
        if not pending:
            break
        answers = [c.answer for c in pending]
        shown = progress if attempt == 0 else None
        if env.kind == "session":
            played = _episodes(env, dg, answers, shown)
            batch = [r for r, _ in played]
            final.update({c.mutant.id: d for c, (_, d) in zip(pending, played, strict=True)})
        else:
            batch = dg.run_batch(env, answers, max_parallel=max_parallel, progress=shown).results
        for c, r in zip(pending, batch, strict=True):
            results[c.mutant.id] = r
        pending = [c for c in pending if not results[c.mutant.id].has_verdict]
    return results, final


def _compared(
    env: Environment, dg: DeepGym, alive: list[Candidate], extra_inputs: int, max_parallel: int
) -> tuple[Comparison | None, dict[str, Agreement]]:
    """The survivors compared with the reference, where the kind is compared (else None)."""
    if not differential.comparable(env) or extra_inputs <= 0:
        return None, {}
    if not alive:
        return Comparison(None, why="no survivor to compare"), {}
    answers = [c.answer for c in alive]
    comparison = compare_survivors(env, dg, answers, count=extra_inputs, max_parallel=max_parallel)
    if not comparison.agreements:
        return comparison, {}
    ids = [c.mutant.id for c in alive]
    return comparison, dict(zip(ids, comparison.agreements, strict=True))


def mutation_tests(
    envs: Sequence[Environment],
    dg: DeepGym,
    *,
    max_parallel: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> list[MutationReport]:
    """``mutation_test`` for each of ``envs``, reports in input order; ``progress(done,
    total)`` counts environments."""
    reports: list[MutationReport] = []
    for i, env in enumerate(envs):
        reports.append(mutation_test(env, dg, max_parallel=max_parallel))
        if progress is not None:
            progress(i + 1, len(envs))
    return reports


def _episodes(
    env: Environment,
    dg: DeepGym,
    answers: Sequence[str],
    progress: Callable[[int, int], None] | None,
) -> list[tuple[RunResult, str | None]]:
    """Each answer (a JSON list of actions) played as an episode of ``env``, a few at once:
    its result, and the digest of its final state (``deepgym.envs.qa.digests.play``)."""
    done = 0
    lock = threading.Lock()

    def play(answer: str) -> tuple[RunResult, str | None]:
        nonlocal done
        played = digests.play(env, dg, json.loads(answer))
        with lock:
            done += 1
            if progress is not None:
                progress(done, len(answers))
        return played

    with ThreadPoolExecutor(max_workers=SESSION_PARALLEL) as pool:
        return list(pool.map(play, answers))
