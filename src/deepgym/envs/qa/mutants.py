"""Mutation testing of verifiers: would an environment's tests catch a subtly wrong answer?

Each mutant of the environment's reference (``deepgym.envs.qa.mutate``) is submitted as an
answer and judged by the environment's own verifier in the real sandbox, as one pooled batch. A
good verifier fails every mutant that behaves differently from the reference; the share it fails
is the **mutation score**, killed / (mutants - equivalent - no verdict) (the report's shape and
fields: ``deepgym.envs.qa.report.Mutation``). A function task's surviving mutants are then
compared with the reference on generated inputs (``deepgym.envs.qa.extra_inputs``): one that
disagrees carries the input that kills it; one that agrees on every input is likely equivalent
and left out of the score.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym.envs.qa.extra_inputs import variations
from deepgym.envs.qa.mutate import Mutant, equivalent_markers, generate, is_marked_equivalent
from deepgym.envs.qa.report import Equivalent, Mutation, Survivor
from deepgym.judge.patch import PatchError, apply_diff, make_diff, parse_diff
from deepgym.models import Environment, RunResult
from deepgym.text import clip

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = [
    "DIFFERENTIAL_VERIFIER",
    "EXTRA_INPUTS",
    "GATED_KINDS",
    "MAX_SESSION_MUTANTS",
    "MUTATION_THRESHOLD",
    "SESSION_PARALLEL",
    "Candidate",
    "MutationReport",
    "candidates",
    "differential_env",
    "generated_inputs",
    "mutation_summary",
    "mutation_test",
    "mutation_tests",
    "tally",
]

MUTATION_THRESHOLD = 0.90
"""The mutation score every built-in environment must reach (``deepgym qa --mutants``)."""
GATED_KINDS = frozenset({"function", "script", "patch"})
"""The kinds whose mutation score ``qa --mutants`` and ``check --mutants`` hold to the threshold.
A session's mutants drop one action of the reference agent, and dropping one that only reads
(``cat``, a test run) leaves the state its verifier judges unchanged: such a mutant is
equivalent, and nothing yet tells it apart, so a session's score is reported as it is."""
EXTRA_INPUTS = 60
"""Generated inputs on which a function task's survivors are compared with the reference."""
MAX_SESSION_MUTANTS = 24
"""The most mutants of a session environment (each is an episode, a sandbox of its own)."""
SESSION_PARALLEL = 4
"""Session mutant episodes played at once."""
DIFFERENTIAL_VERIFIER = Path(__file__).resolve().parents[1] / "verifiers" / "differential.py"
"""The verifier that scores an answer by its agreement with a reference on given inputs."""


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


# -- extra inputs and the equivalence check ----------------------------------------------------


def _entry_function(env: Environment) -> ast.FunctionDef | None:
    """The reference's entry point where it is a plain function (not a class or generator)."""
    if env.kind != "function" or not env.reference_solution or not env.entry_point:
        return None
    try:
        tree = ast.parse(env.reference_solution)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == env.entry_point:
            generator = any(isinstance(n, ast.Yield | ast.YieldFrom) for n in ast.walk(node))
            return None if generator else node
    return None


def generated_inputs(env: Environment, count: int = EXTRA_INPUTS) -> list[list[Any]]:
    """``count`` generated argument lists for ``env``'s entry point: seeded variations of its
    test cases' ``args`` (``deepgym.envs.qa.extra_inputs``); empty where there are none to vary."""
    if _entry_function(env) is None:
        return []
    examples = [
        c["args"]
        for c in env.test_cases or []
        if isinstance(c.get("args"), list) and "call" not in c
    ]
    seed = zlib.crc32(env.name.encode()) ^ (env.seed or 0)
    return variations(examples, count, seed)


def differential_env(env: Environment, inputs: Sequence[Sequence[Any]]) -> Environment | None:
    """An environment that scores an answer by its agreement with ``env``'s reference on
    ``inputs`` (``deepgym/envs/verifiers/differential.py``); None where that cannot be asked
    (not a function task with a plain function entry point, or no inputs)."""
    if _entry_function(env) is None or not inputs or env.reference_solution is None:
        return None
    spec = {
        "reference": env.reference_solution,
        "entry": env.entry_point,
        "compare": env.compare,
        "inputs": [list(i) for i in inputs],
    }
    return env.model_copy(
        update={
            "name": f"{env.name}-differential",
            "test_cases": [spec],
            "verifier_code": None,
            "verifier_path": DIFFERENTIAL_VERIFIER,
            "time_limit": None,
        }
    )


# -- the report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MutationReport:
    """What mutation testing found for one environment.

    ``score`` = killed / (mutants - equivalent - no_verdict), None when that is 0; ``ok`` when
    the score reaches ``threshold``, or when nothing was left to kill with every mutant judged.
    """

    env: str
    kind: str
    mutants: int
    killed: int
    no_verdict: int
    survivors: tuple[Survivor, ...] = ()
    equivalents: tuple[Equivalent, ...] = ()
    seconds: float = 0.0
    threshold: float = MUTATION_THRESHOLD

    @property
    def survived(self) -> int:
        """How many mutants the verifier passed that are not equivalent."""
        return len(self.survivors)

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
            no_verdict=self.no_verdict,
            score=self.score,
            seconds=round(self.seconds, 3),
            threshold=self.threshold,
            ok=self.ok,
            gated=self.gated,
            survivors=list(self.survivors),
            equivalents=list(self.equivalents),
        ).model_dump()


