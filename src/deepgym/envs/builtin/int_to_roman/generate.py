"""Builds test_cases.json for int_to_roman."""

import json
import random
from pathlib import Path

# Digit patterns per decimal place: ones, tens, hundreds, thousands.
PLACES = [("I", "V", "X"), ("X", "L", "C"), ("C", "D", "M"), ("M", "?", "?")]
PATTERN = ["", "a", "aa", "aaa", "ab", "b", "ba", "baa", "baaa", "ac"]


def solve(num):
    out = []
    for place, digit in enumerate(reversed(str(num))):
        one, five, ten = PLACES[place]
        text = PATTERN[int(digit)].replace("a", one).replace("b", five).replace("c", ten)
        out.append(text)
    return "".join(reversed(out))


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    numbers = [
        1,
        3,
        4,
        5,
        9,
        10,
        14,
        40,
        44,
        49,
        58,
        90,
        99,
        400,
        444,
        500,
        900,
        944,
        1000,
        1994,
        2024,
        3888,
        3999,
    ]
    numbers += [rng.randint(1, 3999) for _ in range(12)]
    return [{"args": [n], "expected": solve(n)} for n in numbers]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
