"""Builds test_cases.json for fix_word_count (checks call into the patched repo)."""

import json
import random
from pathlib import Path


def words(text):
    return text.split()


def line_count(text):
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def average_word_length(text):
    found = words(text)
    if not found:
        return 0.0
    return round(sum(len(w) for w in found) / len(found), 2)


SOLVERS = {
    "textstats.counting:words": words,
    "textstats.counting:word_count": lambda text: len(words(text)),
    "textstats:word_count": lambda text: len(words(text)),
    "textstats.counting:line_count": line_count,
    "textstats.counting:average_word_length": average_word_length,
}


def random_text(rng):
    vocab = ["alpha", "be", "c", "delta", "echo", "fox", "gamma", "hi"]
    gaps = [" ", "  ", "\t", "\n", " \n ", "   "]
    parts = [rng.choice(gaps) if rng.random() < 0.3 else ""]
    for _ in range(rng.randint(1, 9)):
        parts.append(rng.choice(vocab))
        parts.append(rng.choice(gaps))
    if rng.random() < 0.5:
        parts.pop()
    return "".join(parts)


def generate(seed: int) -> list[dict]:
    rng = random.Random(seed)
    fixed = [
        ("textstats.counting:word_count", ""),
        ("textstats.counting:word_count", "one"),
        ("textstats.counting:word_count", "one two three"),
        ("textstats.counting:word_count", "  leading and trailing  "),
        ("textstats.counting:word_count", "many     spaces"),
        ("textstats.counting:word_count", "tabs\tand\nnewlines"),
        ("textstats.counting:word_count", "\n\n\n"),
        ("textstats:word_count", "the package exports it  too"),
        ("textstats.counting:words", "a  b\tc\n"),
        ("textstats.counting:words", "   "),
        ("textstats.counting:average_word_length", ""),
        ("textstats.counting:average_word_length", "ab  abcd"),
        ("textstats.counting:average_word_length", "one\ntwo three\n"),
        ("textstats.counting:line_count", "a\nb\n"),
        ("textstats.counting:line_count", "no newline"),
        ("textstats.counting:line_count", ""),
    ]
    cases = [{"call": call, "args": [text], "expected": SOLVERS[call](text)} for call, text in fixed]
    calls = [
        "textstats.counting:word_count",
        "textstats.counting:words",
        "textstats.counting:average_word_length",
    ]
    for i in range(8):
        call = calls[i % len(calls)]
        text = random_text(rng)
        cases.append({"call": call, "args": [text], "expected": SOLVERS[call](text)})
    return cases


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    seed = json.loads((here / "metadata.json").read_text())["seed"]
    (here / "test_cases.json").write_text(json.dumps(generate(seed), indent=1) + "\n")