def mutation_summary(reports: Sequence[MutationReport]) -> str:
    """One line: how many gated environments reach the threshold, which do not, and the
    sessions' scores, reported as they are."""
    gated = [m for m in reports if m.gated]
    below = [m.env for m in gated if not m.ok]
    parts = []
    if gated:
        parts.append(
            f"{len(gated) - len(below)}/{len(gated)} environments reach the mutation threshold "
            f"{MUTATION_THRESHOLD}" + (f"; below: {', '.join(below)}" if below else "")
        )
    ungated = [m for m in reports if not m.gated]
    if ungated:
        scores = ", ".join(
            f"{m.env} {'-' if m.score is None else f'{m.score:.2f}'}" for m in ungated
        )
        parts.append(
            f"session environments, reported as they are (a dropped action that only reads "
            f"survives): {scores}"
        )
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


def _killing_input(result: RunResult) -> str | None:
    """The first JSON test case a differential run's failed cases carry."""
    for case in result.cases:
        if case.passed or not case.message:
            continue
        try:
            json.loads(case.message)
        except ValueError:
            continue
        return case.message
    return None


def tally(
    env: Environment,
    found: Sequence[Candidate],
    results: Mapping[str, RunResult],
    compared: Mapping[str, RunResult],
    *,
    inputs: int = 0,
    seconds: float = 0.0,
) -> MutationReport:
    """The report from each candidate's result (``results``, by mutant id; a marked candidate
    needs none) and each survivor's differential result (``compared``, by mutant id).

    Killed = judged and not passed. No verdict (after the retry) is left out of the score and
    never counted killed. A survivor that agrees with the reference on every generated input is
    likely equivalent; one that disagrees carries the input that kills it.
    """
    killed = no_verdict = 0
    survivors: list[Survivor] = []
    equivalents: list[Equivalent] = []
    for c in found:
        if c.marked:
            why = f"marked in the reference: # deepgym: equivalent-mutant {c.mutant.operator}"
            equivalents.append(Equivalent(**_fields(c), why=why))
            continue
        r = results.get(c.mutant.id)
        if r is None or not r.has_verdict:
            no_verdict += 1
        elif not r.passed:
            killed += 1
        else:
            d = compared.get(c.mutant.id)
            if d is not None and d.has_verdict and d.passed:
                why = (
                    f"agrees with the reference on the verifier's tests and on "
                    f"{len(d.cases)} of {inputs} generated inputs (the rest are outside the task)"
                )
                equivalents.append(Equivalent(**_fields(c), why=why))
            else:
                found_input = _killing_input(d) if d is not None and d.has_verdict else None
                survivors.append(Survivor(**_fields(c), killing_input=found_input))
    return MutationReport(
        env=env.name,
        kind=env.kind,
        mutants=len(found),
        killed=killed,
        no_verdict=no_verdict,
        survivors=tuple(survivors),
        equivalents=tuple(equivalents),
        seconds=seconds,
    )


# -- running -----------------------------------------------------------------------------------


def mutation_test(
    env: Environment,
    dg: DeepGym,
    *,
    extra_inputs: int = EXTRA_INPUTS,
    max_parallel: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> MutationReport:
    """Run every mutant of ``env``'s reference through the real sandbox with ``dg`` and report
    the mutation score (see ``tally``).

    The mutants run as one pooled batch (``dg.run_batch``; a session's as episodes, a few at a
    time); a mutant without a verdict is run once more. The survivors of a function task then
    run, as one more batch, against the reference on ``extra_inputs`` generated inputs
    (``differential_env``). ``progress(done, total)`` follows the mutants' batch.
    """
    start = time.perf_counter()
    found = candidates(env)
    pending = [c for c in found if not c.marked]
    results: dict[str, RunResult] = {}
    for attempt in range(2):
        if not pending:
            break
        answers = [c.answer for c in pending]
        if env.kind == "session":
            batch = _episodes(env, dg, answers, progress if attempt == 0 else None)
        else:
            batch = dg.run_batch(
                env,
                answers,
                max_parallel=max_parallel,
                progress=progress if attempt == 0 else None,
            ).results
        for c, r in zip(pending, batch, strict=True):
            results[c.mutant.id] = r
        pending = [c for c in pending if not results[c.mutant.id].has_verdict]
    alive = [
        c
        for c in found
        if not c.marked and results[c.mutant.id].has_verdict and results[c.mutant.id].passed
    ]
    inputs = generated_inputs(env, extra_inputs)
    compared: dict[str, RunResult] = {}
    checker = differential_env(env, inputs)
    if checker is not None and alive:
        against = dg.run_batch(checker, [c.answer for c in alive], max_parallel=max_parallel)
        compared = {c.mutant.id: r for c, r in zip(alive, against.results, strict=True)}
    seconds = time.perf_counter() - start
    return tally(env, found, results, compared, inputs=len(inputs), seconds=seconds)


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
) -> list[RunResult]:
    """Each answer (a JSON list of actions) played as an episode of ``env``, a few at once."""
    from deepgym.envs.qa.session_check import scripted
    from deepgym.session import Action, Budget

    done = 0
    lock = threading.Lock()

    def play(answer: str) -> RunResult:
        nonlocal done
        actions = [Action.of(a) for a in json.loads(answer)]
        turns = max(env.max_steps, len(actions) + 1)
        result = dg.run_episode(env, scripted(actions), budget=Budget(turns=turns)).result
        with lock:
            done += 1
            if progress is not None:
                progress(done, len(answers))
        return result

    with ThreadPoolExecutor(max_workers=SESSION_PARALLEL) as pool:
        return list(pool.map(play, answers))
