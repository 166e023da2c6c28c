"""Builds test_cases.json for evaluate_expression.

Random expression trees are rendered to text with just the parentheses the
grammar needs (plus some extra ones), and the expected value is computed from
the tree, so no parser is involved in producing the answers.
"""

import json
import random
from pathlib import Path

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def value(node):
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "neg":
        return -value(node[1])
    a, b = value(node[1]), value(node[2])
    if kind == "+":
        return a + b
    if kind == "-":
        return a - b
    if kind == "*":
        return a * b
    return trunc_div(a, b)


def render(node, rng):
    kind = node[0]
    if kind == "num":
        text, prec = str(node[1]), 3
    elif kind == "neg":
        inner, inner_prec = render(node[1], rng)
        if inner_prec < 3 or rng.random() < 0.3:
            inner = f"({inner})"
        text, prec = "-" + inner, 3
    else:
        left, left_prec = render(node[1], rng)
        right, right_prec = render(node[2], rng)
        prec = PRECEDENCE[kind]
        if left_prec < prec or rng.random() < 0.1:
            left = f"({left})"
        if right_prec <= prec or rng.random() < 0.1:
            right = f"({right})"
        space = rng.choice(["", " ", " "])
        text = f"{left}{space}{kind}{space}{right}"
    return text, prec


def build(rng, depth, big, ops="+-*/"):
    if depth == 0 or rng.random() < 0.25:
        return ("num", rng.randint(0, 10**6 if big else 20))
    if rng.random() < 0.12:
        return ("neg", build(rng, depth - 1, big, ops))
    kind = rng.choice(ops)
    left = build(rng, depth - 1, big, ops)
    right = build(rng, depth - 1, big, ops)
    if kind == "/" and value(right) == 0:
        right = ("num", rng.randint(1, 9))
    return (kind, left, right)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    cases = [{"args": [text], "expected": expected} for text, expected in HAND_WRITTEN]
    for depth, big in [
        (2, False),
        (3, False),
        (3, True),
        (4, False),
        (4, True),
        (5, False),
        (5, True),
        (6, False),
        (6, True),
        (7, False),
        (3, False),
        (8, False),
        (9, True),
        (10, False),
        (4, False),
        (5, False),
    ]:
        tree = build(rng, depth, big)
        while tree[0] == "num":
            tree = build(rng, depth, big)
        text, _ = render(tree, rng)
        cases.append({"args": [text], "expected": value(tree)})
    # Subtraction-heavy trees divide negative numbers often, where truncation
    # toward zero and floor division disagree.
    while len(cases) < 45:
        tree = build(rng, rng.randint(3, 5), False, ops="--//*+")
        top_left = value(tree[1]) if tree[0] == "/" else 0
        if top_left < 0 and top_left % value(tree[2]) != 0 and value(tree) != 0:
            text, _ = render(tree, rng)
            cases.append({"args": [text], "expected": value(tree)})
    # Division with -1 as either operand: the quotient is 1 in size, so only the sign rule
    # decides it.
    cases += [{"args": [text], "expected": expected} for text, expected in DIVIDE_BY_ONE]
    return cases


HAND_WRITTEN = [
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("-7 / 2", -3),
    ("2 * -(3 - 10)", 14),
    ("42", 42),
    ("0", 0),
    ("8 - 3 - 2", 3),
    ("8 / 2 / 2", 2),
    ("7 / -2", -3),
    ("--3", 3),
    ("- -4", 4),
    ("10 - (2 - 3)", 11),
    ("100 / 7 * 7", 98),
    ("(((5)))", 5),
    ("1-1-1-1-1", -3),
    ("2*3+4*5-6/4", 25),
    ("-(2+3)*-(4-10)/3", -10),
    ("   12   +  30 ", 42),
    ("99999999999 * 99999999999 - 1", 9999999999800000000000),
    ("0 - 17 / 5", -3),
    ("-17 / 5 * 5 + -17 - -17 / 5 * 5", -17),
]

DIVIDE_BY_ONE = [
    ("-1 / 1", -1),
    ("1 / -1", -1),
    ("-1 / -1", 1),
]


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
