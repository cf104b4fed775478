"""Small helpers shared by the layers."""

import zlib

import keras
from keras import ops


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


def size(x, axis):
    """The size of `x` along `axis`: a Python int where the shape knows it
    (so that reshapes and ranges built from it need no shape ops in a
    graph), else a scalar tensor."""
    static = x.shape[axis]
    return static if static is not None else ops.shape(x)[axis]


def on_last_axis(layer, x):
    """`layer` (a `Dense`, or any map of `(n, features)` to `(n, units)`)
    applied to the last axis of `x` `(..., features)` as one 2D product,
    the leading axes restored from their static sizes where known.

    Keras's `Dense` multiplies an input of rank 3 or more through
    `tensordot`, about a dozen shape ops around its one matrix product;
    in a decoding step, where the products are small, they cost more than
    the arithmetic.

    Example:

    >>> on_last_axis(keras.layers.Dense(8), keras.ops.ones((2, 3, 4))).shape
    TensorShape([2, 3, 8])
    """
    if len(x.shape) == 2:
        return layer(x)
    leading = [size(x, axis) for axis in range(len(x.shape) - 1)]
    unknown = [axis for axis, d in enumerate(x.shape[:-1]) if d is None]
    if unknown:  # one unknown size can be left to the reshape
        leading[unknown[0]] = -1
    y = layer(ops.reshape(x, (-1, size(x, -1))))
    return ops.reshape(y, (*leading, y.shape[-1]))


def leading_axes(x, count):
    """`x` with `count` axes of size 1 in front, by `ExpandDims`, which every
    runtime converts (indexing with `None` is a `StridedSlice` that
    LiteRT's builtin operators do not take for booleans).

    Example:

    >>> leading_axes(keras.ops.ones((3, 4)), 2).shape
    TensorShape([1, 1, 3, 4])
    """
    for _ in range(count):
        x = ops.expand_dims(x, 0)
    return x
