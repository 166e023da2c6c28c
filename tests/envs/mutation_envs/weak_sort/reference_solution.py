def sort_list(xs: list[int]) -> list[int]:
    out: list[int] = []
    for x in xs:
        i = 0
        while i < len(out) and out[i] <= x:
            i += 1
        out.insert(i, x)
    return out
