"""The input generator of mutation testing: its invariants (property tests) and what it tries
at the boundaries of each type."""

from __future__ import annotations

import ast
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deepgym.envs.qa.extra_inputs import LARGE, NON_ASCII, boundaries, key, variations

_scalars = (
    st.integers(-(10**12), 10**12)
    | st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.booleans()
    | st.none()
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_examples = st.lists(st.lists(_values, min_size=1, max_size=3), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(_examples, st.integers(0, 40), st.integers(0, 2**32), st.sampled_from([0.0, 1.0]))
def test_variations_are_deterministic_new_and_distinct(
    examples: list[list[Any]], count: int, seed: int, widen: float
) -> None:
    made = variations(examples, count, seed, widen=widen)
    assert made == variations(examples, count, seed, widen=widen)
    assert len(made) <= count
    keys = [key(m) for m in made]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {key(list(e)) for e in examples}


@settings(max_examples=80, deadline=None)
@given(_examples)
def test_boundaries_are_deterministic_new_distinct_and_shaped_like_the_examples(
    examples: list[list[Any]],
) -> None:
    made = boundaries(examples)
    assert made == boundaries(examples)
    keys = [key(m) for m in made]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {key(list(e)) for e in examples}
    widths = {len(e) for e in examples}
    assert all(len(m) in widths for m in made)


def _literal_ok(value: Any) -> bool:
    try:
        return bool(ast.literal_eval(repr(value)) == value)
    except (ValueError, SyntaxError):
        return False


def test_an_int_gets_its_boundaries_and_leaves_the_range() -> None:
    made = [m[0] for m in boundaries([[2], [4], [7]])]
    assert {0, 1, -1, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, LARGE} <= set(made)
    wide = [m[0] for m in variations([[2], [4], [7]], 300, seed=1, widen=1.0)]
    assert len(set(wide)) > 250 and min(wide) < -100 and max(wide) > 100
    inside = [m[0] for m in variations([[2], [4], [7]], 30, seed=1)]
    assert all(2 <= v <= 7 for v in inside)


def test_negative_examples_get_negative_boundaries() -> None:
    made = {m[0] for m in boundaries([[-5], [5]])}
    assert {-6, 6, -8, 8, -LARGE, LARGE} <= made


def test_a_huge_int_is_varied_exactly() -> None:
    huge = 10**40
    made = variations([[huge], [huge * 3]], 50, seed=3, widen=1.0)
    assert made and all(isinstance(m[0], int) for m in made)


def test_a_string_gets_empty_one_character_and_non_ascii() -> None:
    made = {m[0] for m in boundaries([["abc"]])}
    assert {"", "a", " ", "ABC", "abcabc", "abcé", *NON_ASCII} <= made


def test_a_list_gets_empty_single_duplicated_sorted_reversed_and_longer() -> None:
    made = [m[0] for m in boundaries([[[3, 1, 2]]])]
    for want in ([], [3], [3, 3], [1, 2, 3], [2, 1, 3], [3, 2, 1], [3, 3, 1, 1, 2, 2]):
        assert want in made
    assert [3, 1, 2, 3] in made  # one past the longest seen
    assert [0] in made and [-1] in made


def test_nested_empties_and_a_matrix_keeps_to_rows() -> None:
    made = [m[0] for m in boundaries([[[[1, 2], [3, 4]]]])]
    for want in ([], [[]], [[], []], [[1, 2]], [[1], [3]], [[1]]):
        assert want in made
    words = [m[0] for m in boundaries([[["ab", "cd"]]])]
    assert [""] in words and ["", ""] in words


def test_other_arguments_are_kept_while_one_is_at_its_boundary() -> None:
    made = boundaries([[[5, 6], 3]])
    assert [[], 3] in made and [[5, 6], 0] in made and [[], 0] in made  # the last: all emptiest
    assert all(_literal_ok(m) for m in made)


def test_a_tuple_keeps_its_length_and_a_dict_may_empty() -> None:
    made = [m[0] for m in boundaries([[(4, "x")]])]
    assert all(isinstance(m, tuple) and len(m) == 2 for m in made)
    assert (0, "x") in made and (4, "") in made
    assert {} in [m[0] for m in boundaries([[{"k": 1}]])]
