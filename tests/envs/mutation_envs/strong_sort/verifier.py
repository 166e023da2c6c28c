"""Compares ``sort_list`` with ``sorted`` on lists with duplicates, negatives and none."""

LISTS = ([3, 1, 2], [5, 4], [], [7], [2, 2, 1], [-1, 5, -3, 0], [9, 8, 7, 6, 5, 4], [1, 2, 3])


def verify(solution, test_cases):
    cases = []
    for i, xs in enumerate(LISTS):
        try:
            ok = solution.sort_list(list(xs)) == sorted(xs)
        except Exception:
            ok = False
        cases.append({"name": f"test_{i}", "passed": ok})
    good = sum(c["passed"] for c in cases)
    return {"score": good / len(cases), "passed": good == len(cases), "cases": cases}
