"""Beam search whose outputs contain given phrases: the terminology step
(`decoding.terminology`'s dynamic beam allocation) in `BeamSearch`'s loop."""

import dataclasses
from typing import Any

import tensorflow as tf

from keras_transformer.decoding import terminology
from keras_transformer.decoding.beam_search import BeamSearch
from keras_transformer.decoding.beam_search import Choice
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.phrases import NO_TOKEN
from keras_transformer.decoding.top_k import log_normalizer


def _none_of(ids, excluded):
    """Bool, the shape of `ids`: which are none of the ints `excluded`."""
    return tf.logical_not(tf.reduce_any(tf.equal(ids[..., None], excluded), axis=-1))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConstrainedBeamSearch(BeamSearch):
    """`BeamSearch` whose every output contains its sentence's phrases, by
    dynamic beam allocation (Post & Vilar, 2018; `decoding.terminology`).
    An output that cannot meet them within its limit is the best of those
    that meet the most (`terminology.missing` counts them). With
    `beam_size=1` it is still a beam search: greedy search cannot look for
    phrases.

    Attributes:
        constraints: int32 `(batch, constraints, length)`, in the layout of
            `decoding.phrases.right_aligned`: phrases every output
            must contain.
        word_starts: optional bool `(vocab,)`: the tokens that begin a word
            (or are punctuation). A phrase then counts as met only where one
            of them, or EOS, follows it (so `"Hund"` is not met by
            `"Hunde"`); None: wherever it occurs.
        beam_size, alpha, num_results: as for `BeamSearch`.

    Example:

    >>> phrases = right_aligned([[[5, 6]], [[7]]])
    >>> ids, scores = ConstrainedBeamSearch(constraints=phrases).search(request)
    """

    constraints: Any
    word_starts: Any = None

    def _own_sentence_inputs(self):
        return {"constraints": tf.convert_to_tensor(self.constraints, tf.int32)}

    def _boundaries(self, request):
        """`(closing, proposable)`: what may follow a phrase for it to be
        met (word starts and EOS; None: anything), and the word starts a
        hypothesis ending with a phrase proposes next (no special token;
        None without `word_starts`)."""
        if self.word_starts is None:
            return None, None
        closing = terminology.closing_tokens(self.word_starts, request.eos_id)
        specials = [request.eos_id, request.pad_id, request.bos_id]
        proposable = tf.logical_and(
            tf.convert_to_tensor(self.word_starts, tf.bool),
            _none_of(tf.range(tf.size(closing)), specials),
        )
        return closing, proposable

    def _chosen(self, request, state, logits, only, top):
        """`BeamSearch._chosen` under the constraints: the best extensions
        and each hypothesis' proposals, live slots by dynamic beam
        allocation, endings only with every constraint met (but at the
        limit), finished ones ranked by constraints missed (old ones keep
        their order, as `_traced` needs), and the `Choice`."""
        k, step, eos_id = self.beam_size, state.step, request.eos_id
        closing, word_starts = self._boundaries(request)
        limits, phrases = state.sentences["limits"], state.sentences["constraints"]
        vocab = tf.shape(logits)[-1]
        active = tf.reduce_sum(tf.cast(tf.not_equal(phrases, NO_TOKEN), tf.int32), axis=[1, 2])
        log_probs = logits - log_normalizer(logits)[..., None]
        held = terminology.status(phrases, state.alive_ids, step, closing)
        allowed = tf.logical_not(only.where)
        choosable = _none_of(tf.range(vocab), [request.pad_id, request.bos_id])
        alive = state.alive_log_probs
        proposed = [
            terminology.proposals(held, log_probs, alive, allowed),
            terminology.own_proposals(
                held, log_probs, alive, allowed, choosable, word_starts, eos_id
            ),
        ]
        scores, beams, tokens = (tf.concat(parts, 1) for parts in zip(top, *proposed, strict=True))
        extended = scores  # each candidate's log-probability
        valid = terminology.first_of_each(beams * vocab + tokens, scores > NEG_INF / 2)
        counts, banks = terminology.met_counts(phrases, held, beams, tokens, closing)
        ends = tf.equal(tokens, eos_id)
        at_limit = (step + 1 >= limits)[:, None]
        # Counts include the rows of no constraint, always met.
        every = tf.shape(phrases)[1]
        may_end = tf.logical_or(tf.equal(counts, every), at_limit)
        scores = tf.where(tf.logical_and(valid, tf.logical_or(may_end, ~ends)), scores, NEG_INF)
        column = tf.equal(tf.range(tf.shape(state.alive_ids)[2]), step + 1)[None, None, :]
        ids = tf.where(
            column, tokens[:, :, None], tf.gather(state.alive_ids, beams, batch_dims=1)
        )  # (rows, candidates, width)
        live_log_probs, live = terminology.allocated(
            tf.where(ends, NEG_INF, scores), banks, active, k
        )
        # An ending counts if it ranks among the k best of its bank.
        in_bank = terminology.bank_ranks(scores, counts) < k
        new_scores = self._finished_scores(state, scores, tf.logical_and(ends, in_bank))
        all_scores = tf.concat([state.finished_scores, new_scores], 1)
        all_ids = tf.concat([state.finished_ids, ids], 1)
        contained = terminology.contained(phrases, all_ids, step + 1, closing)
        met = tf.reduce_sum(tf.cast(contained, tf.int32), axis=-1)
        missing = tf.where(all_scores > NEG_INF / 2, every - met, every + 1)  # empty: last
        keep = terminology.ranked(all_scores, missing, k)
        new = state._replace(
            alive_ids=tf.gather(ids, live, batch_dims=1),
            alive_log_probs=live_log_probs,
            finished_ids=tf.gather(all_ids, keep, batch_dims=1),
            finished_scores=tf.gather(all_scores, keep, batch_dims=1),
            parents=tf.gather(beams, live, batch_dims=1),
        )
        return new, Choice(beams, extended, keep)
