"""Builds test_cases.json for every program environment: ``python generate.py``.

A folder ``<language>/<problem>`` takes the cases of its problem's function here, made from the
seed in its metadata.json. One generator serves the whole family, not one per folder, because
the six ``sum_pairs`` folders (one per language) must hold the same test set: they share a
seed, so every language is held to exactly the same cases.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
Case = dict[str, str]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
SUM_PAIRS_BOUND = 4 * 10**18
"""Random sum_pairs values stay within this, so that every sum fits in 64 bits."""


def _sum_pairs_case(pairs: list[tuple[int, int]]) -> Case:
    for a, b in pairs:
        if not INT64_MIN <= a + b <= INT64_MAX:
            raise ValueError(f"{a} + {b} does not fit in 64 bits")
    stdin = f"{len(pairs)}\n" + "".join(f"{a} {b}\n" for a, b in pairs)
    return {"stdin": stdin, "expected_stdout": "".join(f"{a + b}\n" for a, b in pairs)}


def sum_pairs(seed: int) -> list[Case]:
    """Hand-made edges (32-bit and 64-bit limits, past 2**53 for a double), then random pairs
    large enough that a 32-bit or floating-point answer fails nearly every case."""
    rng = random.Random(seed)

    def big() -> int:
        return rng.randint(-SUM_PAIRS_BOUND, SUM_PAIRS_BOUND)

    def any_size() -> int:
        digits = rng.randint(1, 18)
        return rng.randint(-(10**digits) + 1, 10**digits - 1)

    return [
        _sum_pairs_case([(1, 2), (-5, 5), (10**12, 1)]),
        _sum_pairs_case([]),
        _sum_pairs_case([(0, 0)]),
        _sum_pairs_case([(-1, -1)]),
        _sum_pairs_case([(2**31 - 1, 1), (-(2**31), -1), (2**32, 2**32)]),
        _sum_pairs_case([(2**62 - 1, 2**62), (-(2**62), -(2**62)), (INT64_MAX, INT64_MIN)]),
        _sum_pairs_case([(2**53 + 1, 0), (2**53, 1), (-(2**53) - 1, -2)]),
        _sum_pairs_case([(big(), big()) for _ in range(20)]),
        _sum_pairs_case([(any_size(), any_size()) for _ in range(500)]),
        _sum_pairs_case([(big(), big()) for _ in range(2000)]),
    ]


def _circle_area_case(radii: list[str]) -> Case:
    stdin = f"{len(radii)}\n" + "".join(f"{r}\n" for r in radii)
    # The same double operations as math.pi * r * r in C++: (M_PI * r) * r.
    areas = "".join(f"{math.pi * float(r) * float(r):.9f}\n" for r in radii)
    return {"stdin": stdin, "expected_stdout": areas}


def circle_area(seed: int) -> list[Case]:
    """Radii from 0 to 10**4 with up to three decimals; areas large and small, so that an
    answer printed to six significant digits (C++'s default) fails nearly every case."""
    rng = random.Random(seed)

    def radius(low: int, high: int) -> str:
        return f"{rng.randint(low, high) / 1000:.3f}"

    return [
        _circle_area_case(["1", "2.5", "10"]),
        _circle_area_case([]),
        _circle_area_case(["0"]),
        _circle_area_case(["0.001", "0.01", "0.5", "0.5642"]),
        # Areas just past a power of ten, where six significant digits are not enough.
        _circle_area_case(["10000", "5642.3", "1784.3", "178.43"]),
        _circle_area_case([str(r) for r in range(1, 21)]),
        _circle_area_case(["7.500", "3.250", "100.000"]),
        _circle_area_case([radius(0, 1_000) for _ in range(30)]),
        _circle_area_case([radius(0, 10_000_000) for _ in range(50)]),
        _circle_area_case([radius(1_000, 10_000_000) for _ in range(200)]),
    ]


def _first_pair(values: list[int], target: int) -> str:
    """The reference's answer: the pair with the smallest j, and for it the smallest i."""
    first: dict[int, int] = {}
    for j, v in enumerate(values, 1):
        i = first.get(target - v)
        if i is not None:
            return f"{i} {j}\n"
        first.setdefault(v, j)
    return "-1\n"


def _any_pair_case(values: list[int], target: int) -> Case:
    stdin = f"{len(values)} {target}\n" + " ".join(map(str, values)) + "\n"
    return {"stdin": stdin, "expected_stdout": _first_pair(values, target)}


def any_pair(seed: int) -> list[Case]:
    """Pairs that exist once, often, or never, and the trap of a value that is half the target
    (one index used twice is no pair); values up to 10**18, so sums need 64 bits."""
    rng = random.Random(seed)
    e18 = 10**18

    def no_pair_with_half(n: int) -> tuple[list[int], int]:
        # Every value is 1 mod 4 (two of them sum to 2 mod 4) but one, half the target (0 mod
        # 4): no two indices sum to the target, and one index alone would.
        target = 8 * rng.randint(-(10**17), 10**17)
        values = [4 * rng.randint(-(10**17), 10**17) + 1 for _ in range(n - 1)]
        values.insert(rng.randrange(n), target // 2)
        return values, target

    def one_planted_pair(n: int) -> tuple[list[int], int]:
        values = [2 * rng.randint(-(e18 // 2), e18 // 2) for _ in range(n)]
        i, j = rng.sample(range(n), 2)
        # values[i] and values[j] are the only odd values, and so the only pair (two even
        # values meeting the even target by chance: about n**2 in 10**18).
        values[j] = rng.randint(-(e18 // 2), e18 // 2) | 1
        values[i] = rng.randint(-(e18 // 2), e18 // 2) | 1
        target = values[i] + values[j]
        return values, target

    small = [rng.randint(-50, 50) for _ in range(2000)]
    return [
        _any_pair_case([2, 7, 11, 15], 9),
        _any_pair_case([5], 10),
        _any_pair_case([1, 2, 3], 100),
        _any_pair_case([4, 4], 8),
        _any_pair_case([3, 1, 5], 6),
        _any_pair_case([-3, 0, 7, 3, 0], 0),
        _any_pair_case([e18, 1, e18, -e18], 2 * e18),
        _any_pair_case(*no_pair_with_half(2000)),
        _any_pair_case(small, rng.randint(-60, 60)),
        _any_pair_case(*one_planted_pair(2000)),
    ]


def _gcd_case(pairs: list[tuple[int, int]]) -> Case:
    return {
        "stdin": "".join(f"{a} {b}\n" for a, b in pairs),
        "expected_stdout": "".join(f"{math.gcd(a, b)}\n" for a, b in pairs),
    }


def gcd(seed: int) -> list[Case]:
    """cpp/gcd (a function task): pairs of 64-bit integers, negative ones and zeros among them
    (a remainder of a negative number is where the wrong answer goes wrong)."""
    rng = random.Random(seed)

    def pairs(n: int, negative: bool) -> list[tuple[int, int]]:
        out = [(rng.randint(-(10**12), 10**12), rng.randint(-(10**12), 10**12)) for _ in range(n)]
        return [(a, -abs(b)) for a, b in out] if negative else out

    edges = [(12, 18), (7, 5), (0, 0), (0, 9), (-4, 6), (6, -4), (-12, -18)]
    big = [(10**18, 10**18 - 2), (2**61 - 1, 2**31 - 1), (-(2**62), 2**40)]
    return [
        _gcd_case(edges),
        _gcd_case(big),
        *(_gcd_case(pairs(rng.randint(1, 50), i % 3 == 0)) for i in range(8)),
    ]


GENERATORS: dict[str, Callable[[int], list[Case]]] = {
    "gcd": gcd,
    "sum_pairs": sum_pairs,
    "circle_area": circle_area,
    "any_pair": any_pair,
}
"""Each problem's cases, from a seed."""


def generate(folder: Path) -> list[Case]:
    """The test cases of one ``<language>/<problem>`` folder, from its metadata's seed."""
    seed = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))["seed"]
    return GENERATORS[folder.name](seed)


def main() -> int:
    """Write every folder's test_cases.json."""
    for meta in sorted(HERE.glob("*/*/metadata.json")):
        cases = generate(meta.parent)
        (meta.parent / "test_cases.json").write_text(json.dumps(cases, indent=1) + "\n")
        print(f"{meta.parent.relative_to(HERE)}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
