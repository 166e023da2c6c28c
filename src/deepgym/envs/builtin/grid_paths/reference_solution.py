import sys

MOD = 1_000_000_007


def main() -> None:
    data = sys.stdin.read().split()
    rows, cols = int(data[0]), int(data[1])
    grid = data[2 : 2 + rows]
    ways = [0] * cols
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "#":
                ways[c] = 0
            elif r == 0 and c == 0:
                ways[c] = 1
            elif c > 0:
                ways[c] = (ways[c] + ways[c - 1]) % MOD
    print(ways[cols - 1])


main()
