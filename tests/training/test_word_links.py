"""Word links through `make_batches`: each batch's alignment against one
built by hand from the tokenizer's pieces; eflomal's links on a corpus
whose links are known."""

import re

import numpy as np
import pytest

from keras_transformer import training

SOURCES = ["abc de fgh", "ij klmno p qr", "stu vw", "x yz abc de fg hij"]
TARGETS = ["cba hgf ed", "on ml kji rq", "wv uts", "zy x gf ed cba jih"]
LINKS = ["0-0 1-2 2-1", "1-0 0-2 3-3", "", "0-1 1-0 2-4 3-3 4-2 5-5 9-9"]


def pieces_words(tokenizer, text):
    """Each token's id and word, by hand: a piece starting with "▁"
    starts the next word."""
    ids = [int(i) for i in tokenizer.tokenize([text]).to_list()[0]]
    words, word = [], -1
    for i in ids:
        word += tokenizer.id_to_piece(i).startswith("▁")
        words.append(max(word, 0))
    return ids, words


def expected_alignment(tokenizer, source, target, line):
    """`(target tokens + EOS) x (source tokens + EOS)`: 1 where the
    target token's word is linked to the source token's word, and at EOS
    x EOS."""
    source_ids, source_words = pieces_words(tokenizer, source)
    target_ids, target_words = pieces_words(tokenizer, target)
    links = {int(j): int(i) for i, j in (link.split("-") for link in line.split())}
    matrix = np.zeros([len(target_ids) + 1, len(source_ids) + 1], np.float32)
    for t, word in enumerate(target_words):
        for s, source_word in enumerate(source_words):
            matrix[t, s] = links.get(word, -1) == source_word
    matrix[-1, -1] = 1
    return source_ids, matrix


@pytest.mark.tensorflow_only  # tf.data
@pytest.mark.parametrize("static_shapes", [False, True])
def test_each_batch_aligns_every_piece_of_the_linked_words(sentencepiece_tokenizer, static_shapes):
    """Every pair comes out once, with its alignment matching the one
    built from its pieces (links past a sentence's words ignored; a pair
    without links aligned at EOS only), padding rows and columns zero."""
    tokenizer = sentencepiece_tokenizer
    pairs = training.with_word_links(training.text_pairs_from_lists(SOURCES, TARGETS), LINKS)
    batches = training.make_batches(
        pairs, tokenizer, 64, max_length=32, shuffle=False, static_shapes=static_shapes
    )
    expected = {}
    for source, target, line in zip(SOURCES, TARGETS, LINKS, strict=True):
        ids, matrix = expected_alignment(tokenizer, source, target, line)
        expected[tuple(ids)] = matrix
    seen = []
    for (source, _, alignment), target_out in batches.dataset.as_numpy_iterator():
        assert alignment.shape == (*target_out.shape, source.shape[1])
        for row in range(len(source)):
            length = int((source[row] != 0).sum())
            if length == 0:  # a row of padding, completing a static batch
                assert not alignment[row].any()
                continue
            ids = tuple(int(i) for i in source[row, : length - 1])
            seen.append(ids)
            target_length = int((target_out[row] != 0).sum())
            want = expected[ids]
            np.testing.assert_array_equal(alignment[row, :target_length, :length], want)
            assert not alignment[row, target_length:].any()
            assert not alignment[row, :, length:].any()
    assert sorted(seen) == sorted(expected)


@pytest.mark.tensorflow_only  # tf.data
def test_word_links_need_a_tokenizer_that_marks_words():
    from tests.training.helpers import number_tokenizer

    pairs = training.with_word_links(training.text_pairs_from_lists(["4 5"], ["6 7"]), ["0-0"])
    with pytest.raises(ValueError, match="SentencePiece"):
        training.make_batches(pairs, number_tokenizer, 64, max_length=8)


@pytest.mark.tensorflow_only  # tf.data
@pytest.mark.parametrize("line", ["0-0 1", "0:0", "a-b", "0-0,1-1", "-1-0"])
def test_a_line_that_is_not_pharaoh_is_named(line):
    import tensorflow as tf

    pairs = training.text_pairs_from_lists(["4 5", "6 7"], ["6 7", "4 5"])
    with pytest.raises(ValueError, match=rf"line 1 \(from 0\) {re.escape(repr(line))}"):
        training.with_word_links(pairs, [" 0-1  1-0 ", line])
    # A dataset of lines: the pipeline stops at it, naming it.
    linked = training.with_word_links(pairs, tf.data.Dataset.from_tensor_slices(["", line]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Pharaoh line"):
        list(linked)
    # Good lines pass both ways, unchanged.
    good = [" 0-1  1-0 ", ""]
    for links in (good, tf.data.Dataset.from_tensor_slices(good)):
        assert [
            t.decode() for *_, t in training.with_word_links(pairs, links).as_numpy_iterator()
        ] == good


def test_the_settings_weight_reaches_the_model():
    from keras_transformer import Transformer

    model = Transformer.from_preset("tiny", vocab_size=30)
    training.compile_for_training(model, training.TrainingSettings(guided_alignment_weight=0.2))
    assert model.guided_alignment_weight == 0.2
    with pytest.raises(ValueError, match="guided_alignment_weight=-1"):
        training.TrainingSettings(guided_alignment_weight=-1)
