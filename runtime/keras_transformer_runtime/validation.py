"""Argument checks shared by the whole package, public so that every
module (and a user's own code) may use them.

Each check takes the arguments by keyword, `check_rate(dropout=dropout)`,
and raises `ValueError` with a message that names the first bad argument
and ends with `Received: name=value`, the convention of Keras's own layers.
"""


def check_positive_int(allow_none=False, **values):
    """Raises unless every value is a positive integer (or `None` if allowed)."""
    for name, value in values.items():
        if value is None and allow_none:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")


def check_non_negative_int(**values):
    """Raises unless every value is an integer >= 0."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            message = f"`{name}` must be a non-negative integer. Received: {name}={value!r}"
            raise ValueError(message)


def check_non_negative(**values):
    """Raises unless every value is a real number >= 0."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            message = f"`{name}` must be a non-negative number. Received: {name}={value!r}"
            raise ValueError(message)


def check_rate(**values):
    """Raises unless every value is a probability in [0, 1)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"`{name}` must be a float in [0, 1). Received: {name}={value!r}")
        if not 0.0 <= value < 1.0:
            raise ValueError(f"`{name}` must be in [0, 1). Received: {name}={value!r}")


def check_choice(choices, **values):
    """Raises unless every value is one of `choices`."""
    for name, value in values.items():
        if value not in choices:
            accepted = ", ".join(repr(c) for c in choices)
            message = f"`{name}` must be one of {accepted}. Received: {name}={value!r}"
            raise ValueError(message)


def check_index(count, what, **values):
    """Raises unless every value is an integer index into `count` items
    (`what`, e.g. "decoder layers"), negative ones counting from the end."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or not -count <= value < count:
            raise ValueError(
                f"`{name}` must index one of the {count} {what} ({-count} to {count - 1}). "
                f"Received: {name}={value!r}"
            )


def check_divisible(name, value, divisor_name, divisor):
    """Raises unless `value` is divisible by `divisor`."""
    if value % divisor:
        raise ValueError(
            f"`{name}` must be divisible by `{divisor_name}` "
            f"({divisor_name}={divisor}). Received: {name}={value}"
        )


def check_known(kind, names, **values):
    """Raises unless every name in `values` is one of `names`, the `kind`
    settings (e.g. `"decoding"`); the message lists them."""
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(
            f"Unknown {kind} setting(s) {unknown}; the settings are {', '.join(names)}. "
            f"Received: {unknown[0]}={values[unknown[0]]!r}"
        )
