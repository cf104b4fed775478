"""Positive constraints: every output contains them, and a wide beam
finds the best output that does (brute force on a tiny vocabulary)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import constrained
from keras_transformer.decoding.banned import right_aligned
from keras_transformer.special_ids import EOS_ID
from tests.decoding.test_search import markov
from tests.decoding.test_search import sequence_log_prob
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

# Sentence 2's constraint is longer than its limit allows: its output is
# the best of those that miss it.
CONSTRAINTS = [[[5, 5]], [[4], [1, 5]], [[1, 1, 1, 1, 1]]]


def contains(tokens, phrase):
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))


def brute_force_best(sentence, limit, alpha, phrases):
    """The best output by (constraints missed, length-penalized score):
    an output may end before its limit only with every constraint met."""
    best = None
    for length in range(1, limit + 1):
        for prefix in itertools.product([1, 4, 5], repeat=length - 1):
            tokens = list(prefix) + [EOS_ID]
            missed = sum(not contains(tokens, p) for p in phrases)
            if missed and length < limit:
                continue
            score = sequence_log_prob(sentence, tokens) / ((5 + length) / 6) ** alpha
            if best is None or (missed, -score) < (best[0], -best[1]):
                best = (missed, score, tokens)
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_finds_the_best_output_with_the_constraints(alpha):
    # Three real tokens per step: a beam of 3^4 keeps every prefix of up to
    # 4 tokens, so the search is exact.
    step, cache = markov(3)
    limits = [5, 5, 5]
    phrases = right_aligned(CONSTRAINTS)
    ids, scores = beam_search(
        step,
        cache,
        batch_size=3,
        max_length=5,
        beam_size=81,
        alpha=alpha,
        length_limits=limits,
        constraints=phrases,
    )
    missing = constrained.missing(phrases, ids).numpy()
    for b in range(3):
        missed, best_score, best_tokens = brute_force_best(b, limits[b], alpha, CONSTRAINTS[b])
        assert strip(ids[b, 0].numpy()) == best_tokens
        assert float(scores[b, 0]) == pytest.approx(best_score, rel=1e-4)
        assert missing[b, 0] == missed
    assert missing[:, 0].tolist() == [0, 0, 1]
    # The constraints were binding: without them the best outputs differ.
    free, _ = beam_search(step, cache, 3, 5, beam_size=81, alpha=alpha, length_limits=limits)
    assert all(strip(free[b, 0].numpy()) != strip(ids[b, 0].numpy()) for b in range(2))


@pytest.mark.parametrize("beam_size", [4, 8])
def test_small_beams_meet_every_constraint(beam_size):
    # A beam of at least one more than the constraint tokens (3 here):
    # each bank has a slot (the model here prefers to repeat a token).
    step, cache = markov(3)
    phrases = right_aligned(CONSTRAINTS[:2] + [[[4, 1], [5]]])
    ids, _ = beam_search(step, cache, 3, 10, beam_size=beam_size, constraints=phrases)
    assert (constrained.missing(phrases, ids).numpy() == 0).all()

    @tf.function(jit_compile=True)
    def compiled():
        return beam_search(step, cache, 3, 10, beam_size=beam_size, constraints=phrases)[0]

    np.testing.assert_array_equal(
        compiled().numpy(),
        beam_search(step, cache, 3, 10, beam_size=beam_size, constraints=phrases)[0].numpy(),
    )
