"""Beam search with GNMT's length penalty (Vaswani et al., 2017, §6.1)."""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding.constraints import forced_tokens
from keras_transformer.decoding.constraints import only_token
from keras_transformer.decoding.constraints import outside_prefix
from keras_transformer.decoding.constraints import with_prefix
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.loop import check_two_part_cache
from keras_transformer.decoding.loop import resized
from keras_transformer.decoding.loop import segment_ends
from keras_transformer.decoding.loop import segmented_loop
from keras_transformer.decoding.loop import sentence_limits
from keras_transformer.decoding.top_k import best_extensions
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime.results import length_penalty


class BeamState(NamedTuple):
    """Beam search's loop state, for `batch` sentences, `k` beams and
    `width = 1 + max_length` positions (BOS first). Hypotheses are sorted,
    best first; an empty slot has log-probability or score `NEG_INF`."""

    step: tf.Tensor  # () int32: position of the last token in `alive_ids`
    alive_ids: tf.Tensor  # (batch, k, width) int32: live hypotheses
    alive_log_probs: tf.Tensor  # (batch, k) float32: their log-probabilities
    finished_ids: tf.Tensor  # (batch, k, width) int32: ended with EOS
    finished_scores: tf.Tensor  # (batch, k) float32: length-penalized scores
    parents: tf.Tensor  # (batch, k) int32: the cache row of each live one's parent
    cache: dict  # "per_hypothesis": rows batch * k, in parent order; "per_sentence": rows batch


def _reorder_hypotheses(cache, beams, beam_size):
    """The cache with its per-hypothesis rows reordered: row `(b, i)`
    becomes the old row `(b, beams[b, i])`. The per-sentence part is left
    as it is."""
    batch_size = tf.shape(beams)[0]
    rows = tf.reshape(tf.range(batch_size)[:, None] * beam_size + beams, [-1])
    per_hypothesis = tf.nest.map_structure(
        lambda t: tf.gather(t, rows, axis=0), cache["per_hypothesis"]
    )
    return {**cache, "per_hypothesis": per_hypothesis}


