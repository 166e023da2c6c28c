"""Builds test_cases.json for fizzbuzz."""

import json
import random
from pathlib import Path


def solve(n):
    out = []
    for i in range(1, n + 1):
        if i % 15 == 0:
            out.append("FizzBuzz")
        elif i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        else:
            out.append(str(i))
    return out


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    sizes = [0, 1, 2, 3, 4, 5, 6, 10, 14, 15, 16, 30, 31, 45, 100, 2000]
    sizes += [rng.randint(7, 99) for _ in range(8)]
    sizes += [rng.randint(100, 600) for _ in range(2)]
    return [{"args": [n], "expected": solve(n)} for n in sizes]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
