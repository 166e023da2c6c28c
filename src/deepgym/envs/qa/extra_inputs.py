"""Generated extra inputs for a function task: seeded variations of its test cases' arguments.

Mutation testing (``deepgym.envs.qa.mutants``) runs a surviving mutant and the reference on these
inputs: where they disagree, the input is a test case the verifier lacks; where they agree on
all, the mutant is likely equivalent.

``variations(examples, count, seed)`` is pure and deterministic. Each variation starts from one
example's argument list and changes its values by type, inside the range the examples show (so
that a variation stays, as far as the examples tell, within the task's constraints):

- an ``int``: a neighbour (``n-1``, ``n+1``), or a value drawn from the examples' range at that
  argument (near and far), never outside ``[min, max]`` of the ints seen there;
- a ``float``: scaled or shifted, inside the range seen;
- a ``str``: one edit (a character dropped, doubled, swapped with its neighbour, or inserted
  from the string's own alphabet), reversed, or emptied where an example is empty;
- a ``list``: its elements varied, shuffled, one dropped, one doubled, or a varied copy of one
  appended (longer, never past the longest list seen); a list of equal-length lists (a matrix)
  or of equal-length strings (a grid) keeps its shape: only its cells vary and its rows shuffle;
- a ``tuple`` keeps its length, a ``dict`` its keys; ``bool`` flips; ``None`` stays.

Hypothesis is a development dependency only, so this small generator stands in for it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["variations"]


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


def variations(examples: Sequence[Sequence[Any]], count: int, seed: int) -> list[list[Any]]:
    """Up to ``count`` argument lists, each a variation of one of ``examples`` (deduplicated,
    none equal to an example), the same for the same arguments."""
    bases = [list(e) for e in examples if isinstance(e, list | tuple)]
    if not bases or count <= 0:
        return []
    width = max(len(b) for b in bases)
    ranges = [_Ranges() for _ in range(width)]
    for base in bases:
        for pos, value in enumerate(base):
            ranges[pos].see(value)
    rng = random.Random(seed)
    seen = {_key(b) for b in bases}
    out: list[list[Any]] = []
    for attempt in range(count * 4):
        if len(out) >= count:
            break
        base = bases[attempt % len(bases)]
        candidate = [_vary(v, ranges[pos], rng) for pos, v in enumerate(base)]
        key = _key(candidate)
        if key not in seen:
            seen.add(key)
            out.append(candidate)
    return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _vary(value: Any, ranges: _Ranges, rng: random.Random) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return not value if rng.random() < 0.5 else value
    if isinstance(value, int):
        return _vary_int(value, ranges.ints, rng)
    if isinstance(value, float):
        return _vary_float(value, ranges.floats, rng)
    if isinstance(value, str):
        return _vary_str(value, ranges, rng)
    if isinstance(value, tuple):
        return tuple(_vary(v, ranges, rng) if rng.random() < 0.5 else v for v in value)
    if isinstance(value, dict):
        return {k: _vary(v, ranges, rng) if rng.random() < 0.5 else v for k, v in value.items()}
    if isinstance(value, list):
        return _vary_list(value, ranges, rng)
    return value


def _vary_int(value: int, seen: list[int], rng: random.Random) -> int:
    low, high = (min(seen), max(seen)) if seen else (value, value)
    choice = rng.random()
    if choice < 0.4:
        new = value + rng.choice((-1, 1))
    elif choice < 0.7:
        new = rng.randint(max(low, value - 3), min(high, value + 3)) if low <= high else value
    else:
        new = rng.randint(low, high)
    return min(max(new, low), high)


def _vary_float(value: float, seen: list[float], rng: random.Random) -> float:
    low, high = (min(seen), max(seen)) if seen else (value, value)
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


def _vary_matrix(value: list[Any], ranges: _Ranges, rng: random.Random) -> list[Any]:
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
        rows = [[_vary_cell(v, ranges, rng) for v in row] for row in value]
    if rng.random() < 0.3:
        rng.shuffle(rows)
    return rows


def _vary_cell(value: Any, ranges: _Ranges, rng: random.Random) -> Any:
    if rng.random() >= 0.3:
        return value
    if isinstance(value, list):
        return _vary_matrix(value, ranges, rng) if _is_matrix(value) else value
    if isinstance(value, str):
        return rng.choice(value) * len(value) if value else value
    return _vary(value, ranges, rng)


def _vary_list(value: list[Any], ranges: _Ranges, rng: random.Random) -> list[Any]:
    if _is_matrix(value):
        return _vary_matrix(value, ranges, rng)
    items = [_vary(v, ranges, rng) if rng.random() < 0.4 else v for v in value]
    longest = max(ranges.lengths, default=len(value))
    shortest = min(ranges.lengths, default=len(value))
    choice = rng.random()
    if choice < 0.25:
        rng.shuffle(items)
    elif choice < 0.45 and len(items) > shortest and items:
        del items[rng.randrange(len(items))]
    elif choice < 0.65 and len(items) < longest and items:
        items.insert(rng.randrange(len(items)), rng.choice(items))
    elif choice < 0.85 and len(items) < longest and items:
        items.append(_vary(rng.choice(items), ranges, rng))
    return items
