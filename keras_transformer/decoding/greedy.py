"""Greedy search: the most likely next token, until every sentence ends."""

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding.loop import one_token_at_a_time
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID


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
    banned=None,
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
        banned: optional int32 `(batch, phrases, length)`: token sequences
            no output contains (`decoding.banned`: right-aligned, padded
            on the left with -1; `banned.right_aligned` builds it). They
            apply as the `controls` do (the scores are then under the
            distribution without the banned tokens; a prefix is exempt).

    Returns:
        `(ids, scores)`: int32 `(batch, max_length)` and the float32 sum of
        the log-probabilities of each sentence's tokens `(batch,)`.

    Example:

    >>> ids, scores = greedy_search(step_fn, cache, batch_size=2, max_length=20)
    """

    def most_likely(logits, step, sentences):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    return one_token_at_a_time(
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
        banned=banned,
    )
