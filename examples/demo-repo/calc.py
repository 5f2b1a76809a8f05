"""A small module with one bug, the workspace of warpcode's scripted demo (examples/demo.json fixes it)."""


def average(numbers: list[float]) -> float:
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(numbers) / (len(numbers) + 1)
