"""Argument checks shared by the whole package.

Every check raises `ValueError` with a message that names the argument and
ends with `Received: name=value`, the convention of Keras's own layers.
"""


def check_positive_int(name, value, allow_none=False):
    """Raises unless `value` is a positive integer (or `None` if allowed)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")


def check_non_negative_int(name, value):
    """Raises unless `value` is an integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer. Received: {name}={value!r}")


def check_non_negative(name, value):
    """Raises unless `value` is a real number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"`{name}` must be a non-negative number. Received: {name}={value!r}")


def check_rate(name, value):
    """Raises unless `value` is a probability in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")


def check_choice(name, value, choices):
    """Raises unless `value` is one of `choices`."""
    if value not in choices:
        accepted = ", ".join(repr(c) for c in choices)
        raise ValueError(f"`{name}` must be one of {accepted}. Received: {name}={value!r}")


def check_divisible(name, value, divisor_name, divisor):
    """Raises unless `value` is divisible by `divisor`."""
    if value % divisor:
        raise ValueError(
            f"`{name}` must be divisible by `{divisor_name}` "
            f"({divisor_name}={divisor}). Received: {name}={value}"
        )
