from bisect import bisect_left


def longest_increasing_subsequence(nums: list[int]) -> int:
    # tails[k] is the smallest possible last value of an increasing run of length k + 1.
    tails: list[int] = []
    for value in nums:
        pos = bisect_left(tails, value)
        if pos == len(tails):
            tails.append(value)
        else:
            tails[pos] = value
    return len(tails)
