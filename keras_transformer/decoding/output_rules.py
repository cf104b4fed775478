"""What a search may output at a step, whatever the model says: a
sentence's forced prefix, only EOS at its length limit, and never the
padding or BOS ids.

The rules apply to the choice of tokens, after the log normalizer is
taken: a search's scores stay the model's own log-probabilities."""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from keras_transformer.decoding.controls import NEG_INF


class OnlyToken(NamedTuple):
    """Per sentence, at most one allowed token: where `where` `(batch,)`,
    every logit but `token`'s `(batch,)` counts as `NEG_INF`, and
    `token`'s own as `value` `(batch, beams)` (at least `NEG_INF`)."""

    where: tf.Tensor
    token: tf.Tensor
    value: tf.Tensor


def only_token(logits, step, limits, eos_id, forced, forced_token):
    """What `only_eos_at_limit` and then `only_forced` would do to
    `logits` `(batch, beams, vocab)`, as an `OnlyToken`: at the limit only
    EOS keeps its logit; inside a prefix only the forced token does, and
    only if it is also allowed at the limit."""
    at_limit = tf.equal(step + 1, limits)
    eos = tf.fill(tf.shape(at_limit), eos_id)
    if forced is None:
        where, token, clash = at_limit, eos, tf.zeros_like(at_limit)
    else:
        where = tf.logical_or(at_limit, forced)
        token = tf.where(forced, forced_token, eos)
        clash = tf.logical_and(tf.logical_and(at_limit, forced), tf.not_equal(forced_token, eos))
    # A logit below NEG_INF counts as NEG_INF: then the token's chunk
    # maximum is its value, whatever else the chunk holds.
    value = tf.maximum(tf.gather(logits, token, axis=2, batch_dims=1), NEG_INF)  # (batch, beams)
    return OnlyToken(where, token, tf.where(clash[:, None], NEG_INF, value))


def masked(logits, only):
    """`logits` `(batch, beams, vocab)` with `only` applied in full."""
    vocab = tf.range(tf.shape(logits)[-1])
    other = tf.logical_and(only.where[:, None], tf.not_equal(vocab, only.token[:, None]))
    logits = tf.where(other[:, None, :], NEG_INF, logits)
    is_token = tf.logical_and(only.where[:, None], tf.equal(vocab, only.token[:, None]))
    return tf.where(is_token[:, None, :], only.value[:, :, None], logits)


def with_prefix(prefix, limits, batch_size, max_length, pad_id):
    """`(prefix, limits)`: the prefix `(batch, width >= 1)` with at most
    `max_length - 1` tokens, and the limits raised to leave room for EOS
    after it. Without a prefix (`None`) it stays `None`, so that the
    searches skip forcing altogether (a pass over every logit each step),
    and every limit is at least 1."""
    if prefix is None:
        return None, tf.maximum(limits, tf.minimum(1, max_length))
    prefix = tf.convert_to_tensor(prefix, tf.int32)
    prefix = tf.concat([prefix, tf.fill([batch_size, 1], pad_id)], axis=1)
    prefix = prefix[:, : tf.maximum(tf.convert_to_tensor(max_length) - 1, 1)]
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(prefix, pad_id), tf.int32), axis=1)
    return tf.where(tf.not_equal(prefix, pad_id), prefix, -1), tf.maximum(
        limits, tf.minimum(lengths + 1, max_length)
    )


def forced_tokens(prefix, step):
    """`(forced, token)` `(batch,)`: whether `step`'s token is the prefix's,
    and which (prefix positions past a sentence's prefix hold -1); `(None,
    None)` without a prefix."""
    if prefix is None:
        return None, None
    width = tf.shape(prefix)[1]
    token = tf.gather(prefix, tf.minimum(step, width - 1), axis=1)
    return tf.logical_and(step < width, token >= 0), token


def only_forced(logits, forced, token):
    """Where a sentence is `forced` `(batch,)`, every logit but `token`'s
    becomes `NEG_INF`; `logits` is `(batch, ..., vocab)`. Without a
    prefix (`forced` is `None`) the logits are returned as they are."""
    if forced is None:
        return logits
    shape = [-1] + [1] * (logits.shape.rank - 1)
    other = tf.not_equal(tf.range(tf.shape(logits)[-1]), tf.reshape(token, shape))
    return tf.where(tf.logical_and(tf.reshape(forced, shape), other), NEG_INF, logits)


def outside_prefix(forced, controlled, logits):
    """The `controlled` logits `(rows, vocab)`, except on rows being
    `forced` `(rows,)` through a prefix (or `None`), which keep `logits`:
    output controls do not apply inside a prefix."""
    if forced is None:
        return controlled
    return tf.where(forced[:, None], logits, controlled)


def only_eos_at_limit(logits, step, limits, eos_id):
    """Where a sentence reaches its limit at this step, allow only EOS: every
    other token's logit becomes `NEG_INF`.

    `logits` is `(batch, ..., vocab)`; `limits` is `(batch,)`.
    """
    at_limit = tf.equal(step + 1, limits)  # this token is the last allowed
    at_limit = tf.reshape(at_limit, [-1] + [1] * (logits.shape.rank - 1))
    is_eos = vocabulary_mask(logits, (eos_id,))
    return tf.where(tf.logical_and(at_limit, tf.logical_not(is_eos)), NEG_INF, logits)


def vocabulary_mask(logits, ids):
    """`(vocab,)` booleans, true at the token `ids` (Python ints), for
    `logits` `(..., vocab)`: a constant where the vocabulary size is static,
    so that a decoding step does not rebuild it (three ops over the whole
    vocabulary, every step, in a graph without XLA)."""
    vocab_size = logits.shape[-1]
    if vocab_size is not None and all(isinstance(i, (int, np.integer)) for i in ids):
        return tf.constant(np.isin(np.arange(vocab_size), ids))
    vocab = tf.range(tf.shape(logits)[-1])
    return tf.reduce_any(tf.equal(vocab[:, None], tf.constant(ids, tf.int32)[None, :]), -1)


def never_chosen(logits, ids):
    """`logits` `(..., vocab)` with the tokens `ids` (Python ints: the
    padding and BOS ids, which are no output tokens) at `NEG_INF`, so that
    no search chooses them; `()` leaves the logits as they are."""
    if not ids:
        return logits
    hidden = vocabulary_mask(logits, tuple(ids))
    return tf.where(hidden, tf.constant(NEG_INF, logits.dtype), logits)
