"""Checks on the numbers a benchmark prints, whatever their rounding."""


def printed(cell):
    """The interval of values that print as `cell` (speeds print to 0.1,
    ratios and seconds to 0.01): 15.7 is anything from 15.65 to 15.75."""
    half = 0.5 * 10 ** -len(cell.partition(".")[2])
    return float(cell) - half, float(cell) + half


def quotient(numerator, denominator):
    """The interval a quotient of two intervals of positive numbers spans."""
    return numerator[0] / denominator[1], numerator[1] / denominator[0]


def overlap(a, b, slack=1e-9):
    """Whether two intervals share a value (up to float rounding)."""
    return a[0] <= b[1] + slack and b[0] <= a[1] + slack
