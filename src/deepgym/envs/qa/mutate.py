"""Mutants of a Python program: each is the program with one small change (pure, the standard
library only).

``generate(source)`` makes AST mutants of a reference program: a comparison or arithmetic
operator swapped, an integer constant off by one, an ``if``'s branches swapped or its condition
negated, a statement dropped, a return made early or constant, a boolean operator negated.
``deepgym.envs.qa.mutants`` turns them into answers to an environment and measures how many its
tests fail (the mutation score).

Why Python's ``ast`` and not mutmut or cosmic-ray: both mutate files on disk and run a test
command once per mutant, in the project's own interpreter. We need the opposite: in-memory
sources, judged by the environment's own verifier in the real sandbox, all mutants submitted as
one pooled batch. The generator is pure code over the standard library, so it runs anywhere the
judge runs.

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
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from deepgym.text import clip

__all__ = [
    "CLIP",
    "OPERATORS",
    "Mutant",
    "equivalent_markers",
    "generate",
    "is_marked_equivalent",
]

CLIP = 48
"""The longest piece of code a mutant's description quotes."""

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
    yield "statement", f"`{clip(first, CLIP)}` dropped", ast.copy_location(ast.Pass(), node)


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
                f"`{clip(ast.unparse(node), CLIP)}` -> `return {value!r}`",
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
            yield "boolean", f"`not` added to `{clip(ast.unparse(value), CLIP)}`", negated
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "boolean", f"`not` removed from `{clip(ast.unparse(node), CLIP)}`", node.operand
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
