def integer_sqrt(n: int) -> int:
    if n < 2:
        return n
    # Newton's method on integers, starting above the root.
    x = 1 << ((n.bit_length() + 1) // 2)
    while True:
        y = (x + n // x) // 2
        if y >= x:
            return x
        x = y
