"""Builds test_cases.json for roman_to_int."""

import json
import random
from pathlib import Path


def to_roman(num):
    # Build by repeated subtraction of the largest fitting value.
    table = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ]
    out = ""
    for value, symbol in table:
        while num >= value:
            out += symbol
            num -= value
    return out


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    numbers = [
        1,
        2,
        3,
        4,
        6,
        9,
        11,
        19,
        40,
        58,
        90,
        94,
        400,
        499,
        900,
        999,
        1000,
        1444,
        1994,
        2421,
        3549,
        3999,
    ]
    numbers += [rng.randint(1, 3999) for _ in range(12)]
    # The numeral is the input; the number is the expected answer.
    return [{"args": [to_roman(n)], "expected": n} for n in numbers]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
