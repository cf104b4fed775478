"""Sampling: each next token drawn at random, with temperature, top-k and
top-p (nucleus) filtering, statelessly from a seed."""

import dataclasses
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.decoding.controls import NEG_INF
from keras_transformer.decoding.loop import one_token_at_a_time
from keras_transformer.decoding.search import OneOutput
from keras_transformer_runtime.runners.settings import check_sampling


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sampling(OneOutput):
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

    Attributes:
        temperature: a positive float.
        top_k: a non-negative int.
        top_p: a float in (0, 1].
        alpha: the length penalty of the scores `outputs` reports.

    Example:

    >>> ids, log_probs = Sampling(top_p=0.9).search(request, seed=7)
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    draws_at_random = True

    def __post_init__(self):
        check_sampling(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p)

    def decoded(self, request, seed=None):
        """The draws with `seed` (an integer or int32/int64 scalar tensor;
        None: 0), the model's log-probabilities of the drawn tokens (before
        temperature and filtering, after the request's controls), so that
        samples can be ranked or filtered by them, and what
        `one_token_at_a_time` keeps with them."""
        seed = tf.cast(0 if seed is None else seed, tf.int64)

        def draw(logits, step, sentences):
            key = tf.stack([seed, tf.cast(step, tf.int64)])
            noise = _Noise(key, request.batch_size, sentences)
            return _draw(logits, noise, self.temperature, self.top_k, self.top_p)

        return one_token_at_a_time(request, draw)


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
