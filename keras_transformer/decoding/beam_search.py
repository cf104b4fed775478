"""Beam search with GNMT's length penalty (Vaswani et al., 2017, §6.1)."""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding import constrained
from keras_transformer.decoding.banned import NO_TOKEN
from keras_transformer.decoding.constraints import forced_tokens
from keras_transformer.decoding.constraints import only_token
from keras_transformer.decoding.constraints import with_prefix
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.loop import check_two_part_cache
from keras_transformer.decoding.loop import controlled
from keras_transformer.decoding.loop import drops_finished_rows
from keras_transformer.decoding.loop import rows_of
from keras_transformer.decoding.loop import searched_sentences
from keras_transformer.decoding.loop import segmented_loop
from keras_transformer.decoding.loop import sentence_limits
from keras_transformer.decoding.loop import written_rows
from keras_transformer.decoding.top_k import best_extensions
from keras_transformer.decoding.top_k import log_normalizer
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime.results import length_penalty


class BeamState(NamedTuple):
    """Beam search's loop state, for `rows` sentences still searched (all
    of them under XLA) of `batch` in the input, `k` beams and `width = 1 +
    max_length` positions (BOS first). Hypotheses are sorted, best first;
    an empty slot has log-probability or score `NEG_INF`."""

    step: tf.Tensor  # () int32: position of the last token in `alive_ids`
    alive_ids: tf.Tensor  # (rows, k, width) int32: live hypotheses
    alive_log_probs: tf.Tensor  # (rows, k) float32: their log-probabilities
    finished_ids: tf.Tensor  # (rows, k, width) int32: ended with EOS
    finished_scores: tf.Tensor  # (rows, k) float32: length-penalized scores
    parents: tf.Tensor  # (rows, k) int32: the cache row of each live one's parent
    cache: dict  # "per_hypothesis": rows * k, in parent order; "per_sentence": rows
    sentences: dict  # per row: `searched_sentences` and "max_penalty" (at the limit)
    results: dict  # "ids" (batch, num_results, width), "scores": of sentences that left


def _none_of(ids, excluded):
    """Bool, the shape of `ids`: which are none of the ints `excluded`."""
    return tf.logical_not(tf.reduce_any(tf.equal(ids[..., None], excluded), axis=-1))


def _reorder_hypotheses(cache, beams, beam_size, sentences=None):
    """The cache with its per-hypothesis rows reordered: row `(b, i)`
    becomes the old row `(sentences[b], beams[b, i])` (`sentences`
    default: every one, in order). The per-sentence part is left as it
    is."""
    if sentences is None:
        sentences = tf.range(tf.shape(beams)[0])
    rows = tf.reshape(sentences[:, None] * beam_size + beams, [-1])
    per_hypothesis = tf.nest.map_structure(
        lambda t: tf.gather(t, rows, axis=0), cache["per_hypothesis"]
    )
    return {**cache, "per_hypothesis": per_hypothesis}


def _results_of(state, leaving, num_results):
    """`state.results` with the best `num_results` finished hypotheses of
    the sentences of the `leaving` rows (int32 `(n,)`) written."""
    index = tf.gather(state.sentences["index"], leaving)
    best = {
        "ids": state.finished_ids[:, :num_results],
        "scores": state.finished_scores[:, :num_results],
    }
    return written_rows(state.results, index, rows_of(best, leaving))


