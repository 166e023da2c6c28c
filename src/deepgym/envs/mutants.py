"""Mutation testing of verifiers: would an environment's tests catch a subtly wrong answer?

``generate(source)`` makes AST mutants of a reference program: each is the reference with one
small change (a comparison or arithmetic operator swapped, an integer constant off by one, an
``if``'s branches swapped or its condition negated, a statement dropped, a return made early or
constant, a boolean operator negated). A good verifier fails every mutant that behaves
differently from the reference; the share it fails is the **mutation score**.

Why Python's ``ast`` and not mutmut or cosmic-ray: both mutate files on disk and run a test
command once per mutant, in the project's own interpreter. We need the opposite: in-memory
sources, judged by the environment's own verifier in the real sandbox, all mutants submitted as
one pooled batch. The generator is about two hundred lines of pure code over the standard
library, so it runs anywhere the judge runs.

Invariants of ``generate``: the output is deterministic (same source, same mutants, same order,
same ids); every mutant compiles; no two mutants have the same unparsed source; no mutant unparses
to the reference. A mutant keeps the reference's formatting and comments outside the changed node
(the change is spliced into the text); where splicing cannot reproduce the mutated tree exactly,
the whole mutated tree is unparsed instead.

Known equivalent mutants: an environment marks a line of its reference with
``# deepgym: equivalent-mutant OPERATOR [OPERATOR ...]`` (or ``all``); mutants of that operator
on that line are reported as equivalent with the reason "marked in the reference" and left out
of the score (``equivalent_markers``).
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym.envs.extra_inputs import variations
from deepgym.judge.patch import PatchError, apply_diff, make_diff, parse_diff
from deepgym.models import Environment, RunResult

if TYPE_CHECKING:
    from deepgym.client import DeepGym

__all__ = [
    "DIFFERENTIAL_VERIFIER",
    "EXTRA_INPUTS",
    "GATED_KINDS",
    "MAX_SESSION_MUTANTS",
    "MUTATION_THRESHOLD",
    "OPERATORS",
    "SESSION_PARALLEL",
    "Candidate",
    "Equivalent",
    "Mutant",
    "MutationReport",
    "Survivor",
    "candidates",
    "differential_env",
    "equivalent_markers",
    "generate",
    "generated_inputs",
    "is_marked_equivalent",
    "mutation_summary",
    "mutation_test",
    "mutation_tests",
    "tally",
]

MUTATION_THRESHOLD = 0.90

GATED_KINDS = frozenset({"function", "script", "patch"})
"""The kinds whose mutation score ``qa --mutants`` and ``check --mutants`` hold to the threshold.
A session's mutants drop one action of the reference agent, and dropping one that only reads
(``cat``, a test run) leaves the state its verifier judges unchanged: such a mutant is
equivalent, and nothing yet tells it apart, so a session's score is reported as it is."""
"""The mutation score every built-in environment must reach (``deepgym qa --mutants``)."""
EXTRA_INPUTS = 60
"""Generated inputs on which a function task's survivors are compared with the reference."""
MAX_SESSION_MUTANTS = 24
"""The most mutants of a session environment (each is an episode, a sandbox of its own)."""
SESSION_PARALLEL = 4
"""Session mutant episodes played at once."""
DIFFERENTIAL_VERIFIER = Path(__file__).resolve().parent / "verifiers" / "differential.py"
"""The verifier that scores an answer by its agreement with a reference on given inputs."""

OPERATORS = (
    "comparison",
    "arithmetic",
    "constant",
    "branch",
    "statement",
    "return",
    "boolean",
)
"""Every mutation operator, in the order ``generate`` applies them at one node."""


@dataclass(frozen=True)
class Mutant:
    """One mutant of a reference program: its source, what was changed and where."""

    id: str
    source: str
    operator: str
    line: int
    description: str


_COMPARE_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE, ast.GtE),
    ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE),
    ast.GtE: (ast.Gt, ast.Lt),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
    ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,),
    ast.IsNot: (ast.Is,),
}

