import heapq
import sys


def main() -> None:
    data = sys.stdin.read().split()
    n = int(data[0]) if data else 0
    low: list[int] = []  # max-heap (negated) holding the smaller half, incl. the median
    high: list[int] = []  # min-heap holding the larger half
    out = []
    for token in data[1 : 1 + n]:
        value = int(token)
        if low and value > -low[0]:
            heapq.heappush(high, value)
        else:
            heapq.heappush(low, -value)
        if len(low) > len(high) + 1:
            heapq.heappush(high, -heapq.heappop(low))
        elif len(high) > len(low):
            heapq.heappush(low, -heapq.heappop(high))
        out.append(str(-low[0]))
    sys.stdout.write(" ".join(out) + "\n")


main()
