"""`searched_in_chunks`: a search over many rows run at most `max_rows`
rows at a time inside one graph, so that a request whose texts split
into thousands of sentences costs the memory of `max_rows` rows, not of
all of them (`TranslatorGraph(max_rows=)`; the SavedModel export bounds
its searches by its `max_batch_size`)."""

import numpy as np
import tensorflow as tf

# The most rows a `TranslatorGraph` searches at once unless told otherwise;
# the SavedModel export's default `max_batch_size`, so that a default export
# samples a request as the translator's own graph does.
DEFAULT_MAX_ROWS = 256

# Each chunk after the first samples with its own seed (`chunk_seed`), its
# index times this odd 36-bit constant XORed in (no int64 overflow below
# 2**27 chunks), so that the chunks of one request never share a stream.
_SEED_STEP = 0x9E3779B97


def chunk_seed(seed, chunk):
    """The sampling seed of chunk `chunk` (int64 scalars) of a search
    seeded with `seed`: `seed` itself for the first chunk, so that a
    request of at most `max_rows` rows samples as an unchunked search."""
    return tf.bitwise.bitwise_xor(seed, tf.cast(chunk, tf.int64) * _SEED_STEP)


def _trimmed(source, pad_id):
    """`source` ids `(rows, length)` without the padding columns no row
    uses (a chunk of short sentences is not encoded at the longest
    sentence's length), at least one column."""
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, pad_id), tf.int32), axis=1)
    return source[:, : tf.reduce_max(tf.concat([lengths, [1]], 0))]


def searched_in_chunks(search, source, seed, per_row=(), *, max_rows, width, pad_id):
    """`search`'s outputs for all rows of `source`, searched at most
    `max_rows` rows at a time in a `tf.while_loop`.

    Args:
        search: `search(source, seed, *per_row)` -> `(ids (rows, n,
            length) int32, scores (rows, n) float32)`, given the chunk's
            rows of `source`, its seed (`chunk_seed`) and its rows of each
            tensor of `per_row`.
        source: int32 source ids `(rows, length)`, padded with `pad_id`.
        seed: the int64 scalar seed of the whole search (read by sampling).
        per_row: tensors whose first axis is `source`'s rows (a prefix per
            sentence), sliced with it.
        max_rows: the most rows one search may take; None: all at once.
        width: the most output tokens a search may return (the decoding
            settings' `max_output_length`): chunks are padded to it, and
            the result trimmed to the widest chunk's length, as one search
            of all rows returns it.
        pad_id: the padding id of sources and outputs.

    Returns:
        `(ids (rows, n, length), scores (rows, n))`, in `source`'s order.

    Example:

    >>> ids, scores = searched_in_chunks(
    ...     lambda rows, seed: search.search_ids(rows, 1), source, seed=0,
    ...     max_rows=256, width=256, pad_id=0)
    """
    seed = tf.cast(seed, tf.int64)
    if max_rows is None:
        return search(source, seed, *per_row)
    rows = tf.shape(source)[0]
    # One search even of no rows: it returns the empty outputs' shapes.
    chunks = tf.maximum((rows + max_rows - 1) // max_rows, 1)

    def searched(chunk, widest, ids, scores):
        start = chunk * max_rows
        chunk_ids, chunk_scores = search(
            _trimmed(source[start : start + max_rows], pad_id),
            chunk_seed(seed, chunk),
            *(tensor[start : start + max_rows] for tensor in per_row),
        )
        length = tf.shape(chunk_ids)[2]
        padded = tf.pad(chunk_ids, [[0, 0], [0, 0], [0, width - length]], constant_values=pad_id)
        return (
            chunk + 1,
            tf.maximum(widest, length),
            ids.write(chunk, padded),
            scores.write(chunk, chunk_scores),
        )

    _, widest, ids, scores = tf.while_loop(
        lambda chunk, *_: chunk < chunks,
        searched,
        (
            tf.constant(0),
            tf.constant(0),
            tf.TensorArray(
                tf.int32, size=chunks, infer_shape=False, element_shape=[None, None, width]
            ),
            tf.TensorArray(tf.float32, size=chunks, infer_shape=False, element_shape=[None, None]),
        ),
    )
    return ids.concat()[:, :, :widest], scores.concat()


def drawn_seed(sequence):
    """A graph seed (an int64 scalar) from a NumPy `SeedSequence`."""
    return tf.constant(int(sequence.generate_state(1, np.uint64)[0]) >> 2, tf.int64)
