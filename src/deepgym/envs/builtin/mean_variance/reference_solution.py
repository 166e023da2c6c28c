import math


def mean_variance(values: list[float]) -> list[float]:
    n = len(values)
    mean = math.fsum(values) / n
    variance = math.fsum((x - mean) ** 2 for x in values) / n
    return [mean, variance]
