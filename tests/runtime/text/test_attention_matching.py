"""Word alignments matched on a word attention matrix: the assignment
against brute force over every permutation, and the alignments against
ones worked out by hand."""

import itertools

import numpy as np
import pytest

from keras_transformer_runtime.text.attention_matching import _best_assignment
from keras_transformer_runtime.text.attention_matching import matched_alignment


def brute_force_best(weights):
    """The greatest total weight of a one-to-one assignment, by trying
    every one."""
    rows, columns = weights.shape
    if rows <= columns:
        return max(
            sum(weights[r, c] for r, c in enumerate(chosen))
            for chosen in itertools.permutations(range(columns), rows)
        )
    return brute_force_best(weights.T)


@pytest.mark.parametrize("seed", range(40))
def test_the_assignment_has_the_greatest_total_weight(seed):
    rng = np.random.default_rng(seed)
    rows, columns = rng.integers(1, 7, size=2)
    weights = rng.random((rows, columns))
    if seed % 4 == 0:  # ties everywhere
        weights = rng.integers(0, 3, size=(rows, columns)).astype(float)
    assignment = _best_assignment(weights)
    assert len(assignment) == rows
    chosen = [c for c in assignment if c is not None]
    assert len(chosen) == len(set(chosen)) == min(rows, columns)
    total = sum(weights[r, c] for r, c in enumerate(assignment) if c is not None)
    assert total == pytest.approx(brute_force_best(weights))


def test_a_source_word_attended_by_every_target_word_takes_only_its_own():
    # "A little girl ." -> "Ein kleines Mädchen .": every target word
    # attends most to "A" (a row argmax aligns all four to it), yet each
    # attends to its own word more than the others do.
    attention = np.array(
        [
            [0.70, 0.10, 0.10, 0.10],
            [0.45, 0.40, 0.10, 0.05],
            [0.45, 0.10, 0.40, 0.05],
            [0.50, 0.05, 0.05, 0.40],
        ]
    )
    assert np.argmax(attention, axis=1).tolist() == [0, 0, 0, 0]
    assert matched_alignment(attention) == [0, 1, 2, 3]


def test_a_reordering_the_attention_shows_is_kept():
    # The position prior only breaks ties: a clear reversal stays reversed.
    attention = np.array([[0.05, 0.15, 0.8], [0.1, 0.8, 0.1], [0.8, 0.15, 0.05]])
    assert matched_alignment(attention) == [2, 1, 0]


def test_ties_go_to_the_word_at_the_same_place():
    # Two "a" the attention cannot tell apart: each to its own.
    assert matched_alignment(np.full((2, 2), 0.5)) == [0, 1]


def test_more_target_words_than_source_words_take_their_rows_best():
    # "big" -> "sehr groß": both target words on the one source word.
    assert matched_alignment(np.array([[1.0], [1.0]])) == [0, 0]
    attention = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])  # the middle word left over
    alignment = matched_alignment(attention)
    assert alignment[0] == 0 and alignment[2] == 1 and alignment[1] in (0, 1)


def test_rows_of_no_weight_are_unaligned_and_take_no_column():
    attention = np.array([[0.0, 0.0], [0.3, 0.7], [0.9, 0.1]])
    assert matched_alignment(attention) == [None, 1, 0]
    assert matched_alignment(np.zeros((2, 0))) == [None, None]
    assert matched_alignment(np.zeros((0, 3))) == []


def test_sentences_of_a_document_are_never_matched_across():
    # Two sentences (`documents` joins their attention block by block):
    # the first has 3 target words for 2 source words, the second 2 for
    # 3. The one-to-one assignment would give the left-over target word a
    # column of the other sentence (weight 0); it takes its row's best.
    attention = np.zeros((5, 5))
    attention[:3, :2] = [[0.9, 0.1], [0.5, 0.5], [0.1, 0.9]]
    attention[3:, 2:] = [[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]
    alignment = matched_alignment(attention)
    assert alignment[0] == 0 and alignment[1] in (0, 1) and alignment[2] == 1
    assert alignment[3:] == [2, 4]
