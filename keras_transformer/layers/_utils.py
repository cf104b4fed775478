"""Small helpers shared by the layers."""

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that seeded initializers used for
    several sublayers do not give them all the same values."""
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())
