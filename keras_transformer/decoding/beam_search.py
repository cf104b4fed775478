"""Beam search with GNMT's length penalty (Vaswani et al., 2017, §6.1)."""

import dataclasses
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.loop import aligned_rows
from keras_transformer.decoding.loop import check_two_part_cache
from keras_transformer.decoding.loop import controlled
from keras_transformer.decoding.loop import drops_finished_rows
from keras_transformer.decoding.loop import rows_of
from keras_transformer.decoding.loop import segmented_loop
from keras_transformer.decoding.loop import written_rows
from keras_transformer.decoding.output_rules import forced_tokens
from keras_transformer.decoding.output_rules import only_token
from keras_transformer.decoding.search import SearchStrategy
from keras_transformer.decoding.search import aligned
from keras_transformer.decoding.search import require_alignment
from keras_transformer.decoding.top_k import best_extensions
from keras_transformer_runtime.runners.results import length_penalty


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
    # For a request that aligns (else {}): "alive_token_scores" and
    # "finished_token_scores" (rows, k, width) float32, each token's
    # log-probability, and "attention" (rows, num_results, width - 1,
    # source_len): the best finished ones' (`_traced`).
    aligned: dict
    cache: dict  # "per_hypothesis": rows * k, in parent order; "per_sentence": rows
    sentences: dict  # per row: `searched_sentences` and "max_penalty" (at the limit)
    # Of sentences that left: "ids" (batch, num_results, width), "scores",
    # and for a request that aligns "token_scores" (as "ids") and "attention".
    results: dict


class Choice(NamedTuple):
    """How a step's new hypotheses came from its candidates (each a live
    hypothesis extended by one token): what `_traced` follows."""

    beams: tf.Tensor  # (rows, candidates) int32: each candidate's parent
    log_probs: tf.Tensor  # (rows, candidates) float32: each candidate's log-probability
    keep: tf.Tensor  # (rows, k) int32: each finished one, in [old finished, candidates]


