"""Greedy search, beam search and sampling over a next-token function and
a cache.

All three know nothing of the model. They call

    logits, cache = tokens_to_logits(token_ids, cache, index)

with `token_ids` `(rows, 1)` int32 (the token at position `index`) and
`index` a scalar int32; it returns float32 `logits` `(rows, vocab)` for
position `index + 1` and the updated cache. The cache is a dict of two
parts (what `Transformer.init_cache` returns), each a nest of tensors with
the batch as their first axis:

* `"per_hypothesis"`: the state of one output prefix (for a Transformer,
  the self-attention keys and values). Beam search repeats it `beam_size`
  times per sentence (the beams of a sentence on consecutive rows) and
  reorders it whenever it reorders its hypotheses.
* `"per_sentence"`: what depends on the source only (the encoder keys and
  values, the source mask). It keeps one row per sentence and is never
  reordered; `tokens_to_logits` lets the rows of a sentence share it.

Greedy search and sampling pass the cache through as it is. Everything
runs in `tf.while_loop`s over fixed-shape state, so the searches trace
once per input signature, run under `tf.function(jit_compile=True)`, and
export in a SavedModel. Given `resize_cache` (for a Transformer,
`model.resize_cache`), they run `CACHE_SEGMENTS` loops, each over a
quarter of the steps with a cache just long enough for them: a step's
cost grows with the cache it attends to, writes and (beam search)
reorders, and most outputs end long before the buffer does.

Outputs never include BOS; a hypothesis ends with EOS and is padded with
`pad_id` after it. The output buffer holds `max_length` tokens; every
sentence may also have its own, smaller limit (`length_limits`, e.g. its
source length + 50); when it is reached, only EOS may follow.
"""

import math
from typing import NamedTuple

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime.results import length_penalty
from keras_transformer_runtime.settings import check_sampling


def _limits(batch_size, max_length, length_limits):
    """Per-sentence limits `(batch,)`, capped by the buffer `max_length`."""
    max_length = tf.convert_to_tensor(max_length, tf.int32)
    if length_limits is None:
        return tf.fill([batch_size], max_length)
    return tf.minimum(tf.cast(length_limits, tf.int32), max_length)


CACHE_SEGMENTS = 4


def _segment_ends(max_length, resize_cache):
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


def _resized(cache, resize_cache, length):
    """`cache` with its per-hypothesis part holding `length` positions."""
    if resize_cache is None:
        return cache
    _check_two_part_cache(cache, "`resize_cache`")
    return {**cache, "per_hypothesis": resize_cache(cache["per_hypothesis"], length)}


def _segmented_loop(cond, body, loop_vars, ends, resize):
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


def _log_normalizer(logits):
    """`log Σ_v exp(logits[..., v])`, so that the log-probabilities are
    `logits - normalizer[..., None]`, without writing them out: one pass
    for the maximum and one for the sum."""
    top = tf.reduce_max(logits, axis=-1, keepdims=True)
    return top[..., 0] + tf.math.log(tf.reduce_sum(tf.exp(logits - top), axis=-1))


def _chunk_size(vocab):
    """A chunk size for `_best_extensions`: the divisor of `vocab` nearest to
    √vocab, if one lies within a factor 2 of it; otherwise √vocab rounded
    up (the last chunk is then padded)."""
    root = math.sqrt(vocab)
    divisors = [d for d in range(max(1, int(root / 2)), int(2 * root) + 1) if vocab % d == 0]
    return min(divisors, key=lambda d: abs(d - root)) if divisors else math.ceil(root)


class _OnlyToken(NamedTuple):
    """Per sentence, at most one allowed token: where `where` `(batch,)`,
    every logit but `token`'s `(batch,)` counts as `NEG_INF`, and
    `token`'s own as `value` `(batch, beams)` (at least `NEG_INF`)."""

    where: tf.Tensor
    token: tf.Tensor
    value: tf.Tensor


