"""Takes values from fresh primes() generators and compares them with the cases."""

from itertools import islice


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _run_case(solution, case):
    (k,) = case["args"]
    values = list(islice(solution.primes(), k))
    return all(_is_int(v) for v in values) and values == case["expected"]


def _independent(solution):
    # Two generators must not share state: advancing one leaves the other at 2.
    first = solution.primes()
    taken = [next(first) for _ in range(5)]
    second = solution.primes()
    return next(second) == 2 and taken == [2, 3, 5, 7, 11] and next(first) == 13


def verify(solution, test_cases):
    cases = []
    for index, case in enumerate(test_cases):
        try:
            passed = _run_case(solution, case)
        except Exception:
            passed = False
        cases.append({"name": f"test_{index}", "passed": bool(passed)})
    try:
        passed = _independent(solution)
    except Exception:
        passed = False
    cases.append({"name": "independent_generators", "passed": bool(passed)})
    score = sum(c["passed"] for c in cases) / len(cases)
    return {"score": score, "cases": cases}