_ARITH_SWAPS: dict[type[ast.operator], tuple[type[ast.operator], ...]] = {
    ast.Add: (ast.Sub,),
    ast.Sub: (ast.Add,),
    ast.Mult: (ast.Div, ast.Add),
    ast.Div: (ast.Mult, ast.FloorDiv),
    ast.FloorDiv: (ast.Div, ast.Mult),
    ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,),
}

_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.And: "and",
    ast.Or: "or",
}

_ANNOTATION_FIELDS = frozenset({"annotation", "returns", "type_comment"})
_MARKER = re.compile(r"#\s*deepgym:\s*equivalent-mutant\b([^#\n]*)")

# A replacement: (operator, description, new node or None to drop). The node replaces the
# node at a slot of the tree; statements are replaced by statements.
_Edit = tuple[str, str, ast.AST]


def generate(source: str) -> list[Mutant]:
    """Every mutant of ``source``, deterministic, deduplicated, each compiling.

    Raises ``SyntaxError`` when ``source`` itself does not parse.
    """
    tree = ast.parse(source)
    reference = ast.unparse(tree)
    lines = source.splitlines(keepends=True)
    seen = {reference}
    out: list[Mutant] = []
    for index, (_parent, _field, _pos, node) in enumerate(_slots(tree)):
        for operator, description, replacement in _edits(node, tree):
            mutated = copy.deepcopy(tree)
            _replace(mutated, index, replacement)
            ast.fix_missing_locations(mutated)
            key = ast.unparse(mutated)
            if key in seen:
                continue
            text = _splice(lines, node, replacement, mutated) or key + "\n"
            try:
                compile(text, "<mutant>", "exec")
            except (SyntaxError, ValueError):
                continue
            seen.add(key)
            line = getattr(node, "lineno", 0)
            digest = hashlib.sha256(key.encode()).hexdigest()[:8]
            out.append(
                Mutant(
                    id=f"{operator}-L{line}-{digest}",
                    source=text,
                    operator=operator,
                    line=line,
                    description=f"line {line}: {description}",
                )
            )
    return out


def equivalent_markers(source: str) -> dict[int, frozenset[str]]:
    """The lines of ``source`` marked ``# deepgym: equivalent-mutant OPS``, with their operators.

    ``OPS`` is a space- or comma-separated list of operator names, or ``all`` (also what an
    empty list means).
    """
    marks: dict[int, frozenset[str]] = {}
    for number, text in enumerate(source.splitlines(), start=1):
        match = _MARKER.search(text)
        if match:
            names = frozenset(re.split(r"[\s,]+", match.group(1).strip())) - {""}
            marks[number] = names or frozenset({"all"})
    return marks


def is_marked_equivalent(mutant: Mutant, marks: dict[int, frozenset[str]]) -> bool:
    """True when ``mutant``'s line is marked for its operator (or ``all``)."""
    names = marks.get(mutant.line, frozenset())
    return mutant.operator in names or "all" in names


# -- walking -----------------------------------------------------------------------------------


def _slots(tree: ast.AST) -> Iterator[tuple[ast.AST, str, int | None, ast.AST]]:
    """Every node below ``tree`` with its parent, field and list index, in source order.

    Type annotations are not entered: mutating them changes nothing the verifier can see.
    """
    for field, value in ast.iter_fields(tree):
        if field in _ANNOTATION_FIELDS:
            continue
        if isinstance(value, list):
            for pos, item in enumerate(value):
                if isinstance(item, ast.AST):
                    yield tree, field, pos, item
                    yield from _slots(item)
        elif isinstance(value, ast.AST):
            yield tree, field, None, value
            yield from _slots(value)


