"""Phrases as the searches take them: per sentence an int32 tensor
`(phrases, length)` (a batch of them `(batch, phrases, length)`), each
phrase's ids right-aligned and padded on the left with `NO_TOKEN` (a row of
`NO_TOKEN` is no phrase); `right_aligned` builds one from lists. Terminology
constraints (`terminology`, `ConstrainedBeamSearch`) are read in this
layout; `follows` tells where a hypothesis ends with all of a phrase but its
last token."""

import numpy as np
import tensorflow as tf

NO_TOKEN = -1
BEFORE_OUTPUT = NO_TOKEN - 1  # what positions before the first token read as


def right_aligned(phrases, length=None):
    """`phrases` (per sentence, a list of phrases, each a list of ids) as
    the int32 array `(batch, most phrases, longest phrase)` the searches
    take, or at least `length` wide.

    Example:

    >>> right_aligned([[[5, 6], [7]], []])[0]
    array([[ 5,  6],
           [-1,  7]], dtype=int32)
    """
    count = max((len(p) for p in phrases), default=0)
    width = max([length or 1] + [len(phrase) for p in phrases for phrase in p])
    aligned = np.full((len(phrases), max(count, 1), width), NO_TOKEN, np.int32)
    for i, sentence in enumerate(phrases):
        for j, phrase in enumerate(sentence):
            check_ids(phrase, i)
            if phrase:
                aligned[i, j, width - len(phrase) :] = phrase
    return aligned


def check_ids(phrase, sentence):
    """Raises a `ValueError` unless `phrase` (a list of ids of sentence
    number `sentence`) holds no negative id."""
    if any(int(token) < 0 for token in phrase):
        raise ValueError(
            f"A phrase holds ids, none negative. Received: phrase {list(phrase)} "
            f"of sentence {sentence}"
        )


def tokens_at(ids, positions, step):
    """`ids` `(..., width)` at `positions` (any shape of ints), positions
    before the first token (< 1) or after `step` read as `BEFORE_OUTPUT`."""
    width = tf.shape(ids)[-1]
    taken = tf.gather(ids, tf.clip_by_value(positions, 0, width - 1), axis=-1)
    inside = tf.logical_and(positions >= 1, positions <= step)
    return tf.where(inside, taken, BEFORE_OUTPUT)


def follows(phrases, ids, step):
    """Whether each hypothesis `ids` `(..., width)` (BOS at position 0, its
    tokens at 1..step) ends with all of each phrase but its last token:
    `(..., phrases)` booleans for `phrases` `(..., phrases, length)` (the
    leading axes broadcast)."""
    length = tf.shape(phrases)[-1]
    recent = tokens_at(ids, step - length + 2 + tf.range(length - 1), step)  # last length - 1
    before = phrases[..., :-1]
    return tf.reduce_all(
        tf.logical_or(tf.equal(before, NO_TOKEN), tf.equal(before, recent[..., None, :])), axis=-1
    )
