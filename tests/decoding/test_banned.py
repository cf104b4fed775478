"""Banned phrases: never in an output, and the searches still optimal
under the distribution without them (brute force on a tiny vocabulary)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import sample
from keras_transformer.decoding.banned import right_aligned
from keras_transformer.special_ids import EOS_ID
from tests.decoding.test_search import TABLE
from tests.decoding.test_search import log_softmax
from tests.decoding.test_search import markov
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

# Per sentence (TABLE[b % 3]): one-, two- and three-token phrases; [1, 4]
# starts sentence 1's best output without them.
BANNED = [[[4], [5, 1]], [[1, 4], [5, 5, 1]], [[1], [4, 4]]]


def contains(tokens, phrase):
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))


def controlled_log_prob(sentence, tokens, phrases):
    """The log-probability of `tokens` when every token that would
    complete a phrase is removed from each step's distribution (minus
    infinity if a token is one of them)."""
    previous, total = 2, 0.0
    for i, token in enumerate(tokens):
        logits = TABLE[sentence % 3, previous].astype(np.float64)
        for phrase in phrases:
            if tokens[max(0, i - len(phrase) + 1) : i] == phrase[:-1] and i >= len(phrase) - 1:
                logits[phrase[-1]] = -np.inf
        total += log_softmax(logits)[token]
        previous = token
    return total


def brute_force_best(sentence, limit, alpha, phrases):
    best = (-np.inf, None)
    for length in range(1, limit + 1):
        for prefix in itertools.product([1, 4, 5], repeat=length - 1):
            tokens = list(prefix) + [EOS_ID]
            if any(contains(tokens, p) for p in phrases):
                continue
            score = controlled_log_prob(sentence, tokens, phrases) / ((5 + length) / 6) ** alpha
            best = max(best, (score, tokens), key=lambda x: x[0])
    return best


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_finds_the_best_output_without_the_phrases(alpha):
    # Three real tokens per step: a beam of 3^4 keeps every prefix of up to
    # 4 tokens, so the search is exact.
    step, cache = markov(3)
    limits = [5, 4, 5]
    ids, scores = beam_search(
        step,
        cache,
        batch_size=3,
        max_length=5,
        beam_size=81,
        alpha=alpha,
        length_limits=limits,
        banned=right_aligned(BANNED),
    )
    for b in range(3):
        best_score, best_tokens = brute_force_best(b, limits[b], alpha, BANNED[b])
        assert strip(ids[b, 0].numpy()) == best_tokens
        assert float(scores[b, 0]) == pytest.approx(best_score, rel=1e-4)
    # The phrases were binding: unbanned, the best outputs differ.
    free, _ = beam_search(step, cache, 3, 5, beam_size=81, alpha=alpha, length_limits=limits)
    assert any(strip(free[b, 0].numpy()) != strip(ids[b, 0].numpy()) for b in range(2))


def test_no_search_outputs_a_banned_phrase():
    step, cache = markov(3)
    banned = right_aligned(BANNED)
    outputs = {
        "greedy": greedy_search(step, cache, 3, 8, banned=banned)[0][:, None],
        "beam": beam_search(step, cache, 3, 8, beam_size=4, num_results=4, banned=banned)[0],
    }
    for seed in range(5):
        outputs[f"sample {seed}"] = sample(step, cache, 3, 8, seed, banned=banned)[0][:, None]
    for name, ids in outputs.items():
        for b, hypotheses in enumerate(ids.numpy()):
            for row in hypotheses:
                tokens = strip(row)
                assert not any(contains(tokens, p) for p in BANNED[b]), (name, b, tokens)


def test_phrases_compile_with_xla_and_leave_with_their_sentences():
    step, cache = markov(3)
    banned = right_aligned(BANNED)
    eager = beam_search(step, cache, 3, 8, beam_size=3, banned=banned)[0]

    @tf.function(jit_compile=True)
    def compiled():
        return beam_search(step, cache, 3, 8, beam_size=3, banned=banned)[0]

    # Under XLA no sentence leaves the loop; in a graph finished ones do:
    # the same outputs either way.
    np.testing.assert_array_equal(compiled().numpy(), eager.numpy())


def test_right_aligned_phrases():
    np.testing.assert_array_equal(
        right_aligned([[[5, 6], [7]], []]),
        [[[5, 6], [-1, 7]], [[-1, -1], [-1, -1]]],
    )
    assert right_aligned([[], []]).shape == (2, 1, 1)
    with pytest.raises(ValueError, match=r"none negative. Received: phrase \[3, -2\]"):
        right_aligned([[[3, -2]]])