def _without_done(state, done, beam_size, num_results):
    """`state` without the sentences that are `done` `(rows,)`, which go to
    its results, and with the others' cache reordered for their parents
    (one gather)."""
    leaving = tf.cast(tf.where(done)[:, 0], tf.int32)
    staying = tf.cast(tf.where(tf.logical_not(done))[:, 0], tf.int32)
    per_sentence = (
        state.alive_ids,
        state.alive_log_probs,
        state.finished_ids,
        state.finished_scores,
        state.parents,
    )
    cache = {**state.cache, "per_sentence": rows_of(state.cache["per_sentence"], staying)}
    parents = tf.gather(state.parents, staying)
    return BeamState(
        state.step,
        *rows_of(per_sentence, staying),
        cache=_reorder_hypotheses(cache, parents, beam_size, staying),
        sentences=rows_of(state.sentences, staying),
        results=_results_of(state, leaving, num_results),
    )


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
    banned=None,
    constraints=None,
    word_starts=None,
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
        banned: optional phrases no hypothesis may contain, as for
            `greedy_search`.
        constraints: optional int32 `(batch, constraints, length)`, in
            `banned`'s layout: phrases every output must contain, by
            dynamic beam allocation (`decoding.constrained`). An output
            that cannot meet them within its limit is the best of those
            that meet the most (`constrained.missing` counts them).
        word_starts: optional bool `(vocab,)`, with `constraints`: the
            tokens that begin a word (or are punctuation). A phrase then
            counts as met only where one of them, or EOS, follows it (so
            `"Hund"` is not met by `"Hunde"`); None: wherever it occurs.

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
            # Each sentence's rows `k` times, by a gather: ONNX runtimes
            # reshape a cache of zero positions wrongly (`tf.repeat`'s
            # reshape, whose 0 means "keep" in ONNX).
            "per_hypothesis": rows_of(cache["per_hypothesis"], tf.repeat(tf.range(batch_size), k)),
        },
        sentences={
            **searched_sentences(batch_size, limits, prefix, banned),
            **(
                {}
                if constraints is None
                else {"constraints": tf.convert_to_tensor(constraints, tf.int32)}
            ),
            "max_penalty": length_penalty(tf.cast(limits, tf.float32), alpha),
        },
        results={
            "ids": empty[:, :num_results],
            "scores": tf.fill([batch_size, num_results], NEG_INF),
        },
    )
    drop_done = drops_finished_rows()
    closing = None  # what may follow a constraint phrase (EOS too); None: anything
    if word_starts is not None and constraints is not None:
        closing = constrained.closing_tokens(word_starts, eos_id)
        # What a hypothesis ending with a phrase proposes next: no special token.
        specials = [eos_id, pad_id, bos_id]
        word_starts = tf.logical_and(word_starts, _none_of(tf.range(tf.size(closing)), specials))

    def sentence_done(state):
        reached_limit = state.step >= state.sentences["limits"]
        # alive and finished are sorted, best first
        best_possible = state.alive_log_probs[:, 0] / state.sentences["max_penalty"]
        worst_kept = state.finished_scores[:, num_results - 1]
        return tf.logical_or(reached_limit, worst_kept >= best_possible)

    def cond(end, state):
        return tf.logical_and(state.step < end, tf.logical_not(tf.reduce_all(sentence_done(state))))

    def arranged(state):
        """`state` with its cache reordered for the hypotheses chosen last
        step and, outside XLA, without the sentences that are done."""

        def reordered():
            return state._replace(cache=_reorder_hypotheses(state.cache, state.parents, k))

        if not drop_done:
            return reordered()
        done = sentence_done(state)
        return tf.cond(
            tf.reduce_any(done), lambda: _without_done(state, done, k, num_results), reordered
        )

    def _step(state):
        """One step from `state`, whose cache is already reordered for its
        `parents`: the reordering gather comes first in a step, so that XLA
        fuses it with `tokens_to_logits`'s write into one pass over the
        cache."""
        step, limits, prefix = state.step, state.sentences["limits"], state.sentences.get("prefix")
        rows = tf.shape(state.alive_log_probs)[0]
        tokens = tf.reshape(tf.gather(state.alive_ids, step, axis=2), [-1, 1])  # (rows * k, 1)
        logits, cache = tokens_to_logits(tokens, state.cache, step)
        logits = tf.cast(logits, tf.float32)
        vocab = logits.shape[-1] if logits.shape[-1] is not None else tf.shape(logits)[-1]
        forced, forced_token = forced_tokens(prefix, step)
        if (controls is not None and controls.active) or "banned" in state.sentences:
            banned = state.sentences.get("banned")
            logits = controlled(
                logits,
                controls,
                {} if banned is None else {"banned": tf.repeat(banned, k, axis=0)},
                tf.reshape(state.alive_ids, [rows * k, width]),
                step,
                tf.repeat(limits, k),
                eos_id,
                None if forced is None else tf.repeat(forced, k),
            )
        logits = tf.reshape(logits, [rows, k, vocab])
        only = only_token(logits, step, limits, eos_id, forced, forced_token)

        # The candidates: each live hypothesis extended by each token but PAD
        # and BOS, with log-probability alive + logits - normalizer. 2k of
        # them: enough for k live ones even if k of them end here.
        top_log_probs, top_indices = best_extensions(
            logits, state.alive_log_probs, 2 * k, only, never=(pad_id, bos_id)
        )  # (rows, 2k)
        top_beams, top_tokens = top_indices // vocab, top_indices % vocab
        if "constraints" in state.sentences:
            top = (top_log_probs, top_beams, top_tokens)
            return constrained_step(state, logits, only, top, cache)
        column = tf.equal(tf.range(width), step + 1)[None, None, :]
        top_ids = tf.where(
            column, top_tokens[:, :, None], tf.gather(state.alive_ids, top_beams, batch_dims=1)
        )  # (rows, 2k, width)
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
        return state._replace(
            step=step + 1,
            alive_ids=tf.gather(top_ids, live, batch_dims=1),
            alive_log_probs=live_log_probs,
            finished_ids=finished_ids,
            finished_scores=finished_scores,
            parents=tf.gather(top_beams, live, batch_dims=1),
            cache=cache,
        )

    def constrained_step(state, logits, only, top, cache):
        """`_step`'s choices under positive constraints (`constrained`):
        the best extensions and each hypothesis' proposals, live slots by
        dynamic beam allocation, endings only with every constraint met
        (but at the limit), finished ones ranked by constraints missed."""
        step, limits = state.step, state.sentences["limits"]
        phrases = state.sentences["constraints"]
        vocab = tf.shape(logits)[-1]
        active = tf.reduce_sum(tf.cast(tf.not_equal(phrases, NO_TOKEN), tf.int32), axis=[1, 2])
        log_probs = logits - log_normalizer(logits)[..., None]
        held = constrained.status(phrases, state.alive_ids, step, closing)
        allowed = tf.logical_not(only.where)
        proposed = [
            constrained.proposals(held, log_probs, state.alive_log_probs, allowed),
            constrained.own_proposals(
                held,
                log_probs,
                state.alive_log_probs,
                allowed,
                _none_of(tf.range(vocab), [pad_id, bos_id]),
                word_starts,
                eos_id,
            ),
        ]
        scores, beams, tokens = (tf.concat(parts, 1) for parts in zip(top, *proposed, strict=True))
        valid = constrained.first_of_each(beams * vocab + tokens, scores > NEG_INF / 2)
        counts, banks = constrained.met_counts(phrases, held, beams, tokens, closing)
        ends = tf.equal(tokens, eos_id)
        at_limit = (step + 1 >= limits)[:, None]
        # Counts include the rows of no constraint, always met.
        every = tf.shape(phrases)[1]
        may_end = tf.logical_or(tf.equal(counts, every), at_limit)
        scores = tf.where(tf.logical_and(valid, tf.logical_or(may_end, ~ends)), scores, NEG_INF)
        column = tf.equal(tf.range(width), step + 1)[None, None, :]
        ids = tf.where(
            column, tokens[:, :, None], tf.gather(state.alive_ids, beams, batch_dims=1)
        )  # (rows, candidates, width)
        live_log_probs, live = constrained.allocated(
            tf.where(ends, NEG_INF, scores), banks, active, k
        )
        # An ending counts if it ranks among the k best of its bank.
        in_bank = constrained.bank_ranks(scores, counts) < k
        new_scores = tf.where(
            tf.logical_and(ends, in_bank),
            scores / length_penalty(tf.cast(step + 1, tf.float32), alpha),
            NEG_INF,
        )
        new_scores = tf.where(sentence_done(state)[:, None], NEG_INF, new_scores)  # stopped
        all_scores = tf.concat([state.finished_scores, new_scores], 1)
        all_ids = tf.concat([state.finished_ids, ids], 1)
        met = tf.reduce_sum(
            tf.cast(constrained.contained(phrases, all_ids, step + 1, closing), tf.int32), axis=-1
        )
        missing = tf.where(all_scores > NEG_INF / 2, every - met, every + 1)  # empty: last
        keep = constrained.ranked(all_scores, missing, k)
        return state._replace(
            step=step + 1,
            alive_ids=tf.gather(ids, live, batch_dims=1),
            alive_log_probs=live_log_probs,
            finished_ids=tf.gather(all_ids, keep, batch_dims=1),
            finished_scores=tf.gather(all_scores, keep, batch_dims=1),
            parents=tf.gather(beams, live, batch_dims=1),
            cache=cache,
        )

    final = segmented_loop(
        cond, lambda state: _step(arranged(state)), initial, max_length, resize_cache, drop_done
    )
    results = _results_of(final, tf.range(tf.shape(final.parents)[0]), num_results)
    return results["ids"][:, :, 1:], results["scores"]
