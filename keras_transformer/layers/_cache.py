"""The fixed-shape caches of decoding: writing into them, and checking
what a caller passes for one."""

from keras import ops

from keras_transformer import _backend
from keras_transformer.layers._utils import size


def write_at(buffer, update, index):
    """`buffer` `(batch, heads, length, depth)` with `update` `(batch, heads,
    steps, depth)` written at positions `index .. index + steps - 1` (all
    inside the buffer).

    In a TensorFlow graph a `TensorStridedSliceUpdate` over a `(batch *
    heads, length * depth)` view of the buffer: a stock op (not
    `XlaDynamicUpdateSlice`, which runs only where TensorFlow's XLA JIT is
    linked and enabled, as stock TF Serving on a CPU does not), which
    writes into the buffer itself when nothing else holds it (the buffer a
    beam search has just reordered, a loop's own state) and into a copy
    otherwise. Elsewhere, and under XLA (which needs the slice's bounds at
    compile time), a select against the positions: one step (the usual
    case) is broadcast along the positions; several are gathered.
    """
    if _backend.is_tensorflow() and not _backend.compiling_with_xla():
        return _strided_write(buffer, update, index)
    length, steps = ops.shape(buffer)[2], ops.shape(update)[2]
    offsets = ops.arange(length) - index  # position p takes update[p - index]
    written = ops.logical_and(offsets >= 0, offsets < steps)
    if update.shape[2] != 1:
        update = ops.take(update, ops.clip(offsets, 0, steps - 1), axis=2)
    return ops.where(written[None, None, :, None], update, buffer)


def _strided_write(buffer, update, index):
    import tensorflow as tf

    batch, heads, length, depth = (size(buffer, axis) for axis in range(4))
    steps = size(update, 2)
    begin = tf.stack([0, index * depth])
    written = tf.raw_ops.TensorStridedSliceUpdate(
        input=tf.reshape(buffer, [-1, length * depth]),  # (batch * heads, positions)
        begin=begin,
        end=begin + tf.stack([0, steps * depth]),
        strides=[1, 1],
        value=tf.reshape(update, [-1, steps * depth]),
        begin_mask=1,  # every row
        end_mask=1,
    )
    return tf.reshape(written, [batch, heads, length, depth])


def check_cache_keys(cache, argument, keys):
    """Raises a `ValueError` naming `argument` unless `cache` is a dict
    with every one of `keys` (a decoding cache passed in the wrong shape)."""
    missing = [k for k in keys if not isinstance(cache, dict) or k not in cache]
    if missing:
        received = sorted(cache) if isinstance(cache, dict) else type(cache).__name__
        raise ValueError(
            f"`{argument}` must be a dict with the keys {list(keys)} (missing {missing}). "
            f"Received: {argument} with {received}"
        )