def _replace(tree: ast.AST, index: int, replacement: ast.AST) -> None:
    """Put ``replacement`` at the ``index``-th slot of ``tree`` (same order as ``_slots``)."""
    for i, (parent, field, pos, _node) in enumerate(_slots(tree)):
        if i == index:
            if pos is None:
                setattr(parent, field, replacement)
            else:
                getattr(parent, field)[pos] = replacement
            return
    raise IndexError(f"index: no slot {index} in the tree")


def _splice(
    lines: list[str], node: ast.AST, replacement: ast.AST, mutated: ast.Module
) -> str | None:
    """The source with ``node``'s text replaced by ``replacement``'s, or None when that text
    does not parse back to ``mutated`` exactly (then the caller unparses the whole tree)."""
    start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if start is None or end is None or col is None or end_col is None:
        return None
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    if (
        isinstance(node, functions)
        and isinstance(replacement, functions)
        and len(replacement.body) == len(node.body) + 1
    ):
        candidates = [_insert_line(lines, replacement, node)]
    else:
        span = (start, col, end, end_col)
        candidates = [_replace_span(lines, replacement, span, parens) for parens in (False, True)]
    expected = ast.dump(mutated)
    for text in candidates:
        try:
            if text is not None and ast.dump(ast.parse(text)) == expected:
                return text
        except SyntaxError:
            continue
    return None


def _replace_span(
    lines: list[str], replacement: ast.AST, span: tuple[int, int, int, int], parens: bool
) -> str:
    """The source with the text of ``span`` replaced by ``replacement`` unparsed (in
    parentheses when ``parens``, which keeps an expression's precedence where it sits)."""
    start, col, end, end_col = span
    indent = " " * col
    new = ast.unparse(replacement).replace("\n", "\n" + indent)
    if parens:
        new = f"({new})"
    head = lines[start - 1].encode()[:col].decode(errors="replace")
    tail = lines[end - 1].encode()[end_col:].decode(errors="replace")
    return "".join(lines[: start - 1]) + head + new + tail + "".join(lines[end:])


def _insert_line(
    lines: list[str],
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    original: ast.FunctionDef | ast.AsyncFunctionDef,
) -> str | None:
    """The source with ``function``'s inserted first statement put on a line of its own."""
    at = 1 if _has_docstring(original) else 0
    if at >= len(original.body):
        return None
    before = original.body[at]
    if lines[before.lineno - 1][: before.col_offset].strip():
        return None  # the body shares a line with the ``def``: unparse instead
    statement = " " * before.col_offset + ast.unparse(function.body[at]) + "\n"
    return "".join(lines[: before.lineno - 1]) + statement + "".join(lines[before.lineno - 1 :])


# -- the operators -----------------------------------------------------------------------------


def _edits(node: ast.AST, tree: ast.Module) -> Iterator[_Edit]:
    """Every single-node change of ``node``, operator by operator (``OPERATORS`` order)."""
    for make in _OPERATOR_FUNCTIONS:
        yield from make(node, tree)


def _comparison(node: ast.AST, _tree: ast.Module) -> Iterator[_Edit]:
    if not isinstance(node, ast.Compare):
        return
    for pos, op in enumerate(node.ops):
        for swap in _COMPARE_SWAPS.get(type(op), ()):
            new = copy.deepcopy(node)
            new.ops[pos] = swap()
            yield (
                "comparison",
                f"`{_SYMBOLS[type(op)]}` -> `{_SYMBOLS[swap]}`",
                new,
            )


def _arithmetic(node: ast.AST, _tree: ast.Module) -> Iterator[_Edit]:
    if not isinstance(node, ast.BinOp | ast.AugAssign):
        return
    aug = "=" if isinstance(node, ast.AugAssign) else ""
    for swap in _ARITH_SWAPS.get(type(node.op), ()):
        new = copy.deepcopy(node)
        new.op = swap()
        yield (
            "arithmetic",
            f"`{_SYMBOLS[type(node.op)]}{aug}` -> `{_SYMBOLS[swap]}{aug}`",
            new,
        )


