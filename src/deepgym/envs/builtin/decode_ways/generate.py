"""Builds test_cases.json for decode_ways."""

import json
import random
from functools import lru_cache
from pathlib import Path

CODES = {str(n) for n in range(1, 27)}


def solve(s):
    @lru_cache(maxsize=None)
    def count(start):
        if start == len(s):
            return 1
        total = 0
        for width in (1, 2):
            if s[start : start + width] in CODES and start + width <= len(s):
                total += count(start + width)
        return total

    for start in range(len(s), -1, -1):
        count(start)
    return count(0)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    strings = [
        "12",
        "226",
        "06",
        "0",
        "1",
        "10",
        "27",
        "2101",
        "11106",
        "1" * 120,
        "26" * 60,
        "100",
        "301",
        "123456789",
        "2626",
        "1020304",
    ]
    while len(strings) < 34:
        alphabet = rng.choice(["12", "1234567", "0123456789", "120"])
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 120)))
        if solve(s) > 1:
            strings.append(s)
    # A long random message re-encoded, with a guaranteed positive answer.
    message = [rng.randint(1, 26) for _ in range(50)]
    strings.append("".join(str(n) for n in message))
    return [{"args": [s], "expected": solve(s)} for s in strings]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
