"""Deliberately weak: checks only that ``sort_list`` returns a list (the type, not the order)."""

LISTS = ([3, 1, 2], [5, 4], [])


def verify(solution, test_cases):
    ok = all(isinstance(solution.sort_list(list(xs)), list) for xs in LISTS)
    return 1.0 if ok else 0.0