def _constant(node: ast.AST, _tree: ast.Module) -> Iterator[_Edit]:
    if not isinstance(node, ast.Constant) or type(node.value) is not int:
        return
    for delta in (1, -1):
        value = node.value + delta
        yield "constant", f"`{node.value}` -> `{value}`", ast.Constant(value)


def _branch(node: ast.AST, _tree: ast.Module) -> Iterator[_Edit]:
    if isinstance(node, ast.If | ast.While):
        new = copy.deepcopy(node)
        new.test = _negate(new.test)
        keyword = "if" if isinstance(node, ast.If) else "while"
        yield "branch", f"`{keyword}` condition negated", new
        if isinstance(node, ast.If) and node.orelse:
            swapped = copy.deepcopy(node)
            swapped.body, swapped.orelse = swapped.orelse, swapped.body
            yield "branch", "`if`/`else` bodies swapped", swapped
    elif isinstance(node, ast.IfExp):
        expression = copy.deepcopy(node)
        expression.body, expression.orelse = expression.orelse, expression.body
        yield "branch", "conditional expression's branches swapped", expression


def _statement(node: ast.AST, _tree: ast.Module) -> Iterator[_Edit]:
    if not isinstance(node, ast.stmt) or isinstance(node, _KEPT_STATEMENTS):
        return
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return  # a docstring or a bare constant: dropping it changes nothing
    first = ast.unparse(node).splitlines()[0]
    yield "statement", f"`{_clip(first)}` dropped", ast.copy_location(ast.Pass(), node)


_KEPT_STATEMENTS = (
    ast.Pass,
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Global,
    ast.Nonlocal,
)


def _return(node: ast.AST, tree: ast.Module) -> Iterator[_Edit]:
    if isinstance(node, ast.Return) and node.value is not None:
        function = _enclosing_function(tree, node)
        for value in _return_constants(function, node.value):
            yield (
                "return",
                f"`{_clip(ast.unparse(node))}` -> `return {value!r}`",
                ast.Return(_literal(value)),
            )
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _returns_value(node):
        value = _return_constants(node, None)[-1]
        new = copy.deepcopy(node)
        at = 1 if _has_docstring(new) else 0
        new.body.insert(at, ast.Return(_literal(value)))
        yield "return", f"`return {value!r}` at the start of `{node.name}`", new


def _boolean(node: ast.AST, _tree: ast.Module) -> Iterator[_Edit]:
    if isinstance(node, ast.BoolOp):
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield (
            "boolean",
            f"`{_SYMBOLS[type(node.op)]}` -> `{_SYMBOLS[type(new.op)]}`",
            new,
        )
        for pos, value in enumerate(node.values):
            if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
                continue  # removing that `not` is the operand's own mutant
            negated = copy.deepcopy(node)
            negated.values[pos] = _negate(negated.values[pos])
            yield "boolean", f"`not` added to `{_clip(ast.unparse(value))}`", negated
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "boolean", f"`not` removed from `{_clip(ast.unparse(node))}`", node.operand
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "boolean", f"`{node.value}` -> `{not node.value}`", ast.Constant(not node.value)


_OPERATOR_FUNCTIONS: tuple[Callable[[ast.AST, ast.Module], Iterator[_Edit]], ...] = (
    _comparison,
    _arithmetic,
    _constant,
    _branch,
    _statement,
    _return,
    _boolean,
)


# -- helpers -----------------------------------------------------------------------------------


def _negate(test: ast.expr) -> ast.expr:
    """``not test``, or ``test``'s operand where it already is a ``not``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return ast.UnaryOp(ast.Not(), test)


def _literal(value: object) -> ast.expr:
    """The expression node that evaluates to ``value`` (a constant or an empty container)."""
    node = ast.parse(repr(value), mode="eval").body
    return node


def _clip(text: str, width: int = 48) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _has_docstring(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    first = function.body[0]
    return (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``function`` itself (not a nested def) returns a value somewhere."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _enclosing_function(
    tree: ast.Module, target: ast.AST
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function definition around ``target``."""
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and any(child is target for child in ast.walk(node))
            and (found is None or any(child is node for child in ast.walk(found)))
        ):
            found = node
    return found


