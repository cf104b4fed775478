"""The loop every search shares: `tf.while_loop`s over fixed-shape state,
one per segment of steps with a cache just long enough for them, and the
one-token-at-a-time loop of greedy search and sampling."""

import tensorflow as tf

from keras_transformer.decoding.constraints import forced_tokens
from keras_transformer.decoding.constraints import never_chosen
from keras_transformer.decoding.constraints import only_eos_at_limit
from keras_transformer.decoding.constraints import only_forced
from keras_transformer.decoding.constraints import outside_prefix
from keras_transformer.decoding.constraints import with_prefix
from keras_transformer.decoding.top_k import log_normalizer


def sentence_limits(batch_size, max_length, length_limits):
    """Per-sentence limits `(batch,)`, capped by the buffer `max_length`."""
    max_length = tf.convert_to_tensor(max_length, tf.int32)
    if length_limits is None:
        return tf.fill([batch_size], max_length)
    return tf.minimum(tf.cast(length_limits, tf.int32), max_length)


CACHE_SEGMENTS = 4


def segment_ends(max_length, resize_cache):
    """The steps at which the searches stop to grow the cache: `[max_length]`
    without `resize_cache`, else `CACHE_SEGMENTS` ends spread evenly up to
    `max_length` (Python ints when it is one, else tensors)."""
    if resize_cache is None:
        return [max_length]
    n = CACHE_SEGMENTS
    if isinstance(max_length, int):
        return [-(-max_length * (i + 1) // n) for i in range(n)]
    max_length = tf.convert_to_tensor(max_length, tf.int32)
    return [(max_length * (i + 1) + n - 1) // n for i in range(n)]


CACHE_PARTS = ("per_hypothesis", "per_sentence")


def check_two_part_cache(cache, user):
    if not isinstance(cache, dict) or set(cache) != set(CACHE_PARTS):
        received = sorted(cache) if isinstance(cache, dict) else type(cache).__name__
        raise ValueError(
            f"{user} needs `cache` as a dict with exactly the keys {list(CACHE_PARTS)} "
            f"(what belongs to each hypothesis, and what stays one per sentence). "
            f"Received: cache with {received}"
        )


def resized(cache, resize_cache, length):
    """`cache` with its per-hypothesis part holding `length` positions."""
    if resize_cache is None:
        return cache
    check_two_part_cache(cache, "`resize_cache`")
    return {**cache, "per_hypothesis": resize_cache(cache["per_hypothesis"], length)}


def segmented_loop(cond, body, loop_vars, ends, resize):
    """`tf.while_loop` over `loop_vars`, one loop per segment of steps:
    `cond(end, *loop_vars)` says whether to go on in the segment that ends
    at step `end`, and `resize(loop_vars, end)` prepares the loop
    variables for it (the cache grown to hold `end` positions)."""
    if len(ends) > 1:
        body = _traced_once(body)
    for end in ends:
        loop_vars = tf.while_loop(
            lambda *loop_vars, end=end: cond(end, *loop_vars), body, resize(loop_vars, end)
        )
    return loop_vars


def _traced_once(body):
    """`body` as a `tf.function` that the loops of all segments share: its
    graph is traced once or twice (then with the cache length relaxed)
    instead of once per segment, with the outputs' shapes those of the
    inputs."""
    shared = tf.function(body, reduce_retracing=True)

    def call(*loop_vars):
        outputs = shared(*loop_vars)
        tf.nest.map_structure(lambda new, old: new.set_shape(old.shape), outputs, loop_vars)
        return outputs

    return call


def one_token_at_a_time(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    pick,
    *,
    length_limits,
    bos_id,
    eos_id,
    pad_id,
    controls,
    prefix,
    resize_cache,
):
    """The loop of greedy search and sampling: `pick(logits, step)` chooses
    each sentence's next token `(batch,)` from its logits `(batch, vocab)`
    (after the rules of `constraints`: never PAD or BOS, only EOS at the
    limit, a forced prefix); returns `(ids, scores)`."""
    limits = sentence_limits(batch_size, max_length, length_limits)
    prefix, limits = with_prefix(prefix, limits, batch_size, max_length, pad_id)
    sequences = tf.concat(
        [tf.fill([batch_size, 1], bos_id), tf.fill([batch_size, max_length], pad_id)], 1
    )  # (batch, BOS + max_length tokens)

    def cond(end, step, sequences, finished, scores, cache):
        return tf.logical_and(step < end, tf.logical_not(tf.reduce_all(finished)))

    def body(step, sequences, finished, scores, cache):
        # A gather (not a slice at a tensor offset) keeps the shape static
        # under XLA.
        tokens = tf.gather(sequences, step, axis=1)[:, None]  # (batch, 1)
        logits, cache = tokens_to_logits(tokens, cache, step)
        logits = tf.cast(logits, tf.float32)
        forced, forced_token = forced_tokens(prefix, step)
        if controls is not None and controls.active:
            controlled = controls.apply(logits, sequences, step, limits, eos_id)
            logits = outside_prefix(forced, controlled, logits)
        normalizer = log_normalizer(logits)
        logits = never_chosen(logits, (pad_id, bos_id))
        logits = only_eos_at_limit(logits, step, limits, eos_id)
        logits = only_forced(logits, forced, forced_token)
        next_token = pick(logits, step)
        # Its log-probability.
        next_score = tf.gather(logits, next_token, batch_dims=1) - normalizer
        next_token = tf.where(finished, pad_id, next_token)
        scores = scores + tf.where(finished, 0.0, next_score)
        column = tf.equal(tf.range(tf.shape(sequences)[1]), step + 1)
        sequences = tf.where(column[None, :], next_token[:, None], sequences)
        finished = tf.logical_or(finished, tf.equal(next_token, eos_id))
        return step + 1, sequences, finished, scores, cache

    def resize(state, length):
        return (*state[:4], resized(state[4], resize_cache, length))

    _, sequences, _, scores, _ = segmented_loop(
        cond,
        body,
        (
            tf.constant(0),
            sequences,
            tf.zeros([batch_size], tf.bool),
            tf.zeros([batch_size], tf.float32),
            cache,
        ),
        segment_ends(max_length, resize_cache),
        resize,
    )
    return sequences[:, 1:], scores