def _traced(state, new, choice, attention, num_results):
    """`new` (the next state, from `state`) with its `aligned` part: the
    hypotheses' token scores, and the best finished ones' attention from
    `attention` `(rows, k, positions, source_len)` (each live hypothesis'
    at this step, by parent), following `choice`."""
    k = tf.shape(state.alive_log_probs)[1]
    width = tf.shape(state.alive_ids)[2]
    column = tf.equal(tf.range(width), state.step + 1)[None, None, :]

    def extended(beams, log_probs):
        """The token scores of hypotheses from `beams`, extended by a
        token of `log_probs` (their new log-probabilities)."""
        token = log_probs - tf.gather(state.alive_log_probs, beams, batch_dims=1)
        before = tf.gather(state.aligned["alive_token_scores"], beams, batch_dims=1)
        return tf.where(column, token[:, :, None], before)

    candidates = extended(choice.beams, choice.log_probs)
    finished = tf.concat([state.aligned["finished_token_scores"], candidates], 1)
    # Old finished ones keep their order, so the best `num_results` come
    # from the old best `num_results` or from this step's candidates.
    source = choice.keep[:, :num_results]
    new_ones = source >= k
    parents = tf.gather(choice.beams, tf.maximum(source - k, 0), batch_dims=1)
    ended = tf.gather(attention, parents, batch_dims=1)
    ended = tf.pad(ended, [[0, 0], [0, 0], [0, width - 1 - tf.shape(ended)[2]], [0, 0]])
    kept = tf.gather(state.aligned["attention"], tf.minimum(source, num_results - 1), batch_dims=1)
    return new._replace(
        aligned={
            "alive_token_scores": extended(new.parents, new.alive_log_probs),
            "finished_token_scores": tf.gather(finished, choice.keep, batch_dims=1),
            "attention": tf.where(new_ones[:, :, None, None], ended, kept),
        }
    )


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
    if state.aligned:
        best["token_scores"] = state.aligned["finished_token_scores"][:, :num_results]
        best["attention"] = state.aligned["attention"]
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
        state.aligned,
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class BeamSearch(SearchStrategy):
    """Beam search with GNMT's length penalty (§6.1: beam 4, alpha 0.6).

    Keeps `beam_size` live hypotheses per sentence; a hypothesis that emits
    EOS is finished with score `log P / ((5 + length) / 6)^alpha`. A
    sentence stops when it hits its length limit, or when it has
    `num_results` finished hypotheses and no live one can still beat the
    worst of them (log-probabilities only fall, and the penalty is largest
    at the limit). The loop stops when every sentence has stopped. A beam
    of 1 is exactly greedy search.

    The request's `tokens_to_logits` sees `batch_size * beam_size` rows,
    the beams of a sentence together; its cache has `"per_hypothesis"`
    (repeated per beam, reordered with the beams) and `"per_sentence"`
    (left as it is); `controls` and `banned` apply to every hypothesis
    (the scores are then under the controlled distribution).

    Attributes:
        beam_size: hypotheses kept per sentence, 4 in the paper.
        alpha: length-penalty exponent, 0.6 in the paper (0: none).
        num_results: how many finished hypotheses to return, best first
            (at most `beam_size`).

    Example:

    >>> ids, scores = BeamSearch(beam_size=4, num_results=2).search(request)
    >>> best = ids[:, 0]
    """

    beam_size: int = 4
    alpha: float = 0.6
    num_results: int = 1

    def __post_init__(self):
        if not 1 <= self.num_results <= self.beam_size:
            raise ValueError(
                f"`num_results` must be in [1, beam_size={self.beam_size}]. "
                f"Received: num_results={self.num_results}"
            )

    def outputs(self, request, seed=None):
        return self.search(request)

    def search(self, request):
        """`(ids, scores)`: int32 `(batch, num_results, max_length)` and
        float32 length-penalized scores `(batch, num_results)`."""
        results = self._results(request)
        return results["ids"][:, :, 1:], results["scores"]

    def aligned_outputs(self, request, seed=None):
        require_alignment(request, "aligned_outputs")
        results = self._results(request)
        return aligned(
            results["ids"][:, :, 1:],
            results["scores"],
            results["token_scores"][:, :, 1:],
            results["attention"],
            request.pad_id,
        )

    def _results(self, request):
        """The final `BeamState.results`, of every sentence."""
        check_two_part_cache(request.cache, "beam_search")
        drop_done = drops_finished_rows()

        def cond(end, state):
            going = tf.logical_not(tf.reduce_all(self._sentence_done(state)))
            return tf.logical_and(state.step < end, going)

        final = segmented_loop(
            cond,
            lambda state: self._step(request, self._arranged(state, drop_done)),
            self._initial(request),
            request.max_length,
            request.resize_cache,
            drop_done,
        )
        return _results_of(final, tf.range(tf.shape(final.parents)[0]), self.num_results)

    def _initial(self, request):
        batch_size, k, pad_id = request.batch_size, self.beam_size, request.pad_id
        prefix, limits = request.prefix_and_limits()
        width = tf.convert_to_tensor(request.max_length) + 1  # BOS + tokens
        empty = tf.fill([batch_size, k, width], pad_id)
        cache = request.cache
        aligned, results = {}, {}
        if request.alignment is not None:
            no_scores = tf.zeros([batch_size, k, width], tf.float32)
            attention = tf.zeros_like(aligned_rows(request, cache, width - 1)["attention"])
            attention = tf.tile(attention[:, None], [1, self.num_results, 1, 1])
            aligned = {
                "alive_token_scores": no_scores,
                "finished_token_scores": no_scores,
                "attention": attention,
            }
            results = {"token_scores": no_scores[:, : self.num_results], "attention": attention}
        return BeamState(
            step=tf.constant(0),
            alive_ids=tf.concat([tf.fill([batch_size, k, 1], request.bos_id), empty[:, :, 1:]], 2),
            # Only the first beam is live at the start; the others are copies.
            alive_log_probs=tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch_size, 1]),
            finished_ids=empty,
            finished_scores=tf.fill([batch_size, k], NEG_INF),
            parents=tf.tile(tf.range(k)[None, :], [batch_size, 1]),
            aligned=aligned,
            cache={
                **cache,
                # Each sentence's rows `k` times, by a gather: ONNX runtimes
                # reshape a cache of zero positions wrongly (`tf.repeat`'s
                # reshape, whose 0 means "keep" in ONNX).
                "per_hypothesis": rows_of(
                    cache["per_hypothesis"], tf.repeat(tf.range(batch_size), k)
                ),
            },
            sentences={
                **request.sentences(limits, prefix),
                **self._own_sentence_inputs(),
                "max_penalty": length_penalty(tf.cast(limits, tf.float32), self.alpha),
            },
            results={
                "ids": empty[:, : self.num_results],
                "scores": tf.fill([batch_size, self.num_results], NEG_INF),
                **results,
            },
        )

    def _own_sentence_inputs(self):
        """Per-sentence inputs of this kind of beam search, besides the
        request's: none."""
        return {}

    def _sentence_done(self, state):
        reached_limit = state.step >= state.sentences["limits"]
        # alive and finished are sorted, best first
        best_possible = state.alive_log_probs[:, 0] / state.sentences["max_penalty"]
        worst_kept = state.finished_scores[:, self.num_results - 1]
        return tf.logical_or(reached_limit, worst_kept >= best_possible)

    def _arranged(self, state, drop_done):
        """`state` with its cache reordered for the hypotheses chosen last
        step and, with `drop_done` (outside XLA), without the sentences
        that are done."""
        k = self.beam_size

        def reordered():
            return state._replace(cache=_reorder_hypotheses(state.cache, state.parents, k))

        if not drop_done:
            return reordered()
        done = self._sentence_done(state)
        return tf.cond(
            tf.reduce_any(done),
            lambda: _without_done(state, done, k, self.num_results),
            reordered,
        )

    def _step(self, request, state):
        """One step from `state`, whose cache is already reordered for its
        `parents`: the reordering gather comes first in a step, so that XLA
        fuses it with `tokens_to_logits`'s write into one pass over the
        cache."""
        k, eos_id = self.beam_size, request.eos_id
        step, limits, prefix = state.step, state.sentences["limits"], state.sentences.get("prefix")
        rows, width = tf.shape(state.alive_log_probs)[0], tf.shape(state.alive_ids)[2]
        tokens = tf.reshape(tf.gather(state.alive_ids, step, axis=2), [-1, 1])  # (rows * k, 1)
        logits, cache = request.tokens_to_logits(tokens, state.cache, step)
        logits = tf.cast(logits, tf.float32)
        vocab = logits.shape[-1] if logits.shape[-1] is not None else tf.shape(logits)[-1]
        forced, forced_token = forced_tokens(prefix, step)
        if request.controlled():
            banned = request.banned_rows(state.sentences)
            logits = controlled(
                logits,
                request.controls,
                None if banned is None else banned.repeated(k),
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
            logits, state.alive_log_probs, 2 * k, only, never=(request.pad_id, request.bos_id)
        )  # (rows, 2k)
        top = (top_log_probs, top_indices // vocab, top_indices % vocab)
        new, choice = self._chosen(request, state, logits, only, top)
        if request.alignment is not None:
            per_row = request.alignment(cache["per_hypothesis"])  # (rows * k, positions, source)
            attention = tf.reshape(per_row, [rows, k, tf.shape(per_row)[1], tf.shape(per_row)[2]])
            new = _traced(state, new, choice, attention, self.num_results)
        return new._replace(step=step + 1, cache=cache)

    def _chosen(self, request, state, logits, only, top):
        """The next live and finished hypotheses from the `top` `(log_probs,
        beams, tokens)` `(rows, 2k)` extensions (`logits` and `only` are
        for the kinds of beam search that look further), and the `Choice`
        that made them."""
        k, step = self.beam_size, state.step
        top_log_probs, top_beams, top_tokens = top
        width = tf.shape(state.alive_ids)[2]
        column = tf.equal(tf.range(width), step + 1)[None, None, :]
        top_ids = tf.where(
            column, top_tokens[:, :, None], tf.gather(state.alive_ids, top_beams, batch_dims=1)
        )  # (rows, 2k, width)
        ends = tf.equal(top_tokens, request.eos_id)

        # The k best candidates that go on.
        live_log_probs, live = tf.math.top_k(tf.where(ends, NEG_INF, top_log_probs), k)

        # The k best finished hypotheses so far, including those ending here.
        # An ending counts only if it ranks among the k best candidates, so
        # that a beam of 1 is exactly greedy search.
        in_beam = tf.range(2 * k)[None, :] < k
        new_scores = self._finished_scores(state, top_log_probs, tf.logical_and(ends, in_beam))
        finished_scores, keep = tf.math.top_k(tf.concat([state.finished_scores, new_scores], 1), k)
        finished_ids = tf.gather(tf.concat([state.finished_ids, top_ids], 1), keep, batch_dims=1)
        new = state._replace(
            alive_ids=tf.gather(top_ids, live, batch_dims=1),
            alive_log_probs=live_log_probs,
            finished_ids=finished_ids,
            finished_scores=finished_scores,
            parents=tf.gather(top_beams, live, batch_dims=1),
        )
        return new, Choice(top_beams, top_log_probs, keep)

    def _finished_scores(self, state, log_probs, ending):
        """The length-penalized scores of the candidates `ending` here
        (`NEG_INF` for the others, and for sentences already done)."""
        penalty = length_penalty(tf.cast(state.step + 1, tf.float32), self.alpha)
        scores = tf.where(ending, log_probs / penalty, NEG_INF)
        return tf.where(self._sentence_done(state)[:, None], NEG_INF, scores)
