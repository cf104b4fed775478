"""Positive constraints: every output contains them, and a wide beam
finds the best output that does (brute force on a tiny vocabulary)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import terminology
from keras_transformer.decoding.phrases import right_aligned
from keras_transformer.special_ids import EOS_ID
from tests.decoding.test_search import markov
from tests.decoding.test_search import sequence_log_prob
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

# Sentence 2's constraint is longer than its limit allows: its output is
# the best of those that miss it.
CONSTRAINTS = [[[5, 5]], [[4], [1, 5]], [[1, 1, 1, 1, 1]]]
WORD_CONSTRAINTS = [[[5, 5]], [[1, 5]], [[5], [1]]]


def contains(tokens, phrase, closing=None):
    """Whether `tokens` (ending with EOS) hold `phrase`, followed by a token
    of `closing` or EOS where `closing` is given."""
    return any(
        tokens[i : i + len(phrase)] == phrase
        and (closing is None or tokens[i + len(phrase)] in closing | {EOS_ID})
        for i in range(len(tokens) - len(phrase))
    )


def brute_force_best(sentence, limit, alpha, phrases, closing=None):
    """The best output by (constraints missed, length-penalized score):
    an output may end before its limit only with every constraint met."""
    best = None
    for length in range(1, limit + 1):
        for prefix in itertools.product([1, 4, 5], repeat=length - 1):
            tokens = list(prefix) + [EOS_ID]
            missed = sum(not contains(tokens, p, closing) for p in phrases)
            if missed and length < limit:
                continue
            score = sequence_log_prob(sentence, tokens) / ((5 + length) / 6) ** alpha
            if best is None or (missed, -score) < (best[0], -best[1]):
                best = (missed, score, tokens)
    return best


def exhaustive_search(alpha, constraints, word_starts=None):
    """Beam search wide enough to be exact on `markov(3)` with limit 5 (a
    beam of 3^4 keeps every prefix of up to 4 tokens), checked sentence by
    sentence against `brute_force_best`; returns `(search options, ids,
    missing)` (`missing` counted with the word boundaries, if any)."""
    step, cache = markov(3)
    limits = [5, 5, 5]
    phrases = right_aligned(constraints)
    search = dict(beam_size=81, alpha=alpha, length_limits=limits, constraints=phrases)
    ids, scores = beam_search(step, cache, 3, 5, word_starts=word_starts, **search)
    closing = None if word_starts is None else terminology.closing_tokens(word_starts, EOS_ID)
    missing = terminology.missing(phrases, ids, closing).numpy()
    starts = None if word_starts is None else {int(i) for i in np.flatnonzero(word_starts)}
    for b in range(3):
        missed, best_score, best_tokens = brute_force_best(
            b, limits[b], alpha, constraints[b], closing=starts
        )
        assert strip(ids[b, 0].numpy()) == best_tokens
        assert float(scores[b, 0]) == pytest.approx(best_score, rel=1e-4)
        assert missing[b, 0] == missed
    return search, ids, missing


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_finds_the_best_output_with_the_constraints(alpha):
    search, ids, missing = exhaustive_search(alpha, CONSTRAINTS)
    assert missing[:, 0].tolist() == [0, 0, 1]
    # The constraints were binding: without them the best outputs differ.
    step, cache = markov(3)
    free, _ = beam_search(step, cache, 3, 5, **{**search, "constraints": None})
    assert all(strip(free[b, 0].numpy()) != strip(ids[b, 0].numpy()) for b in range(2))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_meets_constraints_at_word_boundaries(alpha):
    # Token 4 begins a word; 1 and 5 go on with one. A phrase counts only
    # where a word's start or EOS follows it: [5, 5] is not met by 5 5 1.
    starts = np.zeros(6, bool)
    starts[4] = True
    search, ids, missing = exhaustive_search(alpha, WORD_CONSTRAINTS, starts)
    assert (missing == 0).all()
    # The boundaries were binding: met anywhere, the best outputs differ.
    step, cache = markov(3)
    anywhere, _ = beam_search(step, cache, 3, 5, **search)
    assert any(strip(anywhere[b, 0].numpy()) != strip(ids[b, 0].numpy()) for b in range(3))
    closing = terminology.closing_tokens(starts, EOS_ID)
    assert terminology.missing(search["constraints"], anywhere, closing).numpy().max() > 0


def test_missing_counts_a_phrase_only_before_a_boundary():
    starts = np.array([False, False, False, False, True, False])
    closing = terminology.closing_tokens(starts, EOS_ID)
    phrases = right_aligned([[[5, 5]]] * 4)
    ids = tf.constant(
        [[[5, 5, 1, EOS_ID]], [[5, 5, 4, EOS_ID]], [[1, 5, 5, EOS_ID]], [[5, 5, 5, 1]]]
    )
    assert terminology.missing(phrases, ids, closing).numpy()[:, 0].tolist() == [1, 0, 0, 1]
    # Without boundaries, anywhere.
    assert terminology.missing(phrases, ids).numpy()[:, 0].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("phrase", [[4, 1, 5, 4], [4, 1, 5, 4, 1]])
@pytest.mark.parametrize("beam_size", [1, 2])
def test_a_long_phrase_is_met_with_fewer_slots_than_banks(phrase, beam_size):
    # More banks than slots: the bank of most tokens keeps a slot, so the
    # phrase once begun is completed, and a hypothesis that has met it
    # still gets its own best extension when the best of all come from
    # the others (else it would leave the beam).
    step, cache = markov(3)
    phrases = right_aligned([[phrase]] * 3)
    ids, _ = beam_search(step, cache, 3, 12, beam_size=beam_size, constraints=phrases)
    assert (terminology.missing(phrases, ids).numpy() == 0).all()


@pytest.mark.parametrize("beam_size", [4, 8])
def test_small_beams_meet_every_constraint(beam_size):
    # A beam of at least one more than the constraint tokens (3 here):
    # each bank has a slot (the model here prefers to repeat a token).
    step, cache = markov(3)
    phrases = right_aligned(CONSTRAINTS[:2] + [[[4, 1], [5]]])
    ids, _ = beam_search(step, cache, 3, 10, beam_size=beam_size, constraints=phrases)
    assert (terminology.missing(phrases, ids).numpy() == 0).all()

    @tf.function(jit_compile=True)
    def compiled():
        return beam_search(step, cache, 3, 10, beam_size=beam_size, constraints=phrases)[0]

    np.testing.assert_array_equal(
        compiled().numpy(),
        beam_search(step, cache, 3, 10, beam_size=beam_size, constraints=phrases)[0].numpy(),
    )
