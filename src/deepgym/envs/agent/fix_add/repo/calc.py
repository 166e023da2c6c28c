"""A small calculator."""


def add(a, b):
    return a - b


def mul(a, b):
    return a * b


def mean(xs):
    return sum(xs) / len(xs)
