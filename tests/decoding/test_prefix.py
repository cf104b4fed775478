import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import sample
from keras_transformer.special_ids import EOS_ID
from tests.decoding.test_search import TABLE
from tests.decoding.test_search import markov
from tests.decoding.test_search import sequence_log_prob
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

# Sentence 0 has no prefix, 1 a prefix of one token, 2 of three (padded).
PREFIXES = [[], [4], [5, 4, 1]]
PADDED = tf.constant([p + [0] * (3 - len(p)) for p in PREFIXES], tf.int32)


def greedy_after(sentence, prefix, limit):
    """Greedy decoding of the Markov table from a forced prefix, in NumPy."""
    tokens = list(prefix)
    while True:
        previous = tokens[-1] if tokens else 2
        token = EOS_ID if len(tokens) + 1 == limit else int(np.argmax(TABLE[sentence, previous]))
        tokens.append(token)
        if token == EOS_ID:
            return tokens


def test_greedy_continues_each_prefix():
    step, cache = markov(3)
    limits = [6, 6, 3]  # sentence 2's limit is raised to fit its prefix + EOS
    ids, scores = greedy_search(step, cache, 3, 8, length_limits=limits, prefix=PADDED)
    for b in range(3):
        expected = greedy_after(b, PREFIXES[b], max(limits[b], len(PREFIXES[b]) + 1))
        assert strip(ids[b].numpy()) == expected
        assert float(scores[b]) == pytest.approx(sequence_log_prob(b, expected), rel=1e-5)
    no_prefix, _ = greedy_search(step, cache, 3, 8, length_limits=limits)
    np.testing.assert_array_equal(ids[0].numpy(), no_prefix[0].numpy())


def test_wide_beam_finds_the_best_continuation_of_each_prefix():
    step, cache = markov(3)
    limit, alpha = 5, 0.6
    ids, scores = beam_search(
        step, cache, 3, limit, beam_size=81, alpha=alpha, num_results=3, prefix=PADDED
    )
    for b in range(3):
        prefix = PREFIXES[b]
        best = (-np.inf, None)
        for length in range(len(prefix) + 1, limit + 1):
            for middle in itertools.product([1, 4, 5], repeat=length - 1 - len(prefix)):
                tokens = prefix + list(middle) + [EOS_ID]
                score = sequence_log_prob(b, tokens) / ((5 + length) / 6) ** alpha
                best = max(best, (score, tokens), key=lambda x: x[0])
        assert strip(ids[b, 0].numpy()) == best[1]
        assert float(scores[b, 0]) == pytest.approx(best[0], rel=1e-4)
        for rank in range(3):  # every hypothesis starts with the prefix
            assert strip(ids[b, rank].numpy())[: len(prefix)] == prefix
    one, _ = beam_search(step, cache, 3, 6, beam_size=1, alpha=0.0, prefix=PADDED)
    greedy, _ = greedy_search(step, cache, 3, 6, prefix=PADDED)
    np.testing.assert_array_equal(one[:, 0].numpy(), greedy.numpy())


def test_samples_and_compiled_searches_keep_the_prefix():
    step, cache = markov(3)
    drawn, _ = sample(step, cache, 3, 8, seed=5, temperature=3.0, prefix=PADDED)
    for b in range(3):
        assert strip(drawn[b].numpy())[: len(PREFIXES[b])] == PREFIXES[b]
    run = lambda: beam_search(step, cache, 3, 7, beam_size=2, prefix=PADDED)  # noqa: E731
    graph, xla = tf.function(run)(), tf.function(run, jit_compile=True)()
    np.testing.assert_array_equal(graph[0].numpy(), xla[0].numpy())
