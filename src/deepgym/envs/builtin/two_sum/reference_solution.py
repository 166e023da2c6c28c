def two_sum(nums: list[int], target: int) -> list[int]:
    first_index: dict[int, int] = {}
    for j, value in enumerate(nums):
        want = target - value
        if want in first_index:
            return [first_index[want], j]
        first_index.setdefault(value, j)
    # Unreachable: the task guarantees exactly one pair.
    return []  # deepgym: equivalent-mutant statement return
