"""Small helpers shared by the layers."""

import zlib

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that seeded initializers used for
    several sublayers do not give them all the same values."""
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    return initializer.__class__.from_config(initializer.get_config())


def sublayer_seed(seed, name):
    """The seed of the sublayer `name` of a layer seeded with `seed`.

    `None` stays `None` (Keras then draws a seed from the global random
    state). Otherwise every sublayer gets its own seed, derived from the
    layer's seed and the sublayer's name, so that two dropouts of the same
    shape never draw the same mask and a run is reproducible from one seed.

    Example:

    >>> sublayer_seed(7, "attention_dropout") != sublayer_seed(7, "inner_dropout")
    True
    """
    if seed is None:
        return None
    return (seed * 1_000_003 + zlib.crc32(name.encode("utf-8"))) % 2**31


def require_built(layer, method):
    """Raises a `ValueError` if `layer` has no weights yet: `method`, unlike
    `call`, cannot build it from its inputs."""
    if not layer.built:
        raise ValueError(
            f"Layer {layer.name} has no weights yet: call it once or `build` it before "
            f"`{method}`. Received: an unbuilt layer"
        )
