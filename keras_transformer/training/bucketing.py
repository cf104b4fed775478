"""Length buckets for `make_batches`: frames `(source, target_in,
target_out, *more)` in (more: a pair's word links, `word_links`), padded
batches out, three ways; each part is padded with its own value of
`padding_values`.

- `batch_by_longer_side`: buckets of the longer side's length, each batch
  padded to its own longest sequence;
- `batch_by_each_side`: a bucket per (source bucket, target bucket), each
  batch padded to its own longest on each side;
- `batch_to_static_shapes`: the buckets of a `BatchShapes`, each batch
  padded to its bucket's length and batch size (a part-filled last batch
  gets rows of padding), so that XLA compiles one step per bucket.
"""

import math

import tensorflow as tf


def bucket_boundaries(max_length, min_length=8, growth=1.1):
    """Length-bucket edges growing geometrically by `growth` from
    `min_length`, ending past `max_length` (tensor2tensor's scheme: a
    batch's padding stays within `growth - 1` of its longest sequence).

    Example:

    >>> bucket_boundaries(16, growth=1.1)
    [8, 9, 10, 11, 13, 15, 17]
    """
    if not growth > 1:
        raise ValueError(f"`growth` must be greater than 1. Received: growth={growth!r}")
    boundaries = []
    edge = min_length
    while edge <= max_length:
        boundaries.append(edge)
        edge = max(edge + 1, int(math.ceil(edge * growth)))
    boundaries.append(max_length + 1)
    return boundaries


def _longer_side(source, target_in, *_):
    return tf.maximum(tf.size(source), tf.size(target_in))


def batch_by_longer_side(frames, boundaries, batch_tokens, padding_values):
    """Batches frames in buckets of their longer side, each batch padded
    to its longest."""
    # Bucket i holds lengths < boundaries[i]; the extra last bucket is empty.
    batch_sizes = [max(1, batch_tokens // (edge - 1)) for edge in boundaries] + [1]
    return frames.bucket_by_sequence_length(
        element_length_func=_longer_side,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=batch_sizes,
        padding_values=padding_values,
    )


def batch_by_each_side(frames, boundaries, batch_tokens, padding_values):
    """Batches frames in a bucket per (source bucket, target bucket), each
    padded to its batch's longest."""
    # Bucket i holds lengths in [boundaries[i - 1], boundaries[i]).
    longest = [edge - 1 for edge in boundaries]
    count = len(boundaries)
    batch_sizes = tf.constant(
        [max(1, batch_tokens // max(s, t)) for t in longest for s in longest], tf.int64
    )
    edges = tf.constant(boundaries, tf.int32)

    def bucket(sequence):
        return tf.reduce_sum(tf.cast(tf.size(sequence) >= edges, tf.int64))

    def key(source, target_in, *_):
        return bucket(target_in) * count + bucket(source)

    def batch(key, frames):
        return frames.padded_batch(
            tf.gather(batch_sizes, key),
            padded_shapes=([None],) * len(padding_values),
            padding_values=padding_values,
        )

    return frames.group_by_window(
        key_func=key, reduce_func=batch, window_size_func=lambda key: tf.gather(batch_sizes, key)
    )


def batch_to_static_shapes(frames, shapes, padding_values):
    """Batches frames in the buckets of `shapes` (a `BatchShapes`): a frame
    goes to the first bucket whose length holds its longer side; every
    batch is `(batch_size, length)` of its bucket on each side."""
    lengths = tf.constant(shapes.lengths, tf.int64)
    batch_sizes = tf.constant(shapes.batch_sizes, tf.int64)

    def key(*frame):
        longer = tf.cast(tf.reshape(_longer_side(*frame), [1]), tf.int64)
        return tf.searchsorted(lengths, longer, side="left", out_type=tf.int64)[0]

    def batch(key, frames):
        length, size = tf.gather(lengths, key), tf.gather(batch_sizes, key)

        def fill(*batch):  # a part-filled batch gets rows of padding
            rows = size - tf.shape(batch[0], out_type=tf.int64)[0]
            return tuple(
                tf.pad(x, [[0, rows], [0, 0]], constant_values=value)
                for x, value in zip(batch, padding_values, strict=True)
            )

        padded = frames.padded_batch(
            size,
            padded_shapes=(tf.reshape(length, [1]),) * len(padding_values),
            padding_values=padding_values,
        )
        return padded.map(fill)

    return frames.group_by_window(
        key_func=key, reduce_func=batch, window_size_func=lambda key: tf.gather(batch_sizes, key)
    )
