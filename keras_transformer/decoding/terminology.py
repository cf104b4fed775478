"""Positive constraints: phrases every output of beam search must contain,
by dynamic beam allocation (Post & Vilar, 2018).

A sentence's constraints are an int32 tensor `(constraints, length)` in
`decoding.phrases`' layout (each phrase right-aligned, padded on the left
with `NO_TOKEN`; a row of `NO_TOKEN` is no constraint). Nothing is kept
per hypothesis: each step reads from the hypotheses' tokens which
constraints they contain, which they are one token short of, and which
token would take each one further.

With word boundaries (`boundaries`: the tokens that begin a word, are
punctuation, or EOS), a phrase counts as met only where one of them
follows it: a hypothesis that ends with a phrase has it pending, and the
next token decides.

Each step, besides the `2k` best extensions, every live hypothesis
proposes the next token of each constraint it has not met (continuing the
longest partial match, else the first token), and its own best token (and,
with a phrase pending, its best word start and EOS), so that no
hypothesis is left without a candidate. The candidates are grouped by how
many constraint tokens they hold ("banks": a met constraint's length, or
the tokens of its start a candidate ends with), each of the `T + 1` banks
gets `k / (T + 1)` of the `k` live slots by score (`T`: the sentence's
constraint tokens; at least one), and the best remaining candidates take
the rest. A beam of at least `T + 1` gives every bank a slot; with fewer,
the bank of most tokens still keeps one, so that a long phrase once begun
is carried to its end. A hypothesis may end (EOS) only when it meets every
constraint, except at its length limit, where EOS is forced whatever it
meets; the finished hypotheses rank by how many constraints they miss,
then by score.
The scores stay the model's log-probabilities.
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.phrases import BEFORE_OUTPUT
from keras_transformer.decoding.phrases import NO_TOKEN
from keras_transformer.decoding.phrases import follows
from keras_transformer.decoding.phrases import tokens_at


def occurrences(phrases, ids, step, boundaries=None):
    """`(closed, at_end)`, each `(rows, hypotheses, constraints)` booleans:
    whether each hypothesis `ids` `(rows, hypotheses, width)` (tokens at
    1..step) holds each of its row's `phrases` `(rows, constraints,
    length)` followed by a token of `boundaries` (a bool `(vocab,)`: the
    tokens that may follow a phrase; None: any token), and whether it ends
    with the phrase (the token after it still to come). No constraint
    counts as closed."""
    length, width = tf.shape(phrases)[2], tf.shape(ids)[2]
    ends = tf.range(width)
    positions = ends[:, None] - (length - 1) + tf.range(length)[None, :]  # (width, length)
    windows = tokens_at(ids, positions, step)  # (rows, hyp, width, length)
    wanted = phrases[:, None, :, None, :]  # (rows, 1, constraints, 1, length)
    same = tf.logical_or(tf.equal(wanted, NO_TOKEN), tf.equal(windows[:, :, None], wanted))
    found = tf.reduce_all(same, axis=-1)  # (rows, hyp, constraints, width): a phrase ends there
    none = tf.equal(phrases[:, None, :, -1], NO_TOKEN)
    if boundaries is None:
        return tf.logical_or(tf.reduce_any(found, axis=-1), none), tf.zeros_like(none)
    after = tokens_at(ids, ends + 1, step)  # (rows, hyp, width)
    bounded = tf.logical_and(after >= 0, tf.gather(boundaries, tf.maximum(after, 0)))
    closed = tf.reduce_any(tf.logical_and(found, bounded[:, :, None]), axis=-1)
    at_end = tf.reduce_any(tf.logical_and(found, tf.equal(ends, step)), axis=-1)
    return tf.logical_or(closed, none), at_end


def contained(phrases, ids, step, boundaries=None):
    """`(rows, hypotheses, constraints)` booleans: whether each hypothesis
    `ids` `(rows, hypotheses, width)` (tokens at 1..step) contains each of
    its row's `phrases` `(rows, constraints, length)`, followed by a token
    of `boundaries` or at its end (`occurrences`); no constraint counts as
    contained."""
    closed, at_end = occurrences(phrases, ids, step, boundaries)
    return tf.logical_or(closed, at_end)


def next_tokens(phrases, ids, step):
    """`(tokens, matched)`, each `(rows, hypotheses, constraints)`: the
    token that takes each constraint further for each hypothesis, the one
    after the longest start of the phrase that the hypothesis ends with
    (the first token if none), and how many tokens that start holds."""
    length = tf.shape(phrases)[2]
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(phrases, NO_TOKEN), tf.int32), axis=-1)
    # Left-aligned: starts[r, c, j] is phrase c's token j.
    shift = tf.minimum(length - lengths[:, :, None] + tf.range(length), length - 1)
    starts = tf.gather(phrases, shift, batch_dims=2)  # (rows, constraints, length)
    last = tokens_at(ids, step - length + 1 + tf.range(length), step)  # (rows, hyp, length)
    done, later = tf.range(length)[:, None], tf.range(length)[None, :]  # p tokens, token q
    suffix = tf.gather(last, tf.clip_by_value(length - done + later, 0, length - 1), axis=-1)
    same = tf.logical_or(
        later >= done,  # only the first p tokens count
        tf.equal(suffix[:, :, None], starts[:, None, :, None, :]),
    )  # (rows, hyp, constraints, p, q)
    matched = tf.logical_and(
        tf.reduce_all(same, axis=-1), tf.range(length) < lengths[:, None, :, None]
    )
    longest = tf.reduce_max(tf.where(matched, tf.range(length), 0), axis=-1)
    hypotheses = tf.shape(ids)[1]
    per_hypothesis = tf.repeat(starts[:, None], hypotheses, axis=1)
    return tf.gather(per_hypothesis, longest, batch_dims=3), longest


class HypothesisStatus(NamedTuple):
    """What each live hypothesis `(rows, k, constraints)` holds of each
    constraint, read from its tokens once a step (`status`)."""

    met: tf.Tensor  # bool: contains the phrase, a boundary after it (no constraint: true)
    pending: tf.Tensor  # bool: ends with the phrase, and it is not met elsewhere
    ready: tf.Tensor  # bool: ends with all of the phrase but its last token
    wanted: tf.Tensor  # int32: the token that takes the phrase further (`next_tokens`)
    matched: tf.Tensor  # int32: how many of the phrase's tokens it ends with


def status(phrases, ids, step, boundaries=None):
    """The `HypothesisStatus` of hypotheses `ids` `(rows, k, width)`
    (tokens at 1..step) for their rows' `phrases` (`boundaries` as for
    `occurrences`)."""
    wanted, matched = next_tokens(phrases, ids, step)
    closed, at_end = occurrences(phrases, ids, step, boundaries)
    return HypothesisStatus(
        met=closed,
        pending=tf.logical_and(at_end, tf.logical_not(closed)),
        ready=follows(phrases[:, None], ids, step),
        wanted=wanted,
        matched=matched,
    )


def met_counts(phrases, held, beams, tokens, boundaries=None):
    """`(met, progress)` `(rows, n)` of each candidate: how many of its
    row's constraints it meets (the rows of no constraint counted as met;
    a phrase it ends with counts, its boundary still to come), and how
    many constraint tokens it has (a met constraint's length, else the
    tokens of its start that the candidate ends with: Post and Vilar's
    banks). Candidate `j` extends the hypothesis `beams[:, j]`, whose
    `HypothesisStatus` `held` gives, with `tokens[:, j]`; `boundaries` as
    for `occurrences`."""
    held = HypothesisStatus(*(tf.gather(t, beams, batch_dims=1) for t in held))
    completes = tf.logical_and(held.ready, tf.equal(tokens[:, :, None], phrases[:, None, :, -1]))
    meets = tf.logical_or(held.met, completes)
    if boundaries is not None:
        closes = tf.gather(boundaries, tf.maximum(tokens, 0))[:, :, None]
        meets = tf.logical_or(meets, tf.logical_and(held.pending, closes))
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(phrases, NO_TOKEN), tf.int32), axis=-1)
    progress = tf.where(tf.equal(tokens[:, :, None], held.wanted), held.matched + 1, 0)
    progress = tf.where(meets, lengths[:, None, :], progress)
    return (
        tf.reduce_sum(tf.cast(meets, tf.int32), axis=-1),
        tf.reduce_sum(progress, axis=-1),
    )


def proposals(held, log_probs, alive_log_probs, allowed):
    """The candidates that take a constraint further: for each live
    hypothesis and each constraint it has not met (nor ends with), its
    next token (`HypothesisStatus.wanted` of `held`). Returns
    `(log_probs, beams, tokens)`, each `(rows, k * constraints)`; a
    proposal that is not `allowed` `(rows,)` (a rule allows one token
    only), or of a met constraint, has `NEG_INF`. `log_probs` `(rows, k,
    vocab)` are the hypotheses' next-token log-probabilities."""
    usable = tf.logical_not(tf.logical_or(held.met, held.pending))
    return _proposed(held.wanted, usable, log_probs, alive_log_probs, allowed)


def own_proposals(held, log_probs, alive_log_probs, allowed, choosable, word_starts, eos_id):
    """Each live hypothesis' own best candidates, so that none is left
    without one (the best extensions of all may come from others): its
    most likely token of `choosable` (bool `(vocab,)`), and where it ends
    with a phrase whose boundary is still to come, its most likely token of
    `word_starts` (bool `(vocab,)`, or None: none of these) and EOS.
    Returns `(log_probs, beams, tokens)`, each `(rows, k * n)`, as
    `proposals` does."""
    best = tf.argmax(tf.where(choosable, log_probs, NEG_INF), axis=-1, output_type=tf.int32)
    if word_starts is None:
        usable = tf.ones_like(best, tf.bool)[:, :, None]
        return _proposed(best[:, :, None], usable, log_probs, alive_log_probs, allowed)
    start = tf.argmax(tf.where(word_starts, log_probs, NEG_INF), axis=-1, output_type=tf.int32)
    tokens = tf.stack([best, start, tf.fill(tf.shape(best), eos_id)], axis=-1)
    pending = tf.reduce_any(held.pending, axis=-1)
    usable = tf.stack([tf.ones_like(pending), pending, pending], axis=-1)
    return _proposed(tokens, usable, log_probs, alive_log_probs, allowed)


def _proposed(tokens, usable, log_probs, alive_log_probs, allowed):
    """Candidates `tokens` `(rows, k, n)` of the `k` hypotheses, flat, with
    `NEG_INF` where not `usable`, not `allowed` or of no live hypothesis."""
    values = tf.gather(log_probs, tf.maximum(tokens, 0), batch_dims=2)
    values = alive_log_probs[:, :, None] + values
    usable = tf.logical_and(usable, allowed[:, None, None])
    usable = tf.logical_and(usable, alive_log_probs[:, :, None] > NEG_INF / 2)
    values = tf.where(usable, values, NEG_INF)
    shape = tf.shape(tokens)
    beams = tf.broadcast_to(tf.range(shape[1])[None, :, None], shape)
    flat = [shape[0], shape[1] * shape[2]]
    return tf.reshape(values, flat), tf.reshape(beams, flat), tf.reshape(tokens, flat)


def first_of_each(indices, valid):
    """`valid` `(rows, n)` with repeated `indices` (a candidate found twice)
    kept at their first place only."""
    n = tf.shape(indices)[1]
    same = tf.equal(indices[:, :, None], indices[:, None, :])
    earlier = tf.range(n)[None, :] < tf.range(n)[:, None]  # [j, i]: i before j
    repeated = tf.reduce_any(
        tf.logical_and(tf.logical_and(same, earlier[None]), valid[:, None, :]), axis=-1
    )
    return tf.logical_and(valid, tf.logical_not(repeated))


def bank_ranks(scores, counts):
    """Each candidate's rank `(rows, n)` among the valid candidates of its
    bank (the same met count), best first, ties to the earlier."""
    n = tf.shape(scores)[1]
    valid = scores > NEG_INF / 2
    same_bank = tf.equal(counts[:, :, None], counts[:, None, :])
    better = tf.logical_or(
        scores[:, None, :] > scores[:, :, None],
        tf.logical_and(
            tf.equal(scores[:, None, :], scores[:, :, None]),
            (tf.range(n)[None, :] < tf.range(n)[:, None])[None],
        ),
    )  # [r, j, i]: candidate i ranks before candidate j
    ahead = tf.logical_and(tf.logical_and(same_bank, better), valid[:, None, :])
    return tf.reduce_sum(tf.cast(ahead, tf.int32), axis=-1)


def closing_tokens(word_starts, eos_id):
    """The bool `(vocab,)` `boundaries` of `occurrences` for `word_starts`
    (the tokens that begin a word or are punctuation): those and EOS."""
    word_starts = tf.convert_to_tensor(word_starts, tf.bool)
    return tf.logical_or(word_starts, tf.equal(tf.range(tf.size(word_starts)), eos_id))


def missing(phrases, ids, boundaries=None):
    """How many of its row's constraints each output misses: `ids`
    `(rows, outputs, length)` as the searches return them (no BOS);
    `boundaries` as for `occurrences` (EOS among them)."""
    with_bos = tf.pad(ids, [[0, 0], [0, 0], [1, 0]], constant_values=BEFORE_OUTPUT)
    length = tf.shape(ids)[2]
    met = tf.reduce_sum(
        tf.cast(contained(phrases, with_bos, length, boundaries), tf.int32), axis=-1
    )
    return tf.shape(phrases)[1] - met


def allocated(scores, counts, active, k):
    """Which `k` of the candidates `scores` `(rows, n)` (`NEG_INF`: none)
    go on, by dynamic beam allocation over their banks `counts` `(rows,
    n)` (constraint tokens met) with `active` `(rows,)` constraint tokens
    in all: `(scores, positions)` `(rows, k)`, best first. Where more
    banks than `k` are granted a slot, the bank of most tokens keeps its
    own (so a long phrase, once begun, is carried on to its end), and the
    best of the others get the rest."""
    valid = scores > NEG_INF / 2
    quota = tf.maximum(k // (active + 1), 1)[:, None]
    granted = tf.logical_and(valid, bank_ranks(scores, counts) < quota)
    # The top bank's granted candidate, the other granted ones, then the best of the rest.
    top = tf.reduce_max(tf.where(valid, counts, -1), axis=-1, keepdims=True)
    key = tf.where(granted, tf.where(tf.equal(counts, top), 0, 1), 2)
    chosen = ranked(scores, key, k)
    best_first, order = tf.math.top_k(tf.gather(scores, chosen, batch_dims=1), k)
    return best_first, tf.gather(chosen, order, batch_dims=1)


def ranked(scores, key, k):
    """The positions `(rows, k)` of the first `k` of `scores` `(rows, n)`
    by the smallest int `key` `(rows, n)` first, then the highest score
    (two stable sorts: an offset added to the scores would round them in
    float32). Finished hypotheses rank by the constraints they miss."""
    by_score = tf.argsort(scores, axis=-1, direction="DESCENDING", stable=True)
    by_key = tf.argsort(tf.gather(key, by_score, batch_dims=1), axis=-1, stable=True)
    return tf.gather(by_score, by_key, batch_dims=1)[:, :k]
