"""The best extensions of a beam search's hypotheses: a top-k over every
token of every beam, without a full top-k over `beams * vocab` values and
without writing the logits out again."""

import math

import tensorflow as tf

from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.output_rules import masked
from keras_transformer.decoding.output_rules import never_chosen


def log_normalizer(logits):
    """`log Σ_v exp(logits[..., v])`, so that the log-probabilities are
    `logits - normalizer[..., None]`, without writing them out: one pass
    for the maximum and one for the sum."""
    top = tf.reduce_max(logits, axis=-1, keepdims=True)
    return top[..., 0] + tf.math.log(tf.reduce_sum(tf.exp(logits - top), axis=-1))


def _chunk_size(vocab):
    """A chunk size for `best_extensions`: the divisor of `vocab` nearest to
    √vocab, if one lies within a factor 2 of it; otherwise √vocab rounded
    up (the last chunk is then padded)."""
    root = math.sqrt(vocab)
    divisors = [d for d in range(max(1, int(root / 2)), int(2 * root) + 1) if vocab % d == 0]
    return min(divisors, key=lambda d: abs(d - root)) if divisors else math.ceil(root)


def _full_top_k(logits, offsets, count, only=None):
    """`Candidates.best` by a top-k over every flattened candidate."""
    logits = logits if only is None else masked(logits, only)
    candidates = tf.reshape(offsets[:, :, None] + logits, [tf.shape(logits)[0], -1])
    return tf.math.top_k(candidates, count)


class Candidates:
    """Every extension of every beam of a sentence: `logits` `(batch, beams,
    vocab)` plus a per-beam offset, searched for the best without a full
    top-k over `beams * vocab` values per sentence (which dominated a beam
    search step), and without writing the logits out again.

    The vocabulary is cut into chunks of `_chunk_size(vocab)` tokens. A
    chunk that holds one of the `count` best candidates has one of the
    `count` largest chunk maxima (ties to the lower chunk), because at most
    `count - 1` chunks can beat it. So one pass takes the chunk maxima,
    which also give the maximum that `log_normalizer` needs, and the top-k
    runs over them and then over the `count` chosen chunks, gathered in
    flat order so that ties resolve as a full top-k's do. A rule allowing
    one token per sentence (`OnlyToken`) applies to the chunk maxima and
    to the chosen chunks only. The tokens `never` (PAD, BOS) are never
    candidates; the normalizer still counts them.
    """

    def __init__(self, logits, never=()):
        self.logits, self.never = logits, tuple(never)
        self.beams, self.vocab = logits.shape[1], logits.shape[2]
        self.size = _chunk_size(self.vocab)
        self.chunks = -(-self.vocab // self.size)
        logits = never_chosen(logits, self.never)
        if self.chunks * self.size != self.vocab:  # padding: never chosen
            padding = [[0, 0], [0, 0], [0, self.chunks * self.size - self.vocab]]
            logits = tf.pad(logits, padding, constant_values=-math.inf)
        # Chunk c = beam * chunks + m holds tokens m * size .. (m + 1) * size - 1.
        self.chunked = tf.reshape(logits, [tf.shape(logits)[0], -1, self.size])
        self.maxima = tf.reduce_max(self.chunked, axis=-1)  # (batch, beams * chunks)

    def log_normalizer(self):
        """`log Σ_v exp(logits[..., v])` `(batch, beams)` over every token,
        `never` included, as `log_normalizer` computes it, its maximum from
        the chunk maxima (and `never`'s logits)."""
        batch = tf.shape(self.logits)[0]
        top = tf.reduce_max(tf.reshape(self.maxima, [batch, self.beams, self.chunks]), -1)
        if self.never:
            hidden = tf.gather(self.logits, list(self.never), axis=-1)  # (batch, beams, n)
            top = tf.maximum(top, tf.reduce_max(hidden, axis=-1))
        return top + tf.math.log(tf.reduce_sum(tf.exp(self.logits - top[..., None]), axis=-1))

    def _masked_maxima(self, only):
        """The chunk maxima under `only`: its token's value in the token's
        chunk, `NEG_INF` in every other chunk."""
        home = tf.equal(tf.range(self.chunks), only.token[:, None] // self.size)
        maxima = tf.where(home[:, None, :], only.value[:, :, None], NEG_INF)
        maxima = tf.reshape(maxima, tf.shape(self.maxima))  # (batch, beams * chunks)
        return tf.where(only.where[:, None], maxima, self.maxima)

    def best(self, offsets, count, only=None):
        """The `count` largest `offsets[b, i] + logits[b, i, v]` of each
        sentence `b` over its beams `i` and tokens `v`, under `only` (or
        `None`), exactly as `tf.math.top_k` over the flattened `(batch,
        beams * vocab)` candidates gives them (ties to the lower flat
        index): `(values, flat_indices)`, each `(batch, count)`."""
        batch = tf.shape(self.logits)[0]
        if self.beams * self.chunks < count:
            return _full_top_k(never_chosen(self.logits, self.never), offsets, count, only)
        maxima = self.maxima if only is None else self._masked_maxima(only)
        chunk_offsets = tf.repeat(offsets, self.chunks, axis=1)  # (batch, beams * chunks)
        _, chosen = tf.math.top_k(maxima + chunk_offsets, count)
        chosen = tf.sort(chosen, axis=-1)  # flat order
        values = tf.gather(self.chunked, chosen, batch_dims=1)  # (batch, count, size)
        if only is not None:
            token = (chosen % self.chunks)[:, :, None] * self.size + tf.range(self.size)
            real = token < self.vocab
            value = tf.gather(only.value, chosen // self.chunks, batch_dims=1)[:, :, None]
            ruled = tf.where(tf.equal(token, only.token[:, None, None]), value, NEG_INF)
            values = tf.where(tf.logical_and(only.where[:, None, None], real), ruled, values)
        values = values + tf.gather(chunk_offsets, chosen, batch_dims=1)[:, :, None]
        top_values, position = tf.math.top_k(tf.reshape(values, [batch, count * self.size]), count)
        chunk = tf.gather(chosen, position // self.size, batch_dims=1)
        token = (chunk % self.chunks) * self.size + position % self.size
        return top_values, (chunk // self.chunks) * self.vocab + token


def best_extensions(logits, alive_log_probs, count, only, never=()):
    """The `count` most likely extensions of each sentence's beams:
    `(log_probs, flat_indices)` `(batch, count)`, the flat index being
    `beam * vocab + token`, over `logits` `(batch, beams, vocab)` of beams
    with log-probabilities `alive_log_probs` `(batch, beams)`, under the
    `OnlyToken` rule `only` and never with a token of `never` (the
    normalizer is taken before both)."""
    if logits.shape[2] is None:  # the vocabulary's size unknown while tracing
        offsets = alive_log_probs - log_normalizer(logits)
        return _full_top_k(never_chosen(logits, tuple(never)), offsets, count, only)
    candidates = Candidates(logits, never)
    return candidates.best(alive_log_probs - candidates.log_normalizer(), count, only)
