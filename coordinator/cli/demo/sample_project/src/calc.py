"""A tiny calculator used by specrun's demo."""


def add(a, b):
    return a - b


def multiply(a, b):
    return a * b
