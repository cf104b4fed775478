"""The loop every search shares: `tf.while_loop`s over the searches'
state, one per segment of steps with a cache just long enough for them,
rows of finished sentences dropped as they finish (where shapes may
change), and the one-token-at-a-time loop of greedy search and sampling."""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding.output_rules import forced_tokens
from keras_transformer.decoding.output_rules import never_chosen
from keras_transformer.decoding.output_rules import only_eos_at_limit
from keras_transformer.decoding.output_rules import only_forced
from keras_transformer.decoding.output_rules import outside_prefix
from keras_transformer.decoding.top_k import log_normalizer


def sentence_limits(batch_size, max_length, length_limits):
    """Per-sentence limits `(batch,)`, capped by the buffer `max_length`."""
    max_length = tf.convert_to_tensor(max_length, tf.int32)
    if length_limits is None:
        return tf.fill([batch_size], max_length)
    return tf.minimum(tf.cast(length_limits, tf.int32), max_length)


CACHE_SEGMENTS = 4
MIN_CACHE_GROWTH = 8


def segment_ends(max_length, resize_cache):
    """The steps at which the searches stop to grow the cache under XLA:
    `[max_length]` without `resize_cache`, else `CACHE_SEGMENTS` ends
    spread evenly up to `max_length` (Python ints when it is one, else
    tensors)."""
    if resize_cache is None:
        return [max_length]
    n = CACHE_SEGMENTS
    if isinstance(max_length, int):
        return [-(-max_length * (i + 1) // n) for i in range(n)]
    max_length = tf.convert_to_tensor(max_length, tf.int32)
    return [(max_length * (i + 1) + n - 1) // n for i in range(n)]


def next_cache_end(end, max_length):
    """Outside XLA, where a cache that holds `end` positions grows to when
    the steps reach it: by a quarter, at least `MIN_CACHE_GROWTH`
    positions, at most to `max_length`."""
    return tf.minimum(end + tf.maximum(MIN_CACHE_GROWTH, end // 4), max_length)


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
    """`cache` (two-part: `segmented_loop` checks it) with its
    per-hypothesis part holding `length` positions."""
    if resize_cache is None:
        return cache
    return {**cache, "per_hypothesis": resize_cache(cache["per_hypothesis"], length)}


def drops_finished_rows():
    """Whether the search being built may drop the rows of sentences that
    are done, so that later steps decode only the others: in a plain graph
    and eagerly, where a loop's shapes may change from step to step; not
    under XLA, which compiles a loop over fixed shapes only, nor for a
    converter that asks for fixed shapes (`_backend.tracing_fixed_shapes`)."""
    return not _backend.tracing_fixed_shapes()


def rows_of(tree, rows):
    """Every tensor of `tree` (the batch first) at `rows` only, in order."""
    return tf.nest.map_structure(lambda t: tf.gather(t, rows), tree)


def written_rows(results, rows, values):
    """`results` (trees of `(batch, ...)` tensors) with `values` (the same
    trees for some sentences) written at those sentences' `rows`."""
    return tf.nest.map_structure(
        lambda result, value: tf.tensor_scatter_nd_update(result, rows[:, None], value),
        results,
        values,
    )


def shapes_of(tree):
    """The static shapes of `tree`'s tensors."""
    return tf.nest.map_structure(lambda t: t.shape, tree)


def _invariants(state, any_cache_length=False):
    """The shape invariants of a search's `state` (a `TokenState` or
    `BeamState`) when it drops finished rows: every tensor's first axis
    free, but the step's and the results'; with `any_cache_length`, every
    axis of the per-hypothesis cache."""
    rows = tf.nest.map_structure(
        lambda t: tf.TensorShape([None]).concatenate(t.shape[1:]),
        state._replace(step=(), results=()),
    )
    if any_cache_length:
        per_hypothesis = tf.nest.map_structure(
            lambda t: tf.TensorShape([None] * t.shape.rank), state.cache["per_hypothesis"]
        )
        rows = rows._replace(cache={**rows.cache, "per_hypothesis": per_hypothesis})
    return rows._replace(step=state.step.shape, results=shapes_of(state.results))


def segmented_loop(cond, body, state, max_length, resize_cache, drop_rows):
    """`tf.while_loop`s of `body` over a search's `state` (a `TokenState` or
    `BeamState`), the cache grown as the steps go on (with
    `resize_cache`): `cond(end, state)` says whether to go on in a segment
    of steps that ends at step `end`, for which the cache holds `end`
    positions.

    Under XLA, which compiles fixed shapes, there are `CACHE_SEGMENTS`
    loops, one per segment. Otherwise (`drop_rows`: the state's rows may
    change in number from step to step) a loop over segments grows the
    cache by `next_cache_end` and runs the steps up to its end in an inner
    loop, so that no step attends to, writes or moves many more positions
    than it has.

    With several segments, `body` is a `tf.function` that their loops
    share: its graph is traced once or twice (then with the cache length
    relaxed) instead of once per segment."""
    if resize_cache is not None:
        check_two_part_cache(state.cache, "`resize_cache`")
    # A cache of NumPy arrays (an eager caller's) would pass through the
    # steps as arrays, which have no static shape to keep.
    state = tf.nest.map_structure(tf.convert_to_tensor, state)
    step = body
    if resize_cache is not None:
        step = tf.function(body, reduce_retracing=True, autograph=False)

    def shaped_step(state):
        # Gathers and shared traces forget static shapes (a static batch
        # size included) that the loop requires to stay the same.
        new_state = step(state)
        shapes = _invariants(state) if drop_rows else shapes_of(state)
        tf.nest.map_structure(lambda t, shape: t.set_shape(shape), new_state, shapes)
        return (new_state,)

    def segment(end, state):
        state = state._replace(cache=resized(state.cache, resize_cache, end))
        (state,) = tf.while_loop(
            lambda state: cond(end, state),
            shaped_step,
            (state,),
            shape_invariants=(_invariants(state),) if drop_rows else None,
        )
        return state

    if resize_cache is None or not drop_rows:
        for end in segment_ends(max_length, resize_cache):
            state = segment(end, state)
        return state

    def grown(end, state):
        end = next_cache_end(end, max_length)
        return end, segment(end, state)

    _, state = tf.while_loop(
        lambda end, state: cond(max_length, state),
        grown,
        (tf.constant(0), state),
        shape_invariants=(tf.TensorShape([]), _invariants(state, any_cache_length=True)),
    )
    return state


def searched_sentences(batch_size, limits, prefix, banned=None):
    """The per-sentence inputs of a search, which leave with their
    sentence's rows: `{"index"` (the sentence's row in the input batch)`,
    "limits"`, and `"prefix"` and `"banned"` (`BannedPhrases.rows()`) if
    there are some`}`."""
    sentences = {"index": tf.range(batch_size), "limits": limits}
    if prefix is not None:
        sentences["prefix"] = prefix
    if banned is not None:
        sentences["banned"] = banned.rows()
    return sentences


def controlled(logits, controls, banned, ids, step, limits, eos_id, forced):
    """`logits` `(rows, vocab)` under the output `controls` and the rows'
    `banned` phrases (`BannedPhrases`, one row per row of `logits`, or
    None), except on rows `forced` through a prefix; `ids` `(rows, width)`."""
    rule = logits
    if controls is not None and controls.active:
        rule = controls.apply(rule, ids, step, limits, eos_id)
    if banned is not None:
        rule = banned.without_banned(rule, ids, step)
    return rule if rule is logits else outside_prefix(forced, rule, logits)


class TokenState(NamedTuple):
    """The loop state of greedy search and sampling: `rows` sentences still
    decoded (all of them under XLA), of `batch` in the input, and `width =
    1 + max_length` positions (BOS first)."""

    step: tf.Tensor  # () int32: position of the last token in `sequences`
    sequences: tf.Tensor  # (rows, width) int32: BOS, the tokens so far, padding
    finished: tf.Tensor  # (rows,) bool: ended with EOS
    scores: tf.Tensor  # (rows,) float32: log-probabilities of the tokens so far
    token_scores: tf.Tensor  # (rows, width) float32: each token's, 0 at BOS and padding
    cache: object  # the cache, `rows` first
    sentences: dict  # per row, from `searched_sentences`
    # Of rows that left: "sequences" (batch, width), "scores" (batch,),
    # "token_scores" (batch, width), and "attention" (batch, width - 1,
    # source_len) for a request that aligns.
    results: dict


def aligned_rows(request, cache, length):
    """The request's `alignment` of `cache`'s per-hypothesis part, `{"attention":
    (rows, length, source_len)}` (the cache's positions, zeros after them),
    or `{}` for a request that aligns nothing."""
    if request.alignment is None:
        return {}
    check_two_part_cache(cache, "`alignment`")
    attention = request.alignment(cache["per_hypothesis"])
    missing = length - tf.shape(attention)[1]
    return {"attention": tf.pad(attention, [[0, 0], [0, missing], [0, 0]])}


def _rows_left(state, leaving, request):
    """`state.results` with the sentences of the `leaving` rows (int32
    `(n,)`) written."""
    index = tf.gather(state.sentences["index"], leaving)
    outputs = {
        "sequences": state.sequences,
        "scores": state.scores,
        "token_scores": state.token_scores,
        **aligned_rows(request, state.cache, tf.shape(state.sequences)[1] - 1),
    }
    return written_rows(state.results, index, rows_of(outputs, leaving))


def _without_finished(state, request):
    """`state` without the rows of finished sentences, which go to its
    results."""
    leaving = tf.cast(tf.where(state.finished)[:, 0], tf.int32)
    staying = tf.cast(tf.where(tf.logical_not(state.finished))[:, 0], tf.int32)
    kept = rows_of(state._replace(step=(), results=()), staying)
    return kept._replace(step=state.step, results=_rows_left(state, leaving, request))


def one_token_at_a_time(request, pick):
    """The loop of greedy search and sampling over a `SearchRequest`:
    `pick(logits, step, sentences)` chooses the next token `(rows,)` of
    each row from its logits `(rows, vocab)` (after the output controls
    and banned phrases, and the rules of `output_rules`: never PAD or BOS,
    only EOS at the limit, a forced prefix), `sentences` `(rows,)` being
    each row's sentence in the batch; returns `{"ids" (batch, max_length),
    "log_probs" (batch,), "token_scores" (batch, max_length)}` (each
    token's log-probability), and `"attention"` `(batch, max_length,
    source_len)` where the request aligns (its `alignment` of each
    position; not zeroed after EOS).

    Outside XLA, the rows of finished sentences are dropped as they finish
    (with the cache's, every tensor of which must have the batch first)."""
    batch_size, max_length = request.batch_size, request.max_length
    bos_id, eos_id, pad_id = request.bos_id, request.eos_id, request.pad_id
    prefix, limits = request.prefix_and_limits()
    sequences = tf.concat(
        [tf.fill([batch_size, 1], bos_id), tf.fill([batch_size, max_length], pad_id)], 1
    )  # (batch, BOS + max_length tokens)
    drop_finished = drops_finished_rows()

    def cond(end, state):
        return tf.logical_and(state.step < end, tf.logical_not(tf.reduce_all(state.finished)))

    def body(state):
        if drop_finished:
            state = tf.cond(
                tf.reduce_any(state.finished),
                lambda: _without_finished(state, request),
                lambda: state,
            )
        step, sentences = state.step, state.sentences
        # A gather (not a slice at a tensor offset) keeps the shape static
        # under XLA.
        tokens = tf.gather(state.sequences, step, axis=1)[:, None]  # (rows, 1)
        logits, cache = request.tokens_to_logits(tokens, state.cache, step)
        logits = tf.cast(logits, tf.float32)
        forced, forced_token = forced_tokens(sentences.get("prefix"), step)
        logits = controlled(
            logits,
            request.controls,
            request.banned_rows(sentences),
            state.sequences,
            step,
            sentences["limits"],
            eos_id,
            forced,
        )
        normalizer = log_normalizer(logits)
        logits = never_chosen(logits, (pad_id, bos_id))
        logits = only_eos_at_limit(logits, step, sentences["limits"], eos_id)
        logits = only_forced(logits, forced, forced_token)
        next_token = pick(logits, step, sentences["index"])
        # Its log-probability.
        next_score = tf.gather(logits, next_token, batch_dims=1) - normalizer
        next_token = tf.where(state.finished, pad_id, next_token)
        next_score = tf.where(state.finished, 0.0, next_score)
        column = tf.equal(tf.range(tf.shape(state.sequences)[1]), step + 1)[None, :]
        return state._replace(
            step=step + 1,
            sequences=tf.where(column, next_token[:, None], state.sequences),
            finished=tf.logical_or(state.finished, tf.equal(next_token, eos_id)),
            scores=state.scores + next_score,
            token_scores=tf.where(column, next_score[:, None], state.token_scores),
            cache=cache,
        )

    token_scores = tf.zeros(tf.shape(sequences), tf.float32)
    aligned = aligned_rows(request, request.cache, max_length)
    initial = TokenState(
        step=tf.constant(0),
        sequences=sequences,
        finished=tf.zeros([batch_size], tf.bool),
        scores=tf.zeros([batch_size], tf.float32),
        token_scores=token_scores,
        cache=request.cache,
        sentences=request.sentences(limits, prefix),
        results={
            "sequences": sequences,
            "scores": tf.zeros([batch_size], tf.float32),
            "token_scores": token_scores,
            **{name: tf.zeros_like(t) for name, t in aligned.items()},
        },
    )
    final = segmented_loop(cond, body, initial, max_length, request.resize_cache, drop_finished)
    results = _rows_left(final, tf.range(tf.shape(final.finished)[0]), request)
    return {
        "ids": results.pop("sequences")[:, 1:],
        "log_probs": results.pop("scores"),
        "token_scores": results.pop("token_scores")[:, 1:],
        **results,
    }
