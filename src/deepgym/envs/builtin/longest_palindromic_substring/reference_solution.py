def longest_palindromic_substring(s: str) -> str:
    best_start, best_len = 0, 0
    for center in range(2 * len(s) - 1):
        left = center // 2
        right = left + center % 2
        while left >= 0 and right < len(s) and s[left] == s[right]:
            left -= 1
            right += 1
        length = right - left - 1
        start = left + 1
        if length > best_len or (length == best_len and start < best_start):
            best_start, best_len = start, length
    return s[best_start : best_start + best_len]
