def decode_ways(s: str) -> int:
    # ways_before_prev, ways_prev = decodings of s[:i-1] and s[:i]
    ways_before_prev, ways_prev = 0, 1
    for i, ch in enumerate(s):
        current = ways_prev if ch != "0" else 0
        if i > 0 and s[i - 1] != "0" and 10 <= int(s[i - 1 : i + 1]) <= 26:
            current += ways_before_prev
        ways_before_prev, ways_prev = ways_prev, current
    return ways_prev
