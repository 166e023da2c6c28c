"""Builds test_cases.json for integer_sqrt."""

import json
import random
from pathlib import Path


def solve(n):
    # Digit-by-digit binary search on the root's bits.
    root = 0
    for bit in range((n.bit_length() + 1) // 2, -1, -1):
        candidate = root | (1 << bit)
        if candidate * candidate <= n:
            root = candidate
    return root


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    numbers = [
        0,
        1,
        2,  # the smallest n that needs the search: n < 2 returns n itself, n <= 2 would not
        3,
        4,
        15,
        16,
        17,
        24,
        26,
        99,
        100,
        10**40 - 1,
        10**40,
        2**52 + 1,
        (2**53 + 1) ** 2 - 1,
        (2**53 + 1) ** 2,
        2**1023,
        2**1024,
        10**399 + 12345,
        (10**150 + 7) ** 2 - 1,
        (10**150 + 7) ** 2 + 1,
        9_007_199_254_740_993,
    ]
    for digits in [5, 12, 17, 19, 25, 40, 80, 150, 300, 399]:
        numbers.append(rng.randrange(10 ** (digits - 1), 10**digits))
    for digits in [16, 30, 100]:
        r = rng.randrange(10 ** (digits - 1), 10**digits)
        numbers.append(r * r - 1)
        numbers.append(r * r)
    return [{"args": [n], "expected": solve(n)} for n in numbers]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
