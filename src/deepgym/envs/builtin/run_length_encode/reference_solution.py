from itertools import groupby


def run_length_encode(s: str) -> str:
    return "".join(f"{len(list(run))}{letter}" for letter, run in groupby(s))
