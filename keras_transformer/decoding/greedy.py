"""Greedy search: the most likely next token, until every sentence ends."""

import dataclasses

import tensorflow as tf

from keras_transformer.decoding.loop import one_token_at_a_time
from keras_transformer.decoding.search import OneOutput


@dataclasses.dataclass(frozen=True, kw_only=True)
class GreedySearch(OneOutput):
    """Picks the most likely next token until every sentence has ended.

    Example:

    >>> ids, log_probs = GreedySearch().search(SearchRequest(step_fn, cache, 2, 20))
    """

    def decoded(self, request, seed=None):
        """The outputs, the sum of the log-probabilities of each one's
        tokens (under the request's controls, if any) and what
        `one_token_at_a_time` keeps with them."""

        def most_likely(logits, step, sentences):
            return tf.argmax(logits, axis=-1, output_type=tf.int32)

        return one_token_at_a_time(request, most_likely)
