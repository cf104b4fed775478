"""Output controls: rules every search applies to the next-token logits.

A search calls `controls.apply(logits, ids, step, limits, eos_id)` before
it normalizes the logits, so that its scores are log-probabilities under
the controlled distribution, and before the length limit's own rule (at a
sentence's limit only EOS may follow, whatever the controls say).
"""

import dataclasses

import tensorflow as tf

from keras_transformer_runtime.runners.settings import check_controls

NEG_INF = -1.0e9


@dataclasses.dataclass(frozen=True)
class OutputControls:
    """What a search may output, beyond the model's probabilities.

    Attributes:
        min_length: EOS is forbidden until a hypothesis has this many tokens
            (EOS not counted), unless its length limit comes first.
        no_repeat_ngram_size: `n > 0` forbids any token that would repeat
            an n-gram already in the hypothesis (0: off).
        repetition_penalty: `theta >= 1` makes every token already in the
            hypothesis less likely: its logit is divided by `theta` when
            positive, multiplied by it when negative (Keskar et al., 2019;
            1.0: off).

    Example:

    >>> controls = OutputControls(min_length=3, no_repeat_ngram_size=3)
    >>> ids, scores = greedy_search(step_fn, cache, 2, 20, controls=controls)
    """

    min_length: int = 0
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0

    def __post_init__(self):
        check_controls(self.min_length, self.no_repeat_ngram_size, self.repetition_penalty)

    @property
    def active(self):
        """Whether any control changes anything."""
        return self != OutputControls()

    def apply(self, logits, ids, step, limits, eos_id):
        """`logits` `(rows, vocab)` for the token after position `step` of
        `ids` `(rows, width)` (BOS at position 0, the hypothesis' tokens at
        1..step), with the controls applied; `limits` `(rows,)`."""
        if self.repetition_penalty != 1.0:
            seen = _tokens_seen(ids, step, tf.shape(logits)[-1])
            penalized = tf.where(
                logits > 0, logits / self.repetition_penalty, logits * self.repetition_penalty
            )
            logits = tf.where(seen, penalized, logits)
        if self.no_repeat_ngram_size:
            banned = _ngram_completions(ids, step, self.no_repeat_ngram_size, tf.shape(logits)[-1])
            logits = tf.where(banned, NEG_INF, logits)
        if self.min_length:
            too_short = tf.logical_and(step < self.min_length, step + 1 < limits)  # (rows,)
            is_eos = tf.equal(tf.range(tf.shape(logits)[-1]), eos_id)
            logits = tf.where(tf.logical_and(too_short[:, None], is_eos[None, :]), NEG_INF, logits)
        return logits


def token_marks(rows_tokens, valid, vocab):
    """`(rows, vocab)` booleans: where some valid `(row, position)` of
    `rows_tokens` `(rows, positions)` holds the token. Static shapes (a
    segment max, no scatter), so that it compiles under XLA."""
    rows = tf.shape(rows_tokens)[0]
    segments = tf.range(rows)[:, None] * vocab + rows_tokens
    marks = tf.math.unsorted_segment_max(tf.cast(valid, tf.int32), segments, rows * vocab)
    return tf.reshape(marks > 0, [rows, vocab])


def _tokens_seen(ids, step, vocab):
    """Which tokens `(rows, vocab)` are among positions 1..step of `ids`."""
    positions = tf.range(tf.shape(ids)[1])
    valid = tf.logical_and(positions >= 1, positions <= step)
    return token_marks(ids, tf.broadcast_to(valid[None, :], tf.shape(ids)), vocab)


def _ngram_completions(ids, step, n, vocab):
    """Which tokens `(rows, vocab)` would complete an n-gram already among
    positions 1..step of `ids`: the token after each earlier occurrence of
    the last `n - 1` tokens."""
    width = tf.shape(ids)[1]
    if n == 1:
        return _tokens_seen(ids, step, vocab)
    # Earlier n-grams start at j in 1 .. step - n + 1; their first n - 1
    # tokens must equal the last n - 1 (positions step - n + 2 .. step).
    starts = tf.range(width)
    matches = tf.logical_and(starts >= 1, starts + n - 1 <= step)[None, :]
    for i in range(n - 1):
        earlier = tf.gather(ids, tf.minimum(starts + i, width - 1), axis=1)
        last = tf.gather(ids, tf.maximum(step - n + 2 + i, 0), axis=1)[:, None]
        matches = tf.logical_and(matches, tf.equal(earlier, last))
    followers = tf.gather(ids, tf.minimum(starts + n - 1, width - 1), axis=1)
    return token_marks(followers, matches, vocab)
