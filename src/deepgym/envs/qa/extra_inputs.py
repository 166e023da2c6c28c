"""Generated inputs for a function task: its boundaries, and seeded variations of its examples.

Mutation testing (``deepgym.envs.qa.mutants``) runs a surviving mutant and the reference on these
inputs: where they disagree, the input is a test case the verifier lacks; where they agree on
enough of them, the mutant is likely equivalent. The examples are argument lists: a task's test
cases' ``args``, or the calls its verifier makes to the reference (traced).

Nothing here decides what the task accepts: the reference does. An input on which it raises,
runs too long or returns what cannot be written down is outside the task and dropped (in the
sandbox, ``deepgym/envs/verifiers/differential.py``), so the generator may, and should, leave
the range the examples show.

``boundaries(examples)`` replaces one argument of an example at a time (the first example, the
smallest and the largest) with each boundary value of that argument's type:

- an ``int``: 0, 1, -1, 2, the examples' min and max, min - 1 and max + 1, the powers of two
  from just below each bound to 8 times past it (and one less, one more), a large value
  (``LARGE``), and their negatives where the examples go below 0;
- a ``float``: 0.0, -0.0, 1.0, -1.0, 0.5, a tiny and a large value, min - 1 and max + 1;
- a ``str``: empty, its first character, a space, non-ASCII characters (``é``, ``ß``, ``日本``,
  an emoji), the string upper-cased, doubled, with a non-ASCII character appended;
- a ``list``: empty, one element, one element twice, the list sorted, reversed, with its
  elements doubled, one element longer than the longest seen; nested empties (``[[]]``,
  ``[""]``) where its elements are lists or strings; a matrix (equal-length rows): one row,
  one column, one cell;
- a ``tuple`` keeps its length (each item replaced by its boundaries), a ``dict`` may be
  empty or keep one item, a ``bool`` flips, ``None`` stays.

Then every argument at its emptiest at once. ``variations(examples, count, seed)`` are seeded
random variations: an int drawn near the example or across the examples' range, widened by
``widen`` times its width on each side, times a power of two up to ``2**SCALES``; a float
scaled or shifted the same way; a string edited
once (a character dropped, doubled, swapped or inserted from its own alphabet), reversed or
emptied; a list varied element by element, shuffled, shortened or lengthened up to two past the
longest seen; a matrix keeps its shape.

Both are pure and deterministic (the same examples and seed, the same inputs in the same
order), never repeat an input, and never give back an example. Hypothesis is a development
dependency only; the property tests hold this small generator to those invariants.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LARGE", "boundaries", "key", "variations"]

LARGE = 10**6
"""The large value of an int boundary (and 1e9 for a float): big enough to find an overflow or
a quadratic algorithm, small enough that a reference that accepts it answers in time."""
NON_ASCII = ("é", "ß", "日本", "🙂")
SCALES = 10
"""A widened variation reaches ``widen`` times the examples' width, times a power of two up to
``2**SCALES`` (drawn each time): near the range often, far from it sometimes."""


@dataclass
class _Ranges:
    """What the examples show at one argument position: the ints, floats and lengths seen."""

    ints: list[int] = field(default_factory=list)
    floats: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def see(self, value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            self.ints.append(value)
        elif isinstance(value, float):
            self.floats.append(value)
        elif isinstance(value, str | list | tuple | dict):
            self.lengths.append(len(value))
            items = value.values() if isinstance(value, dict) else value
            if not isinstance(value, str):
                for item in items:
                    self.see(item)


def key(value: Any) -> str:
    """The identity of an input: its Python literal (a tuple is not a list)."""
    return repr(value)


def _bases(examples: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(e) for e in examples if isinstance(e, list | tuple)]


def _ranges(bases: list[list[Any]]) -> list[_Ranges]:
    width = max(len(b) for b in bases)
    ranges = [_Ranges() for _ in range(width)]
    for base in bases:
        for pos, value in enumerate(base):
            ranges[pos].see(value)
    return ranges


# -- boundaries ----------------------------------------------------------------------------------


def boundaries(examples: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """Each example's arguments with one replaced by a boundary value of its type, then every
    argument at its emptiest (see the module's docstring); deduplicated, no example."""
    bases = _bases(examples)
    if not bases:
        return []
    ranges = _ranges(bases)
    picked = [
        bases[0],
        min(bases, key=lambda b: len(key(b))),
        max(bases, key=lambda b: len(key(b))),
    ]
    seen = {key(b) for b in bases}
    out: list[list[Any]] = []

    def add(candidate: list[Any]) -> None:
        k = key(candidate)
        if k not in seen:
            seen.add(k)
            out.append(candidate)

    for base in _unique(picked):
        for pos, value in enumerate(base):
            for edge in _edges(value, ranges[pos]):
                add([*base[:pos], edge, *base[pos + 1 :]])
    add([_emptiest(v) for v in bases[0]])
    return out


def _unique(items: list[list[Any]]) -> list[list[Any]]:
    seen: set[str] = set()
    out = []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out


def _edges(value: Any, ranges: _Ranges) -> Iterator[Any]:
    """The boundary values of ``value``'s type, given what the examples show there."""
    if value is None:
        return
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield from _int_edges(ranges.ints or [value])
    elif isinstance(value, float):
        yield from _float_edges(ranges.floats or [value])
    elif isinstance(value, str):
        yield from _str_edges(value, ranges)
    elif isinstance(value, list):
        yield from _list_edges(value, ranges)
    elif isinstance(value, tuple):
        for pos, item in enumerate(value):
            for edge in _edges(item, ranges):
                yield (*value[:pos], edge, *value[pos + 1 :])
    elif isinstance(value, dict):
        yield {}
        for k in list(value)[:1]:
            yield {k: value[k]}


def _int_edges(seen: list[int]) -> list[int]:
    low, high = min(seen), max(seen)
    values = [0, 1, -1, 2, low, high, low - 1, high + 1]
    for bound in sorted({abs(low), abs(high)}):
        bits = max(bound.bit_length(), 1)
        for power in (1 << k for k in range(bits - 1, bits + 4)):
            values += [power - 1, power, power + 1]
    values.append(LARGE)
    if low < 0:
        values += [-v for v in values if v > 0]
    return list(dict.fromkeys(values))


def _float_edges(seen: list[float]) -> list[float]:
    low, high = min(seen), max(seen)
    return list(dict.fromkeys([0.0, -0.0, 1.0, -1.0, 0.5, 1e-9, 1e9, low - 1.0, high + 1.0]))


def _str_edges(value: str, ranges: _Ranges) -> list[str]:
    longest = max(ranges.lengths, default=len(value))
    out = ["", value[:1] or "a", " ", *NON_ASCII, value.upper(), value * 2, value + NON_ASCII[0]]
    if len(value) <= longest:
        out.append((value or "a") * (longest // max(len(value), 1) + 1))
    return list(dict.fromkeys(out))


def _list_edges(value: list[Any], ranges: _Ranges) -> Iterator[list[Any]]:
    yield []
    if _is_matrix(value):
        yield [value[0]]
        yield [row[:1] for row in value]
        yield [value[0][:1]]
    if not value:
        return
    first = value[0]
    yield [first]
    yield [first, first]
    try:
        yield sorted(value)
        yield sorted(value, reverse=True)
    except TypeError:  # items that do not order
        pass
    yield value[::-1]
    yield [item for item in value for _ in range(2)]
    longest = max(ranges.lengths, default=len(value))
    yield value + [value[i % len(value)] for i in range(longest + 1 - len(value))]
    if isinstance(first, list):
        yield [[]]
        yield [[], []]
    elif isinstance(first, str):
        yield [""]
        yield ["", ""]
    elif isinstance(first, int | float) and not isinstance(first, bool):
        yield [0]
        yield [-1]


def _emptiest(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return type(value)(0)
    if isinstance(value, str | list | dict):
        return type(value)()
    if isinstance(value, tuple):
        return tuple(_emptiest(v) for v in value)
    return value


# -- variations ----------------------------------------------------------------------------------


def variations(
    examples: Sequence[Sequence[Any]], count: int, seed: int, *, widen: float = 0.0
) -> list[list[Any]]:
    """Up to ``count`` argument lists, each a variation of one of ``examples`` (deduplicated,
    none equal to an example), the same for the same arguments. ``widen``: how far past the
    examples' range a number may go, in widths of that range (0: never outside it)."""
    bases = _bases(examples)
    if not bases or count <= 0:
        return []
    ranges = _ranges(bases)
    rng = random.Random(seed)
    seen = {key(b) for b in bases}
    out: list[list[Any]] = []
    for attempt in range(count * 4):
        if len(out) >= count:
            break
        base = bases[attempt % len(bases)]
        candidate = [_vary(v, ranges[pos], rng, widen) for pos, v in enumerate(base)]
        k = key(candidate)
        if k not in seen:
            seen.add(k)
            out.append(candidate)
    return out


def _vary(value: Any, ranges: _Ranges, rng: random.Random, widen: float) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return not value if rng.random() < 0.5 else value
    if isinstance(value, int):
        return _vary_int(value, ranges.ints, rng, widen)
    if isinstance(value, float):
        return _vary_float(value, ranges.floats, rng, widen)
    if isinstance(value, str):
        return _vary_str(value, ranges, rng)
    if isinstance(value, tuple):
        return tuple(_vary(v, ranges, rng, widen) if rng.random() < 0.5 else v for v in value)
    if isinstance(value, dict):
        return {
            k: _vary(v, ranges, rng, widen) if rng.random() < 0.5 else v for k, v in value.items()
        }
    if isinstance(value, list):
        return _vary_list(value, ranges, rng, widen)
    return value


def _vary_int(value: int, seen: list[int], rng: random.Random, widen: float) -> int:
    low, high = (min(seen), max(seen)) if seen else (value, value)
    if widen:  # exact for ints past a float's range
        reach = max(high - low, 2) * round(widen * 100) // 100 << rng.randint(0, SCALES)
        low, high = low - reach, high + reach
    choice = rng.random() * (2.0 if widen else 1.0)  # widened: mostly across the range
    if choice < 0.4:
        new = value + rng.choice((-1, 1))
    elif choice < 0.7:
        near_low, near_high = max(low, value - 3), min(high, value + 3)
        new = rng.randint(near_low, near_high) if near_low <= near_high else value
    else:
        new = rng.randint(low, high)
    return min(max(new, low), high)


def _vary_float(value: float, seen: list[float], rng: random.Random, widen: float) -> float:
    low, high = (min(seen), max(seen)) if seen else (value, value)
    if widen:
        reach = widen * max(high - low, 2.0) * 2.0 ** rng.randint(0, SCALES)
        low, high = low - reach, high + reach
    new = value * rng.uniform(0.5, 1.5) if rng.random() < 0.5 else value + rng.uniform(-1, 1)
    return round(min(max(new, low), high), 6)


def _vary_str(value: str, ranges: _Ranges, rng: random.Random) -> str:
    if not value:
        return value
    chars = list(value)
    at = rng.randrange(len(chars))
    choice = rng.random()
    if choice < 0.2 and len(chars) > 1:
        del chars[at]
    elif choice < 0.4:
        chars.insert(at, chars[at])
    elif choice < 0.6 and len(chars) > 1:
        other = (at + 1) % len(chars)
        chars[at], chars[other] = chars[other], chars[at]
    elif choice < 0.8:
        chars.insert(at, rng.choice(value))
    elif choice < 0.9:
        chars.reverse()
    elif ranges.lengths and min(ranges.lengths) == 0:
        chars = []
    longest = max(ranges.lengths, default=len(chars))
    return "".join(chars[: max(longest, 1)])


def _is_matrix(value: list[Any]) -> bool:
    """A non-empty list of equal-length, non-empty rows (lists, or strings such as a grid's)."""
    return (
        len(value) > 0
        and (
            all(isinstance(row, list) for row in value)
            or all(isinstance(row, str) for row in value)
        )
        and len({len(row) for row in value}) == 1
        and len(value[0]) > 0
    )


def _vary_matrix(value: list[Any], ranges: _Ranges, rng: random.Random, widen: float) -> list[Any]:
    """The same shape: cells varied in place (a grid of strings: a cell's character replaced by
    one the grid holds), rows shuffled."""
    rows: list[Any]
    if isinstance(value[0], str):
        alphabet = sorted(set("".join(value)))
        rows = [
            "".join(rng.choice(alphabet) if rng.random() < 0.3 else ch for ch in row)
            for row in value
        ]
    else:
        rows = [[_vary_cell(v, ranges, rng, widen) for v in row] for row in value]
    if rng.random() < 0.3:
        rng.shuffle(rows)
    return rows


def _vary_cell(value: Any, ranges: _Ranges, rng: random.Random, widen: float) -> Any:
    if rng.random() >= 0.3:
        return value
    if isinstance(value, list):
        return _vary_matrix(value, ranges, rng, widen) if _is_matrix(value) else value
    if isinstance(value, str):
        return rng.choice(value) * len(value) if value else value
    return _vary(value, ranges, rng, widen)


def _vary_list(value: list[Any], ranges: _Ranges, rng: random.Random, widen: float) -> list[Any]:
    if _is_matrix(value):
        return _vary_matrix(value, ranges, rng, widen)
    items = [_vary(v, ranges, rng, widen) if rng.random() < 0.4 else v for v in value]
    longest = max(ranges.lengths, default=len(value)) + (2 if widen else 0)
    shortest = min(ranges.lengths, default=len(value))
    choice = rng.random()
    if choice < 0.25:
        rng.shuffle(items)
    elif choice < 0.45 and len(items) > shortest and items:
        del items[rng.randrange(len(items))]
    elif choice < 0.65 and len(items) < longest and items:
        items.insert(rng.randrange(len(items)), rng.choice(items))
    elif choice < 0.85 and len(items) < longest and items:
        items.append(_vary(rng.choice(items), ranges, rng, widen))
    return items