def _only_token(logits, step, limits, eos_id, forced, forced_token):
    """What `_only_eos_at_limit` and then `_only_forced` would do to
    `logits` `(batch, beams, vocab)`, as an `_OnlyToken`: at the limit only
    EOS keeps its logit; inside a prefix only the forced token does, and
    only if it is also allowed at the limit."""
    at_limit = tf.equal(step + 1, limits)
    eos = tf.fill(tf.shape(at_limit), eos_id)
    if forced is None:
        where, token, clash = at_limit, eos, tf.zeros_like(at_limit)
    else:
        where = tf.logical_or(at_limit, forced)
        token = tf.where(forced, forced_token, eos)
        clash = tf.logical_and(tf.logical_and(at_limit, forced), tf.not_equal(forced_token, eos))
    # A logit below NEG_INF counts as NEG_INF: then the token's chunk
    # maximum is its value, whatever else the chunk holds.
    value = tf.maximum(tf.gather(logits, token, axis=2, batch_dims=1), NEG_INF)  # (batch, beams)
    return _OnlyToken(where, token, tf.where(clash[:, None], NEG_INF, value))


def _masked(logits, only):
    """`logits` `(batch, beams, vocab)` with `only` applied in full."""
    vocab = tf.range(tf.shape(logits)[-1])
    other = tf.logical_and(only.where[:, None], tf.not_equal(vocab, only.token[:, None]))
    logits = tf.where(other[:, None, :], NEG_INF, logits)
    is_token = tf.logical_and(only.where[:, None], tf.equal(vocab, only.token[:, None]))
    return tf.where(is_token[:, None, :], only.value[:, :, None], logits)


def _full_top_k(logits, offsets, count, only=None):
    """`_Candidates.best` by a top-k over every flattened candidate."""
    logits = logits if only is None else _masked(logits, only)
    candidates = tf.reshape(offsets[:, :, None] + logits, [tf.shape(logits)[0], -1])
    return tf.math.top_k(candidates, count)


