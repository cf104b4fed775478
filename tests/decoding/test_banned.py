"""Banned phrases: never spelled by an output, whichever ids spell them,
and the searches still optimal under the distribution without them (brute
force on a tiny vocabulary)."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import BannedPhrases
from keras_transformer.decoding import beam_search
from keras_transformer.decoding import greedy_search
from keras_transformer.decoding import sample
from keras_transformer.decoding.banned import spelling_columns
from keras_transformer.special_ids import EOS_ID
from tests.decoding.test_search import TABLE
from tests.decoding.test_search import log_softmax
from tests.decoding.test_search import markov
from tests.decoding.test_search import strip

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

# Per sentence (TABLE[b % 3]): one-, two- and three-token phrases; [1, 4]
# starts sentence 1's best output without them.
BANNED = [[[4], [5, 1]], [[1, 4], [5, 5, 1]], [[1], [4, 4]]]
# What each id writes: 1 "a", 4 "b", 5 "ab" (and 3, EOS, nothing), so that
# "ab" is spelled [5] or [1, 4], "abb" [5, 4] or [1, 4, 4].
SPELLINGS = [b"", b"a", b"", b"", b"b", b"ab"]
BANNED_TEXTS = [[b"ab"], [b"ab", b"bb"], [b"abab", b"ba"]]


def spells_id_phrase(run, phrase):
    return run == phrase


def spells_text(run, phrase):
    return b"".join(SPELLINGS[token] for token in run) == phrase


def spelled(tokens, phrase, spells):
    """Whether a run of consecutive `tokens` spells `phrase`."""
    return any(
        spells(tokens[i:j], phrase)
        for i in range(len(tokens))
        for j in range(i + 1, len(tokens) + 1)
    )


def controlled_log_prob(sentence, tokens, phrases, spells):
    """The log-probability of `tokens` when every token that would end a
    run spelling a phrase is removed from each step's distribution (minus
    infinity if a token is one of them)."""
    previous, total = 2, 0.0
    for i, token in enumerate(tokens):
        logits = TABLE[sentence % 3, previous].astype(np.float64)
        for candidate in range(len(logits)):
            ending = [tokens[k:i] + [candidate] for k in range(i + 1)]
            if any(spells(run, phrase) for run in ending for phrase in phrases):
                logits[candidate] = -np.inf
        total += log_softmax(logits)[token]
        previous = token
    return total


def brute_force_best(sentence, limit, alpha, phrases, spells):
    best = (-np.inf, None)
    for length in range(1, limit + 1):
        for prefix in itertools.product([1, 4, 5], repeat=length - 1):
            tokens = list(prefix) + [EOS_ID]
            if any(spelled(tokens, p, spells) for p in phrases):
                continue
            score = controlled_log_prob(sentence, tokens, phrases, spells)
            score /= ((5 + length) / 6) ** alpha
            best = max(best, (score, tokens), key=lambda x: x[0])
    return best


KINDS = {
    "ids": (lambda: BannedPhrases.of_ids(BANNED), BANNED, spells_id_phrase),
    "texts": (lambda: BannedPhrases.of_texts(BANNED_TEXTS, SPELLINGS), BANNED_TEXTS, spells_text),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_finds_the_best_output_without_the_phrases(alpha, kind):
    # Three real tokens per step: a beam of 3^4 keeps every prefix of up to
    # 4 tokens, so the search is exact.
    make, phrases, spells = KINDS[kind]
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
        banned=make(),
    )
    for b in range(3):
        best_score, best_tokens = brute_force_best(b, limits[b], alpha, phrases[b], spells)
        assert strip(ids[b, 0].numpy()) == best_tokens
        assert float(scores[b, 0]) == pytest.approx(best_score, rel=1e-4)
    # The phrases were binding: unbanned, the best outputs differ.
    free, _ = beam_search(step, cache, 3, 5, beam_size=81, alpha=alpha, length_limits=limits)
    assert any(strip(free[b, 0].numpy()) != strip(ids[b, 0].numpy()) for b in range(2))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_search_outputs_a_banned_phrase(kind):
    make, phrases, spells = KINDS[kind]
    step, cache = markov(3)
    banned = make()
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
                assert not any(spelled(tokens, p, spells) for p in phrases[b]), (name, b, tokens)


# After a break: 1 writes "-" (a break), 4 "b", 5 "bb". "b" banned after
# a break: 4 never at the start or after 1; "bb" only as [4, 4] there.
BREAK_SPELLINGS = [b"", b"-", b"", b"", b"b", b"bb"]


def spells_after_break(tokens, phrase):
    """Whether a run of `tokens` spells `phrase` at the start or after a
    break (brute force)."""
    for i in range(len(tokens)):
        for j in range(i + 1, len(tokens) + 1):
            text = b"".join(BREAK_SPELLINGS[t] for t in tokens[i:j])
            if text == phrase and (i == 0 or tokens[i - 1] == 1):
                return True
    return False


def test_a_phrase_after_a_break_is_banned_there_only():
    step, cache = markov(3)
    banned = BannedPhrases.of_texts(
        [[b"b"], [b"bb"], [b"-b"]], BREAK_SPELLINGS, after_break=[[True], [True], [True]]
    )
    np.testing.assert_array_equal(banned.breaks, [False, True, False, False, False, False])
    ids = beam_search(step, cache, 3, 6, beam_size=9, num_results=9, banned=banned)[0].numpy()
    phrases = [b"b", b"bb", b"-b"]
    seen_elsewhere = False
    for b in range(3):
        for row in ids[b]:
            tokens = strip(row)
            assert not spells_after_break(tokens, phrases[b]), (b, tokens)
            seen_elsewhere |= spelled(
                tokens, phrases[b], lambda run, p: b"".join(BREAK_SPELLINGS[t] for t in run) == p
            )
    assert seen_elsewhere  # the phrases still occur where no break precedes them
    free = beam_search(step, cache, 3, 6, beam_size=9, num_results=9)[0].numpy()
    assert any(  # and the ban binds: unbanned, some outputs have them after a break
        spells_after_break(strip(row), phrases[b]) for b in range(3) for row in free[b]
    )


def test_each_spelling_of_a_text_is_in_the_table():
    banned = BannedPhrases.of_texts([[b"abb"]], SPELLINGS)
    lengths, columns = spelling_columns(SPELLINGS)
    paths = set()

    def walk(node, path):  # every way from node 0 to the end through the table
        if node == 3:
            paths.add(tuple(path))
        for end in range(node + 1, 4):
            for token in banned.table[0, 0, end]:
                if token >= 0 and end - lengths[token] == node:
                    walk(end, path + [int(token)])

    walk(0, [])
    assert paths == {(5, 4), (1, 4, 4)}
    np.testing.assert_array_equal(lengths, [0, 1, 0, 0, 1, 2])
    # Ids with the same bytes (a byte piece beside a one-letter piece) each
    # get a column of their own.
    _, columns = spelling_columns([b"a", b"bc", b"a", b""])
    assert list(columns) == [0, 1, 2, -1]


def test_phrases_compile_with_xla_and_leave_with_their_sentences():
    step, cache = markov(3)
    banned = BannedPhrases.of_texts(BANNED_TEXTS, SPELLINGS)
    eager = beam_search(step, cache, 3, 8, beam_size=3, banned=banned)[0]

    @tf.function(jit_compile=True)
    def compiled():
        return beam_search(step, cache, 3, 8, beam_size=3, banned=banned)[0]

    # Under XLA no sentence leaves the loop; in a graph finished ones do:
    # the same outputs either way.
    np.testing.assert_array_equal(compiled().numpy(), eager.numpy())


def test_id_phrases_refuse_negative_ids():
    banned = BannedPhrases.of_ids([[[5, 6], [7]], []])
    np.testing.assert_array_equal(banned.ends, [[2, 1], [0, 0]])
    np.testing.assert_array_equal(banned.table[0, :, :, 0], [[-1, 5, 6], [-1, 7, -1]])
    with pytest.raises(ValueError, match=r"none negative. Received: phrase \[3, -2\]"):
        BannedPhrases.of_ids([[[3, -2]]])
