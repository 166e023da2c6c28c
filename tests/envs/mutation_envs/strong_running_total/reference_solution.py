def running_total(xs: list[int]) -> list[int]:
    total = 0
    out = []
    for x in xs:
        total += x
        out.append(total)
    return out
