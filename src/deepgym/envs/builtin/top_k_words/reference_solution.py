import re
import sys
from collections import Counter


def main() -> None:
    first, _, text = sys.stdin.read().partition("\n")
    k = int(first)
    counts = Counter(word.lower() for word in re.findall(r"[A-Za-z]+", text))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]
    sys.stdout.write("".join(f"{word} {count}\n" for word, count in ranked))


main()
