"""Mutation testing of verifiers: the generator (pure), the runner on a fake engine, and the
real sandbox on a weak environment."""

from __future__ import annotations

import ast

import pytest

from deepgym.envs.mutants import OPERATORS, equivalent_markers, generate

SOURCE = '''\
def grade(xs: list[int], limit: int) -> str:
    """Grades a list."""
    total = 0
    for x in xs:
        total += x * 2
    if total < limit and not xs == []:
        label = "low"
    else:
        label = "high"
    flag = True
    return label if flag else "none"
'''


def _by(operator: str, source: str = SOURCE) -> list[str]:
    return [m.description for m in generate(source) if m.operator == operator]


def test_every_mutant_compiles_differs_from_the_reference_and_is_unique() -> None:
    mutants = generate(SOURCE)
    reference = ast.unparse(ast.parse(SOURCE))
    keys = [ast.unparse(ast.parse(m.source)) for m in mutants]
    assert len(keys) == len(set(keys))
    assert reference not in keys
    for mutant in mutants:
        compile(mutant.source, "<mutant>", "exec")
    assert len({m.id for m in mutants}) == len(mutants)
    assert {m.operator for m in mutants} == set(OPERATORS)


def test_generation_is_deterministic() -> None:
    assert generate(SOURCE) == generate(SOURCE)


def test_comparison_operators_are_swapped() -> None:
    found = _by("comparison")
    assert "line 6: `<` -> `<=`" in found
    assert "line 6: `<` -> `>=`" in found
    assert "line 6: `==` -> `!=`" in found


def test_arithmetic_operators_are_swapped_augmented_too() -> None:
    found = _by("arithmetic")
    assert "line 5: `+=` -> `-=`" in found
    assert "line 5: `*` -> `/`" in found


def test_integer_constants_are_off_by_one() -> None:
    found = _by("constant")
    assert {"line 3: `0` -> `1`", "line 3: `0` -> `-1`", "line 5: `2` -> `3`"} <= set(found)


def test_branches_are_swapped_and_negated() -> None:
    found = _by("branch")
    assert "line 6: `if` condition negated" in found
    assert "line 6: `if`/`else` bodies swapped" in found
    assert "line 11: conditional expression's branches swapped" in found
    swapped = next(m for m in generate(SOURCE) if m.description.endswith("bodies swapped"))
    assert swapped.source.index("high") < swapped.source.index("low")


def test_statements_are_dropped_but_not_docstrings() -> None:
    found = _by("statement")
    assert "line 3: `total = 0` dropped" in found
    assert not any("Grades" in d for d in found)
    dropped = next(m for m in generate(SOURCE) if m.description == "line 3: `total = 0` dropped")
    assert "    pass\n" in dropped.source


def test_returns_made_constant_by_context_and_early() -> None:
    found = _by("return")
    assert "line 1: `return ''` at the start of `grade`" in found
    assert any(d.endswith("-> `return None`") for d in found)
    assert any(d.endswith("-> `return ''`") for d in found)
    early = next(m for m in generate(SOURCE) if "at the start" in m.description)
    lines = early.source.splitlines()
    assert lines[1] == '    """Grades a list."""'
    assert lines[2] == "    return ''"


def test_boolean_operators_are_negated() -> None:
    found = _by("boolean")
    assert "line 6: `and` -> `or`" in found
    assert "line 6: `not` removed from `not xs == []`" in found
    assert "line 6: `not` added to `total < limit`" in found
    assert "line 10: `True` -> `False`" in found


def test_a_mutant_keeps_the_reference_formatting_outside_the_change() -> None:
    source = "def f(a):\n    # keep me\n    return a + 1  # and me\n"
    mutant = next(m for m in generate(source) if m.operator == "arithmetic")
    assert mutant.source == "def f(a):\n    # keep me\n    return a - 1  # and me\n"


def test_annotations_are_not_mutated() -> None:
    source = "def f(a: 'x' == 1) -> int:\n    return a\n"
    assert not _by("comparison", source)


def test_a_source_that_does_not_parse_raises() -> None:
    with pytest.raises(SyntaxError):
        generate("def f(:\n")


def test_equivalent_markers_are_read() -> None:
    source = (
        "x = 1  # deepgym: equivalent-mutant constant\n"
        "y = 2\n"
        "z = x < y  # deepgym: equivalent-mutant comparison, boolean\n"
        "w = 3  # deepgym: equivalent-mutant\n"
    )
    assert equivalent_markers(source) == {
        1: frozenset({"constant"}),
        3: frozenset({"comparison", "boolean"}),
        4: frozenset({"all"}),
    }
