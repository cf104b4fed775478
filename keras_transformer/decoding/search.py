"""Greedy and beam search over a next-token function and a cache.

Both searches know nothing of the model. They call

    logits, cache = tokens_to_logits(token_ids, cache, index)

with `token_ids` `(n, 1)` int32 (the token at position `index`), a cache
whose tensors all have the batch as their first axis, and `index` a scalar
int32; it returns float32 `logits` `(n, vocab)` for position `index + 1`
and the updated cache. Everything runs in one `tf.while_loop` over
fixed-shape state, so the searches trace once per input signature, run
under `tf.function(jit_compile=True)`, and export in a SavedModel.

Outputs never include BOS; a hypothesis ends with EOS and is padded with
`pad_id` after it. Every sentence has its own length limit (`max_lengths`,
e.g. source length + 50); when it is reached, only EOS may follow.
"""

import tensorflow as tf

from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID

# Stands for log(0): finite, so that sums and differences never give NaN.
NEG_INF = -1.0e9


def length_penalty(length, alpha):
    """GNMT's length penalty ((5 + length) / 6)^alpha (Wu et al., 2016)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def _limits(batch_size, max_length, max_lengths):
    """Per-sentence limits `(batch,)`, capped by the buffer `max_length`."""
    max_length = tf.convert_to_tensor(max_length, tf.int32)
    if max_lengths is None:
        return tf.fill([batch_size], max_length)
    return tf.minimum(tf.cast(max_lengths, tf.int32), max_length)


def _only_eos_at_limit(log_probs, step, limits, eos_id):
    """Where a sentence reaches its limit at this step, allow only EOS.

    `log_probs` is `(batch, ..., vocab)`; `limits` is `(batch,)`.
    """
    at_limit = tf.equal(step + 1, limits)  # this token is the last allowed
    at_limit = tf.reshape(at_limit, [-1] + [1] * (log_probs.shape.rank - 1))
    is_eos = tf.equal(tf.range(tf.shape(log_probs)[-1]), eos_id)
    return tf.where(tf.logical_and(at_limit, tf.logical_not(is_eos)), NEG_INF, log_probs)


def greedy_search(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    max_lengths=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
):
    """Picks the most likely next token until every sentence has ended.

    Args:
        tokens_to_logits: the next-token function (module docstring).
        cache: the initial cache, batch `batch_size`.
        batch_size: number of sentences (int or scalar tensor).
        max_length: size of the output buffer, the most tokens any sentence
            may get (EOS included).
        max_lengths: optional per-sentence limits `(batch,)`.
        bos_id: the first decoder input.
        eos_id: the token that ends a sentence.
        pad_id: what follows EOS in the output.

    Returns:
        `(ids, scores)`: int32 `(batch, max_length)` and the float32 sum of
        the log-probabilities of each sentence's tokens `(batch,)`.

    Example:

    >>> ids, scores = greedy_search(step_fn, cache, batch_size=2, max_length=20)
    """
    limits = _limits(batch_size, max_length, max_lengths)
    sequences = tf.concat(
        [tf.fill([batch_size, 1], bos_id), tf.fill([batch_size, max_length], pad_id)], 1
    )  # (batch, BOS + max_length tokens)

    def cond(step, sequences, finished, scores, cache):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, sequences, finished, scores, cache):
        # A gather (not a slice at a tensor offset) keeps the shape static
        # under XLA.
        tokens = tf.gather(sequences, step, axis=1)[:, None]  # (batch, 1)
        logits, cache = tokens_to_logits(tokens, cache, step)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        log_probs = _only_eos_at_limit(log_probs, step, limits, eos_id)
        next_token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        next_score = tf.reduce_max(log_probs, axis=-1)
        next_token = tf.where(finished, pad_id, next_token)
        scores = scores + tf.where(finished, 0.0, next_score)
        column = tf.equal(tf.range(tf.shape(sequences)[1]), step + 1)
        sequences = tf.where(column[None, :], next_token[:, None], sequences)
        finished = tf.logical_or(finished, tf.equal(next_token, eos_id))
        return step + 1, sequences, finished, scores, cache

    _, sequences, _, scores, _ = tf.while_loop(
        cond,
        body,
        (
            tf.constant(0),
            sequences,
            tf.zeros([batch_size], tf.bool),
            tf.zeros([batch_size], tf.float32),
            cache,
        ),
    )
    return sequences[:, 1:], scores


def _gather_cache(cache, beams, beam_size, read_only):
    """Reorders a cache of `batch * beam_size` rows: row `(b, i)` becomes
    the old row `(b, beams[b, i])`.

    Entries flagged in `read_only` (a structure of booleans like `cache`)
    are left as they are: they were tiled from one row per sentence and
    never written, so every beam of a sentence holds the same values and
    the reordering would copy them onto themselves (for a Transformer,
    the encoder-decoder keys and values: half of the cache).
    """
    batch_size = tf.shape(beams)[0]
    rows = tf.reshape(tf.range(batch_size)[:, None] * beam_size + beams, [-1])
    return tf.nest.map_structure(
        lambda t, keep: t if keep else tf.gather(t, rows, axis=0), cache, read_only
    )


def beam_search(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    beam_size=4,
    alpha=0.6,
    max_lengths=None,
    num_results=1,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
):
    """Beam search with GNMT's length penalty (§6.1: beam 4, alpha 0.6).

    Keeps `beam_size` live hypotheses per sentence; a hypothesis that emits
    EOS is finished with score `log P / ((5 + length) / 6)^alpha`. A
    sentence stops when it hits its length limit, or when it has
    `num_results` finished hypotheses and no live one can still beat the
    worst of them (log-probabilities only fall, and the penalty is largest
    at the limit). The loop stops when every sentence has stopped.

    Args:
        tokens_to_logits: the next-token function (module docstring); it
            sees `batch_size * beam_size` rows, beams of a sentence together.
        cache: the initial cache, batch `batch_size`; it is tiled per beam.
        batch_size: number of sentences (int or scalar tensor).
        max_length: size of the output buffer (EOS included).
        beam_size: hypotheses kept per sentence, 4 in the paper.
        alpha: length-penalty exponent, 0.6 in the paper (0: none).
        max_lengths: optional per-sentence limits `(batch,)`.
        num_results: how many finished hypotheses to return, best first
            (at most `beam_size`).
        bos_id: the first decoder input.
        eos_id: the token that ends a hypothesis.
        pad_id: what follows EOS in the output.

    Returns:
        `(ids, scores)`: int32 `(batch, num_results, max_length)` and
        float32 length-penalized scores `(batch, num_results)`.

    Example:

    >>> ids, scores = beam_search(step_fn, cache, batch_size=2, max_length=20)
    >>> best = ids[:, 0]
    """
    if not 1 <= num_results <= beam_size:
        raise ValueError(
            f"`num_results` must be in [1, beam_size={beam_size}]. "
            f"Received: num_results={num_results}"
        )
    k = beam_size
    limits = _limits(batch_size, max_length, max_lengths)
    max_penalty = length_penalty(limits, alpha)  # (batch,)
    width = tf.convert_to_tensor(max_length) + 1  # BOS + tokens

    cache = tf.nest.map_structure(lambda t: tf.repeat(t, k, axis=0), cache)
    alive = tf.concat(
        [tf.fill([batch_size, k, 1], bos_id), tf.fill([batch_size, k, width - 1], pad_id)], 2
    )
    # Only the first beam is live at the start; the others are copies.
    alive_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch_size, 1])
    finished = tf.fill([batch_size, k, width], pad_id)
    finished_scores = tf.fill([batch_size, k], NEG_INF)

    def sentence_done(step, alive_log_probs, finished_scores):
        reached_limit = step >= limits
        best_possible = alive_log_probs[:, 0] / max_penalty  # alive is sorted
        worst_kept = finished_scores[:, num_results - 1]  # finished is sorted
        return tf.logical_or(reached_limit, worst_kept >= best_possible)

    def cond(step, alive, alive_log_probs, finished, finished_scores, cache):
        done = sentence_done(step, alive_log_probs, finished_scores)
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(done)))

    def body(step, alive, alive_log_probs, finished, finished_scores, cache):
        state = (alive, alive_log_probs, finished, finished_scores, cache)
        outputs = _step(step, *state)
        # Gathers forget static shapes (a static batch size included) that
        # the loop requires to stay the same: restore them.
        tf.nest.map_structure(lambda new, old: new.set_shape(old.shape), outputs, state)
        return (step + 1, *outputs)

    def _step(step, alive, alive_log_probs, finished, finished_scores, cache):
        tokens = tf.reshape(tf.gather(alive, step, axis=2), [-1, 1])  # (batch * k, 1)
        logits, new_cache = tokens_to_logits(tokens, cache, step)
        # What `tokens_to_logits` hands back untouched is never written.
        read_only = tf.nest.map_structure(lambda new, old: new is old, new_cache, cache)
        cache = new_cache
        vocab = tf.shape(logits)[-1]
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        log_probs = tf.reshape(log_probs, [batch_size, k, vocab])
        log_probs = _only_eos_at_limit(log_probs, step, limits, eos_id)
        candidates = tf.reshape(alive_log_probs[:, :, None] + log_probs, [batch_size, -1])

        # 2k candidates: enough for k live ones even if k of them end here.
        top_log_probs, top_indices = tf.math.top_k(candidates, 2 * k)  # (batch, 2k)
        top_beams, top_tokens = top_indices // vocab, top_indices % vocab
        column = tf.equal(tf.range(width), step + 1)[None, None, :]
        top_sequences = tf.where(
            column, top_tokens[:, :, None], tf.gather(alive, top_beams, batch_dims=1)
        )
        ends = tf.equal(top_tokens, eos_id)

        # The k best candidates that go on.
        live_log_probs = tf.where(ends, NEG_INF, top_log_probs)
        live_log_probs, live = tf.math.top_k(live_log_probs, k)
        alive = tf.gather(top_sequences, live, batch_dims=1)
        cache = _gather_cache(cache, tf.gather(top_beams, live, batch_dims=1), k, read_only)

        # The k best finished hypotheses so far, including those ending here.
        # An ending counts only if it ranks among the k best candidates, so
        # that a beam of 1 is exactly greedy search.
        in_beam = tf.range(2 * k)[None, :] < k
        new_scores = tf.where(
            tf.logical_and(ends, in_beam), top_log_probs / length_penalty(step + 1, alpha), NEG_INF
        )
        done = sentence_done(step, alive_log_probs, finished_scores)
        new_scores = tf.where(done[:, None], NEG_INF, new_scores)  # stopped: frozen
        merged_scores = tf.concat([finished_scores, new_scores], 1)
        merged = tf.concat([finished, top_sequences], 1)
        finished_scores, keep = tf.math.top_k(merged_scores, k)
        finished = tf.gather(merged, keep, batch_dims=1)
        return alive, live_log_probs, finished, finished_scores, cache

    _, _, _, finished, finished_scores, _ = tf.while_loop(
        cond,
        body,
        (tf.constant(0), alive, alive_log_probs, finished, finished_scores, cache),
    )
    return finished[:, :num_results, 1:], finished_scores[:, :num_results]
