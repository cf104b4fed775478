"""The fixed-shape caches of decoding: writing into them, and checking
what a caller passes for one."""

from keras import ops

from keras_transformer.layers._graph_kernels import strided_write
from keras_transformer.layers._graph_kernels import uses_graph_kernels


def write_at(buffer, update, index):
    """`buffer` `(batch, heads, length, depth)` with `update` `(batch, heads,
    steps, depth)` written at positions `index .. index + steps - 1` (all
    inside the buffer).

    A select against the positions (one step, the usual case, is broadcast
    along them; several are gathered); in a TensorFlow graph outside XLA,
    the strided write of `_graph_kernels`, which writes in place where it
    can. Not `ops.slice_update`: on TensorFlow that lowers to
    `XlaDynamicUpdateSlice`, which stock TF Serving cannot run on a CPU.
    """
    if uses_graph_kernels(buffer.dtype):
        return strided_write(buffer, update, index)
    length, steps = ops.shape(buffer)[2], ops.shape(update)[2]
    offsets = ops.arange(length) - index  # position p takes update[p - index]
    written = ops.logical_and(offsets >= 0, offsets < steps)
    if update.shape[2] != 1:
        update = ops.take(update, ops.clip(offsets, 0, steps - 1), axis=2)
    return ops.where(written[None, None, :, None], update, buffer)


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
