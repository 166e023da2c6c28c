"""A one-line report of several shapes' areas."""

from shapes.area import calc_area


def report(shapes):
    total = sum(calc_area(kind, size) for kind, size in shapes)
    return f"{len(shapes)} shapes, total area {total:.2f}"
