"""Boolean attention masks: `True` means "may attend", `False` means "hidden".

All masks here are boolean tensors built with `keras.ops`, so they work in
eager code, inside `tf.function` and under XLA.
"""

from keras import ops


def padding_mask(token_ids, pad_id=0):
    """Marks the real (non-pad) tokens of a batch of ids.

    Args:
        token_ids: integer tensor `(batch, seq_len)`.
        pad_id: the id used for padding.

    Returns:
        Boolean tensor `(batch, seq_len)`, `True` at real tokens.

    Example:

    >>> padding_mask([[5, 7, 0, 0]]).numpy().tolist()
    [[True, True, False, False]]
    """
    return ops.not_equal(token_ids, pad_id)


def causal_mask(query_length, key_length, offset=0):
    """Lets query position `i` see key positions `j <= i + offset`.

    `offset` is the absolute position of the first query, which is how a
    decoder that feeds one token at a time into a key/value cache of length
    `key_length` hides the cache slots it has not written yet.

    Args:
        query_length: number of query positions (int or scalar tensor).
        key_length: number of key positions (int or scalar tensor).
        offset: position of the first query among the keys.

    Returns:
        Boolean tensor `(query_length, key_length)`.

    Example:

    >>> causal_mask(2, 3).numpy().astype(int).tolist()
    [[1, 0, 0], [1, 1, 0]]
    """
    rows = ops.expand_dims(ops.arange(query_length) + offset, -1)
    cols = ops.expand_dims(ops.arange(key_length), 0)
    return ops.greater_equal(rows, cols)


def merge_masks(*masks):
    """Logical AND of broadcastable boolean masks; `None` entries are skipped.

    Returns `None` when every mask is `None`.
    """
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged
