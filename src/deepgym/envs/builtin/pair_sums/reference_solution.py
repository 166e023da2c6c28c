import sys


def main() -> None:
    data = sys.stdin.read().split()
    t = int(data[0]) if data else 0
    out = [str(int(data[1 + 2 * i]) + int(data[2 + 2 * i])) for i in range(t)]
    # Output is compared token by token: the trailing newline is not judged.
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))  # deepgym: equivalent-mutant branch


main()
