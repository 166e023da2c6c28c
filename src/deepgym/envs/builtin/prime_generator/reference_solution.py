from collections.abc import Iterator
from itertools import count


def primes() -> Iterator[int]:
    # Incremental sieve: map each upcoming composite to the primes that hit it.
    upcoming: dict[int, list[int]] = {}
    for candidate in count(2):
        factors = upcoming.pop(candidate, None)
        if factors is None:
            yield candidate
            upcoming[candidate * candidate] = [candidate]
        else:
            for p in factors:
                upcoming.setdefault(candidate + p, []).append(p)
