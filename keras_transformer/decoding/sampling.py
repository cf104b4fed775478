"""Sampling: each next token drawn at random, with temperature, top-k and
top-p (nucleus) filtering, statelessly from a seed."""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import _backend
from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.loop import one_token_at_a_time
from keras_transformer.special_ids import BOS_ID
from keras_transformer.special_ids import EOS_ID
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime.settings import check_sampling


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
    banned=None,
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
        bos_id, eos_id, pad_id, controls, prefix, resize_cache, banned: as for
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

    def draw(logits, step, sentences):
        key = tf.stack([seed, tf.cast(step, tf.int64)])
        return _draw(logits, _Noise(key, batch_size, sentences), temperature, top_k, top_p)

    return one_token_at_a_time(
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
        banned=banned,
    )


class _Noise(NamedTuple):
    """The random numbers of one step: drawn with the stateless `key` for
    all `batch_size` sentences, each row taking its `sentences`'s, so that
    a sentence draws the same whichever others are still decoded."""

    key: tf.Tensor
    batch_size: tf.Tensor
    sentences: tf.Tensor  # (rows,) int32

    def uniform(self, width):
        """`(rows, width)` uniform numbers in (0, 1)."""
        drawn = tf.random.stateless_uniform(
            [self.batch_size, width], self.key, minval=1e-20, maxval=1.0, alg="philox"
        )
        return tf.gather(drawn, self.sentences)


def _draw(logits, noise, temperature, top_k, top_p):
    """One token per row of `logits` `(rows, vocab)`, drawn with `noise`
    from the tempered, top-k- and top-p-filtered softmax."""
    logits = logits / temperature
    if top_k == 0 and top_p >= 1.0:
        return _gumbel_argmax(logits, noise)
    vocab = tf.shape(logits)[-1]
    k = tf.minimum(top_k, vocab) if top_k else vocab
    values, tokens = tf.math.top_k(logits, k)  # most likely first
    if top_p < 1.0:
        probs = tf.nn.softmax(values)
        before = tf.cumsum(probs, axis=-1, exclusive=True)  # mass of the likelier ones
        values = tf.where(before < top_p, values, NEG_INF)  # the first always stays
    return tf.gather(tokens, _gumbel_argmax(values, noise), batch_dims=1)


def _gumbel_argmax(logits, noise):
    """A draw from `softmax(logits)` per row: the argmax of the logits plus
    Gumbel noise (Gumbel, 1954), exact, and unlike TensorFlow's categorical
    sampling op compiled by XLA."""
    uniform = noise.uniform(tf.shape(logits)[1])
    return tf.argmax(logits - tf.math.log(-tf.math.log(uniform)), axis=-1, output_type=tf.int32)
