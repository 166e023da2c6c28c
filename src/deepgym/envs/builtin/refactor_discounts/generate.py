"""Builds test_cases.json for refactor_discounts (read by verifier.py)."""

import json
import random
from pathlib import Path

DISCOUNTS = {"SAVE10": 10, "STAFF": 30, "HALF": 50}


def apply_discount(amount, code):
    if code is None:
        return amount
    return amount - amount * DISCOUNTS[code] // 100


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    apply = "shop.discounts:apply_discount"
    cart = "shop.cart:cart_total"
    line = "shop.invoice:line_total"
    invoice = "shop.invoice:invoice_total"
    cases = [
        {"attr": "shop.cart:apply_discount.__module__", "expected": "shop.discounts"},
        {"attr": "shop.invoice:apply_discount.__module__", "expected": "shop.discounts"},
        {"attr": "shop.discounts:DISCOUNTS", "expected": DISCOUNTS},
        {"absent": "shop.cart:_DISCOUNTS"},
        {"absent": "shop.invoice:_CODES"},
        {"call": apply, "args": [1999, "SAVE10"], "expected": apply_discount(1999, "SAVE10")},
        {"call": apply, "args": [1999, None], "expected": 1999},
        {"call": apply, "args": [0, "HALF"], "expected": 0},
        {"call": apply, "args": [100, "FREE"], "raises": "ValueError"},
        {"call": cart, "args": [[1000, 999], "SAVE10"], "expected": 1800},
        {"call": cart, "args": [[]], "expected": 0},
        {"call": cart, "args": [[100], "free"], "raises": "ValueError"},
        {"call": line, "args": [250, 4, "HALF"], "expected": 500},
        {"call": line, "args": [250, -1], "raises": "ValueError"},
        {"call": line, "args": [333, 3, "BOGUS"], "raises": "ValueError"},
        {"call": invoice, "args": [[[100, 3], [50, 1]]], "expected": 350},
    ]
    codes = [None, *DISCOUNTS]
    for _ in range(4):
        prices = [rng.randint(1, 5000) for _ in range(rng.randint(1, 6))]
        code = rng.choice(codes)
        cases.append(
            {"call": cart, "args": [prices, code], "expected": apply_discount(sum(prices), code)}
        )
    for _ in range(4):
        lines = [[rng.randint(1, 999), rng.randint(0, 12)] for _ in range(rng.randint(1, 4))]
        code = rng.choice(codes)
        expected = sum(apply_discount(u * q, code) for u, q in lines)
        cases.append({"call": invoice, "args": [lines, code], "expected": expected})
    for _ in range(3):
        amount = rng.randint(1, 100_000)
        code = rng.choice(codes)
        cases.append(
            {"call": apply, "args": [amount, code], "expected": apply_discount(amount, code)}
        )
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
