"""Replays each case's operations against the answer's MinStack class."""


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _run_case(solution, case):
    (operations,) = case["args"]
    stack = solution.MinStack()
    results = []
    for op in operations:
        if op[0] == "push":
            stack.push(op[1])
            continue
        if op[0] == "pop":
            value = stack.pop()
        elif op[0] == "top":
            value = stack.top()
        else:
            value = stack.get_min()
        if not _is_int(value):
            return False
        results.append(value)
    return results == case["expected"]


def verify(solution, test_cases):
    cases = []
    for index, case in enumerate(test_cases):
        try:
            passed = _run_case(solution, case)
        except Exception:
            passed = False
        cases.append({"name": f"test_{index}", "passed": bool(passed)})
    score = sum(c["passed"] for c in cases) / len(cases) if cases else 0.0
    return {"score": score, "cases": cases}