_EMPTY_BY_NAME: dict[str, object] = {
    "int": 0,
    "float": 0.0,
    "str": "",
    "bool": False,
    "list": [],
    "List": [],
    "Sequence": [],
    "dict": {},
    "Dict": {},
    "tuple": (),
    "Tuple": (),
    "set": set(),
}


def _return_constants(
    function: ast.FunctionDef | ast.AsyncFunctionDef | None, value: ast.expr | None
) -> list[object]:
    """``None`` and the empty value of the return type (from the annotation, else the value)."""
    empty: object = None
    annotation = function.returns if function is not None else None
    if annotation is not None:
        name = annotation.value if isinstance(annotation, ast.Subscript) else annotation
        if isinstance(name, ast.Name):
            empty = _EMPTY_BY_NAME.get(name.id)
        elif isinstance(name, ast.Attribute):
            empty = _EMPTY_BY_NAME.get(name.attr)
    if empty is None and value is not None:
        empty = _empty_like(value)
    values: list[object] = [None]
    if empty is not None and not isinstance(empty, set):
        values.append(empty)
    return values


def _empty_like(value: ast.expr) -> object:
    """The empty value of ``value``'s evident type, or None when it is not evident."""
    if isinstance(value, ast.List | ast.ListComp):
        return []
    if isinstance(value, ast.Dict | ast.DictComp):
        return {}
    if isinstance(value, ast.Tuple):
        return ()
    if isinstance(value, ast.JoinedStr):
        return ""
    if isinstance(value, ast.Compare | ast.BoolOp) or (
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
    ):
        return False
    if isinstance(value, ast.Constant) and value.value is not None:
        kind = type(value.value)
        return kind() if kind in (int, float, str, bool) else None
    return 0


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
            description=f"action {i + 1} dropped: `{_clip(str(what))}`",
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
    test cases' ``args`` (``deepgym.envs.extra_inputs``); empty where there are none to vary."""
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
class Survivor:
    """A mutant the verifier passed; ``killing_input``: a JSON test case that tells it from the
    reference, where one was found."""

    mutant: Mutant
    diff: str
    killing_input: str | None = None


@dataclass(frozen=True)
class Equivalent:
    """A mutant left out of the score, and why (marked in the reference, or agreeing with it on
    every input tried)."""

    mutant: Mutant
    diff: str
    why: str


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
        """The report as plain data (``deepgym qa --mutants --json``; the console reads it)."""
        return {
            "env": self.env,
            "kind": self.kind,
            "mutants": self.mutants,
            "killed": self.killed,
            "equivalent": len(self.equivalents),
            "survived": self.survived,
            "no_verdict": self.no_verdict,
            "score": self.score,
            "seconds": round(self.seconds, 3),
            "threshold": self.threshold,
            "ok": self.ok,
            "gated": self.gated,
            "survivors": [
                {**_mutant_json(s.mutant, s.diff), "killing_input": s.killing_input}
                for s in self.survivors
            ],
            "equivalents": [
                {**_mutant_json(e.mutant, e.diff), "why": e.why} for e in self.equivalents
            ],
        }


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


def _mutant_json(mutant: Mutant, diff: str) -> dict[str, Any]:
    return {
        "id": mutant.id,
        "operator": mutant.operator,
        "line": mutant.line,
        "description": mutant.description,
        "diff": diff,
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
            equivalents.append(Equivalent(c.mutant, c.diff, why))
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
                equivalents.append(Equivalent(c.mutant, c.diff, why))
            else:
                found_input = _killing_input(d) if d is not None and d.has_verdict else None
                survivors.append(Survivor(c.mutant, c.diff, found_input))
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
    from deepgym.envs.session_check import scripted
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
