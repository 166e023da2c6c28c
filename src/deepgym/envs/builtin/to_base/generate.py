"""Builds test_cases.json for to_base."""

import json
import random
import string
from pathlib import Path

DIGITS = string.digits + string.ascii_uppercase


def solve(n, base):
    # Find the highest power of the base first, then peel digits from the top.
    if n == 0:
        return "0"
    magnitude = abs(n)
    power = 1
    while power * base <= magnitude:
        power *= base
    out = []
    while power:
        digit, magnitude = divmod(magnitude, power)
        out.append(DIGITS[digit])
        power //= base
    return ("-" if n < 0 else "") + "".join(out)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    pairs = [
        (255, 16),
        (-10, 2),
        (0, 7),
        (35, 36),
        (36, 36),
        (1, 2),
        (-1, 2),
        (0, 2),
        (10, 10),
        (-255, 16),
        (2**64, 2),
        (-(2**64) + 1, 16),
        (10**60, 36),
        (-(10**60), 3),
        (8, 8),
        (100, 9),
        (-7, 7),
        (1295, 36),
        (46655, 36),
    ]
    for _ in range(14):
        n = rng.randint(-(10 ** rng.randint(1, 60)), 10 ** rng.randint(1, 60))
        pairs.append((n, rng.randint(2, 36)))
    return [{"args": [n, b], "expected": solve(n, b)} for n, b in pairs]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