class _Candidates:
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
    one token per sentence (`_OnlyToken`) applies to the chunk maxima and
    to the chosen chunks only.
    """

    def __init__(self, logits):
        self.logits = logits
        self.beams, self.vocab = logits.shape[1], logits.shape[2]
        self.size = _chunk_size(self.vocab)
        self.chunks = -(-self.vocab // self.size)
        if self.chunks * self.size != self.vocab:  # padding: never chosen
            padding = [[0, 0], [0, 0], [0, self.chunks * self.size - self.vocab]]
            logits = tf.pad(logits, padding, constant_values=-math.inf)
        # Chunk c = beam * chunks + m holds tokens m * size .. (m + 1) * size - 1.
        self.chunked = tf.reshape(logits, [tf.shape(logits)[0], -1, self.size])
        self.maxima = tf.reduce_max(self.chunked, axis=-1)  # (batch, beams * chunks)

    def log_normalizer(self):
        """`log Σ_v exp(logits[..., v])` `(batch, beams)`, as
        `_log_normalizer` computes it, its maximum from the chunk maxima."""
        batch = tf.shape(self.logits)[0]
        top = tf.reduce_max(tf.reshape(self.maxima, [batch, self.beams, self.chunks]), -1)
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
            return _full_top_k(self.logits, offsets, count, only)
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


def _best_extensions(logits, alive_log_probs, count, only):
    """The `count` most likely extensions of each sentence's beams:
    `(log_probs, flat_indices)` `(batch, count)`, the flat index being
    `beam * vocab + token`, over `logits` `(batch, beams, vocab)` of beams
    with log-probabilities `alive_log_probs` `(batch, beams)`, under the
    `_OnlyToken` rule `only` (the normalizer is taken before it)."""
    if logits.shape[2] is None:  # the vocabulary's size unknown while tracing
        return _full_top_k(logits, alive_log_probs - _log_normalizer(logits), count, only)
    candidates = _Candidates(logits)
    return candidates.best(alive_log_probs - candidates.log_normalizer(), count, only)


def _with_prefix(prefix, limits, batch_size, max_length, pad_id):
    """`(prefix, limits)`: the prefix `(batch, width >= 1)` with at most
    `max_length - 1` tokens, and the limits raised to leave room for EOS
    after it. Without a prefix (`None`) it stays `None`, so that the
    searches skip forcing altogether (a pass over every logit each step),
    and every limit is at least 1."""
    if prefix is None:
        return None, tf.maximum(limits, tf.minimum(1, max_length))
    prefix = tf.convert_to_tensor(prefix, tf.int32)
    prefix = tf.concat([prefix, tf.fill([batch_size, 1], pad_id)], axis=1)
    prefix = prefix[:, : tf.maximum(tf.convert_to_tensor(max_length) - 1, 1)]
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(prefix, pad_id), tf.int32), axis=1)
    return tf.where(tf.not_equal(prefix, pad_id), prefix, -1), tf.maximum(
        limits, tf.minimum(lengths + 1, max_length)
    )


def _forced(prefix, step):
    """`(forced, token)` `(batch,)`: whether `step`'s token is the prefix's,
    and which (prefix positions past a sentence's prefix hold -1); `(None,
    None)` without a prefix."""
    if prefix is None:
        return None, None
    width = tf.shape(prefix)[1]
    token = tf.gather(prefix, tf.minimum(step, width - 1), axis=1)
    return tf.logical_and(step < width, token >= 0), token


def _only_forced(logits, forced, token):
    """Where a sentence is `forced` `(batch,)`, every logit but `token`'s
    becomes `NEG_INF`; `logits` is `(batch, ..., vocab)`. Without a
    prefix (`forced` is `None`) the logits are returned as they are."""
    if forced is None:
        return logits
    shape = [-1] + [1] * (logits.shape.rank - 1)
    other = tf.not_equal(tf.range(tf.shape(logits)[-1]), tf.reshape(token, shape))
    return tf.where(tf.logical_and(tf.reshape(forced, shape), other), NEG_INF, logits)


def _outside_prefix(forced, controlled, logits):
    """The `controlled` logits `(rows, vocab)`, except on rows being
    `forced` `(rows,)` through a prefix (or `None`), which keep `logits`:
    output controls do not apply inside a prefix."""
    if forced is None:
        return controlled
    return tf.where(forced[:, None], logits, controlled)


def _only_eos_at_limit(logits, step, limits, eos_id):
    """Where a sentence reaches its limit at this step, allow only EOS: every
    other token's logit becomes `NEG_INF`.

    `logits` is `(batch, ..., vocab)`; `limits` is `(batch,)`.
    """
    at_limit = tf.equal(step + 1, limits)  # this token is the last allowed
    at_limit = tf.reshape(at_limit, [-1] + [1] * (logits.shape.rank - 1))
    is_eos = tf.equal(tf.range(tf.shape(logits)[-1]), eos_id)
    return tf.where(tf.logical_and(at_limit, tf.logical_not(is_eos)), NEG_INF, logits)


@_backend.tensorflow_only("decoding.greedy_search", "a tf.while_loop")
def greedy_search(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    length_limits=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
    controls=None,
    prefix=None,
    resize_cache=None,
):
    """Picks the most likely next token until every sentence has ended.

    Args:
        tokens_to_logits: the next-token function (module docstring).
        cache: the initial cache, batch `batch_size`, passed through.
        batch_size: number of sentences (int or scalar tensor).
        max_length: size of the output buffer, the most tokens any sentence
            may get (EOS included).
        length_limits: optional per-sentence limits `(batch,)`, each at
            most `max_length`.
        bos_id: the first decoder input.
        eos_id: the token that ends a sentence.
        pad_id: what follows EOS in the output.
        controls: optional `OutputControls` (a minimum length, no repeated
            n-grams, a repetition penalty); the scores are then
            log-probabilities under the controlled distribution.
        prefix: optional int32 `(batch, prefix_len)`, padded with `pad_id`:
            each sentence's output starts with its prefix (forced, scored,
            not subject to `controls`), and the search goes on from there;
            a sentence's limit is raised to leave room for EOS after it.
        resize_cache: optional `resize_cache(per_hypothesis, length)`: the
            cache's `"per_hypothesis"` part holding `length` positions
            (the first ones kept, new ones empty), e.g.
            `Transformer.resize_cache`. With it the search grows the cache
            in `CACHE_SEGMENTS` steps up to `max_length`, so that early
            steps attend to, write and move a shorter cache; `cache` must
            then have the two parts, and may hold any number of positions.

    Returns:
        `(ids, scores)`: int32 `(batch, max_length)` and the float32 sum of
        the log-probabilities of each sentence's tokens `(batch,)`.

    Example:

    >>> ids, scores = greedy_search(step_fn, cache, batch_size=2, max_length=20)
    """

    def most_likely(logits, step):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    return _one_token_at_a_time(
        tokens_to_logits,
        cache,
        batch_size,
        max_length,
        most_likely,
        length_limits=length_limits,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        controls=controls,
        prefix=prefix,
        resize_cache=resize_cache,
    )


@_backend.tensorflow_only("decoding.sample", "a tf.while_loop")
def sample(
    tokens_to_logits,
    cache,
    batch_size,
    max_length,
    seed,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    length_limits=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
    controls=None,
    prefix=None,
    resize_cache=None,
):
    """Draws each next token at random until every sentence has ended.

    The next token is drawn from the model's distribution sharpened or
    flattened by `temperature` (the logits divided by it), restricted to
    the `top_k` most likely tokens (0: all) and then to the smallest set of
    most likely tokens whose probabilities sum to `top_p` or more (nucleus
    sampling, Holtzman et al., 2020; 1.0: all), renormalized. `top_k=1` is
    greedy search, exactly.

    The draws are stateless: the same `seed` and inputs give the same
    output, in a graph, eagerly and after export; step `i` draws with the
    key `(seed, i)`, each row independently. Under XLA the same holds, but
    XLA's random numbers differ from TensorFlow's kernels, so its draws do.

    Args:
        tokens_to_logits, cache, batch_size, max_length, length_limits,
        bos_id, eos_id, pad_id, controls, prefix, resize_cache: as for
            `greedy_search`.
        seed: an integer or int32/int64 scalar tensor.
        temperature: a positive float.
        top_k: a non-negative int.
        top_p: a float in (0, 1].

    Returns:
        `(ids, scores)` as for `greedy_search`; the scores are the model's
        log-probabilities of the drawn tokens (before temperature and
        filtering, after `controls`), so that samples can be ranked or filtered by them.

    Example:

    >>> ids, scores = sample(step_fn, cache, 2, 20, seed=7, top_p=0.9)
    """
    check_sampling(temperature=temperature, top_k=top_k, top_p=top_p)
    seed = tf.cast(seed, tf.int64)

    def draw(logits, step):
        key = tf.stack([seed, tf.cast(step, tf.int64)])
        return _draw(logits, key, temperature, top_k, top_p)

    return _one_token_at_a_time(
        tokens_to_logits,
        cache,
        batch_size,
        max_length,
        draw,
        length_limits=length_limits,
        bos_id=bos_id,
        eos_id=eos_id,
        pad_id=pad_id,
        controls=controls,
        prefix=prefix,
        resize_cache=resize_cache,
    )


def _draw(logits, key, temperature, top_k, top_p):
    """One token per row of `logits` `(rows, vocab)`, drawn with the
    stateless `key` from the tempered, top-k- and top-p-filtered softmax."""
    logits = logits / temperature
    if top_k == 0 and top_p >= 1.0:
        return _gumbel_argmax(logits, key)
    vocab = tf.shape(logits)[-1]
    k = tf.minimum(top_k, vocab) if top_k else vocab
    values, tokens = tf.math.top_k(logits, k)  # most likely first
    if top_p < 1.0:
        probs = tf.nn.softmax(values)
        before = tf.cumsum(probs, axis=-1, exclusive=True)  # mass of the likelier ones
        values = tf.where(before < top_p, values, NEG_INF)  # the first always stays
    return tf.gather(tokens, _gumbel_argmax(values, key), batch_dims=1)


def _gumbel_argmax(logits, key):
    """A draw from `softmax(logits)` per row: the argmax of the logits plus
    Gumbel noise (Gumbel, 1954), exact, and unlike TensorFlow's categorical
    sampling op compiled by XLA."""
    uniform = tf.random.stateless_uniform(
        tf.shape(logits), key, minval=1e-20, maxval=1.0, alg="philox"
    )
    return tf.argmax(logits - tf.math.log(-tf.math.log(uniform)), axis=-1, output_type=tf.int32)


def _one_token_at_a_time(
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
    (after the length limit's rule); returns `(ids, scores)`."""
    limits = _limits(batch_size, max_length, length_limits)
    prefix, limits = _with_prefix(prefix, limits, batch_size, max_length, pad_id)
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
        forced, forced_token = _forced(prefix, step)
        if controls is not None and controls.active:
            controlled = controls.apply(logits, sequences, step, limits, eos_id)
            logits = _outside_prefix(forced, controlled, logits)
        normalizer = _log_normalizer(logits)
        logits = _only_eos_at_limit(logits, step, limits, eos_id)
        logits = _only_forced(logits, forced, forced_token)
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
        return (*state[:4], _resized(state[4], resize_cache, length))

    _, sequences, _, scores, _ = _segmented_loop(
        cond,
        body,
        (
            tf.constant(0),
            sequences,
            tf.zeros([batch_size], tf.bool),
            tf.zeros([batch_size], tf.float32),
            cache,
        ),
        _segment_ends(max_length, resize_cache),
        resize,
    )
    return sequences[:, 1:], scores


CACHE_PARTS = ("per_hypothesis", "per_sentence")


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


def _check_two_part_cache(cache, user):
    if not isinstance(cache, dict) or set(cache) != set(CACHE_PARTS):
        received = sorted(cache) if isinstance(cache, dict) else type(cache).__name__
        raise ValueError(
            f"{user} needs `cache` as a dict with exactly the keys {list(CACHE_PARTS)} "
            f"(what belongs to each hypothesis, and what stays one per sentence). "
            f"Received: cache with {received}"
        )


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
    _check_two_part_cache(cache, "beam_search")
    k = beam_size
    limits = _limits(batch_size, max_length, length_limits)
    prefix, limits = _with_prefix(prefix, limits, batch_size, max_length, pad_id)
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
        forced, forced_token = _forced(prefix, step)
        if controls is not None and controls.active:
            controlled = controls.apply(
                logits,
                tf.reshape(state.alive_ids, [batch_size * k, width]),
                step,
                tf.repeat(limits, k),
                eos_id,
            )
            logits = _outside_prefix(
                None if forced is None else tf.repeat(forced, k), controlled, logits
            )
        logits = tf.reshape(logits, [batch_size, k, vocab])
        only = _only_token(logits, step, limits, eos_id, forced, forced_token)

        # The candidates: each live hypothesis extended by each token, with
        # log-probability alive + logits - normalizer. 2k of them: enough
        # for k live ones even if k of them end here.
        top_log_probs, top_indices = _best_extensions(
            logits, state.alive_log_probs, 2 * k, only
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
        penalty = length_penalty(tf.cast(step + 1, tf.float32), alpha)
        new_scores = tf.where(tf.logical_and(ends, in_beam), top_log_probs / penalty, NEG_INF)
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
                cache=_resized(state.cache, resize_cache, length),
            ),
        )

    (final,) = _segmented_loop(
        cond,
        body,
        (initial,),
        _segment_ends(max_length, resize_cache),
        resize,
    )
    return final.finished_ids[:, :num_results, 1:], final.finished_scores[:, :num_results]