@_backend.tensorflow_only("decoding.beam_search", "a tf.while_loop")
def beam_search(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    beam_size=4,
    alpha=0.6,
    length_limits=None,
    num_results=1,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
    controls=None,
    prefix=None,
    resize_cache=None,
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
        cache: the initial cache, batch `batch_size`, a dict with
            `"per_hypothesis"` (repeated per beam, reordered with the beams)
            and `"per_sentence"` (left as it is).
        batch_size: number of sentences (int or scalar tensor).
        max_length: size of the output buffer (EOS included).
        beam_size: hypotheses kept per sentence, 4 in the paper.
        alpha: length-penalty exponent, 0.6 in the paper (0: none).
        length_limits: optional per-sentence limits `(batch,)`, each at
            most `max_length`.
        num_results: how many finished hypotheses to return, best first
            (at most `beam_size`).
        bos_id: the first decoder input.
        eos_id: the token that ends a hypothesis.
        pad_id: what follows EOS in the output.
        controls: optional `OutputControls`, applied to every hypothesis;
            the scores are then under the controlled distribution.
        prefix: optional forced start of every sentence's hypotheses, as
            for `greedy_search`.
        resize_cache: optional, grows the per-hypothesis cache in segments,
            as for `greedy_search`.

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
    check_two_part_cache(cache, "beam_search")
    k = beam_size
    limits = sentence_limits(batch_size, max_length, length_limits)
    prefix, limits = with_prefix(prefix, limits, batch_size, max_length, pad_id)
    max_penalty = length_penalty(tf.cast(limits, tf.float32), alpha)  # (batch,)
    width = tf.convert_to_tensor(max_length) + 1  # BOS + tokens
    empty = tf.fill([batch_size, k, width], pad_id)
    initial = BeamState(
        step=tf.constant(0),
        alive_ids=tf.concat([tf.fill([batch_size, k, 1], bos_id), empty[:, :, 1:]], 2),
        # Only the first beam is live at the start; the others are copies.
        alive_log_probs=tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch_size, 1]),
        finished_ids=empty,
        finished_scores=tf.fill([batch_size, k], NEG_INF),
        parents=tf.tile(tf.range(k)[None, :], [batch_size, 1]),
        cache={
            **cache,
            "per_hypothesis": tf.nest.map_structure(
                lambda t: tf.repeat(t, k, axis=0), cache["per_hypothesis"]
            ),
        },
    )

    def sentence_done(state):
        reached_limit = state.step >= limits
        best_possible = state.alive_log_probs[:, 0] / max_penalty  # alive is sorted
        worst_kept = state.finished_scores[:, num_results - 1]  # finished is sorted
        return tf.logical_or(reached_limit, worst_kept >= best_possible)

    def cond(end, state):
        return tf.logical_and(state.step < end, tf.logical_not(tf.reduce_all(sentence_done(state))))

    def body(state):
        new_state = _step(state)
        # Gathers forget static shapes (a static batch size included) that
        # the loop requires to stay the same: restore them.
        tf.nest.map_structure(lambda new, old: new.set_shape(old.shape), new_state, state)
        return (new_state,)

    def _step(state):
        step = state.step
        tokens = tf.reshape(tf.gather(state.alive_ids, step, axis=2), [-1, 1])  # (batch * k, 1)
        # The cache is reordered here, for the hypotheses chosen last step,
        # not at the end of that step: XLA then fuses the reordering gather
        # with `tokens_to_logits`'s write into one pass over the cache.
        cache = _reorder_hypotheses(state.cache, state.parents, k)
        logits, cache = tokens_to_logits(tokens, cache, step)
        logits = tf.cast(logits, tf.float32)
        vocab = logits.shape[-1] if logits.shape[-1] is not None else tf.shape(logits)[-1]
        forced, forced_token = forced_tokens(prefix, step)
        if controls is not None and controls.active:
            controlled = controls.apply(
                logits,
                tf.reshape(state.alive_ids, [batch_size * k, width]),
                step,
                tf.repeat(limits, k),
                eos_id,
            )
            logits = outside_prefix(
                None if forced is None else tf.repeat(forced, k), controlled, logits
            )
        logits = tf.reshape(logits, [batch_size, k, vocab])
        only = only_token(logits, step, limits, eos_id, forced, forced_token)

        # The candidates: each live hypothesis extended by each token but PAD
        # and BOS, with log-probability alive + logits - normalizer. 2k of
        # them: enough for k live ones even if k of them end here.
        top_log_probs, top_indices = best_extensions(
            logits, state.alive_log_probs, 2 * k, only, never=(pad_id, bos_id)
        )  # (batch, 2k)
        top_beams, top_tokens = top_indices // vocab, top_indices % vocab
        column = tf.equal(tf.range(width), step + 1)[None, None, :]
        top_ids = tf.where(
            column, top_tokens[:, :, None], tf.gather(state.alive_ids, top_beams, batch_dims=1)
        )  # (batch, 2k, width)
        ends = tf.equal(top_tokens, eos_id)

        # The k best candidates that go on.
        live_log_probs, live = tf.math.top_k(tf.where(ends, NEG_INF, top_log_probs), k)

        # The k best finished hypotheses so far, including those ending here.
        # An ending counts only if it ranks among the k best candidates, so
        # that a beam of 1 is exactly greedy search.
        in_beam = tf.range(2 * k)[None, :] < k
        new_scores = tf.where(
            tf.logical_and(ends, in_beam),
            top_log_probs / length_penalty(tf.cast(step + 1, tf.float32), alpha),
            NEG_INF,
        )
        new_scores = tf.where(sentence_done(state)[:, None], NEG_INF, new_scores)  # stopped
        finished_scores, keep = tf.math.top_k(tf.concat([state.finished_scores, new_scores], 1), k)
        finished_ids = tf.gather(tf.concat([state.finished_ids, top_ids], 1), keep, batch_dims=1)
        return BeamState(
            step=step + 1,
            alive_ids=tf.gather(top_ids, live, batch_dims=1),
            alive_log_probs=live_log_probs,
            finished_ids=finished_ids,
            finished_scores=finished_scores,
            parents=tf.gather(top_beams, live, batch_dims=1),
            cache=cache,
        )

    def resize(loop_vars, length):
        (state,) = loop_vars
        return (
            BeamState(
                step=state.step,
                alive_ids=state.alive_ids,
                alive_log_probs=state.alive_log_probs,
                finished_ids=state.finished_ids,
                finished_scores=state.finished_scores,
                parents=state.parents,
                cache=resized(state.cache, resize_cache, length),
            ),
        )

    (final,) = segmented_loop(
        cond,
        body,
        (initial,),
        segment_ends(max_length, resize_cache),
        resize,
    )
    return final.finished_ids[:, :num_results, 1:], final.finished_scores[:, :num_results]
