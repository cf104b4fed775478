"""Banned phrases as texts: the graph's tables against `BannedPhrases.
of_texts` and every output against a brute-force reading of its pieces."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import BannedPhrases
from keras_transformer.tokenizer import Tokenizer
from keras_transformer.translator.spellings import PhraseSpellings

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def spelled_by_a_run(ids, text, spellings):
    """Whether some run of consecutive `ids` writes exactly `text`."""
    return any(
        b"".join(spellings[t] for t in ids[i:j]) == text
        for i in range(len(ids))
        for j in range(i + 1, len(ids) + 1)
    )


def test_tables_are_of_texts_tables(sentencepiece_tokenizer):
    tokenizer = sentencepiece_tokenizer
    spellings = tokenizer.spellings(tokenizer.vocab_size)
    builder = PhraseSpellings(tokenizer, tokenizer.vocab_size)
    joined = ["c b ||| j", "", "ü a|||a b c d e", "  "]
    banned = builder.banned(tf.constant(joined), longest=4)
    phrases, after_break = [], []
    mark = "\u2581".encode()
    for line in joined:
        texts = []
        for phrase in filter(None, (p.strip() for p in line.split("|||"))):
            ids = tokenizer.tokenize_target(tf.constant(phrase)).numpy().tolist()
            # "a b c d e" is 5 pieces: longer than `longest`, no phrase.
            text = b"".join(spellings[i] for i in ids) if len(ids) <= 4 else b""
            # As written alone, and without the word mark after a break.
            texts += [text, text.removeprefix(mark)]
        phrases.append(texts)
        after_break.append([bool(text) and i % 2 == 1 for i, text in enumerate(texts)])
    expected = BannedPhrases.of_texts(phrases, spellings, after_break)
    np.testing.assert_array_equal(banned.ends.numpy(), expected.ends)
    table = banned.table.numpy()
    width = expected.table.shape[3]
    assert not (table[..., width:] >= 0).any()
    np.testing.assert_array_equal(table[..., :width], expected.table)
    np.testing.assert_array_equal(banned.lengths.numpy(), expected.lengths)
    np.testing.assert_array_equal(banned.columns.numpy(), expected.columns)
    np.testing.assert_array_equal(banned.after_break.numpy(), expected.after_break)
    np.testing.assert_array_equal(banned.breaks.numpy(), expected.breaks)
    # "ü" is written in byte pieces only: its bytes are in the table too.
    assert banned.ends.numpy()[2, 0] == len("▁ü▁a".encode())
    assert banned.ends.numpy()[2, 1] == len("ü▁a".encode())


def test_a_tokenizer_without_pieces_bans_its_segmentation():
    class Letters(Tokenizer):
        vocab_size = 60

        def tokenize(self, text):
            return tf.strings.unicode_decode(text, "UTF-8") % 50 + 4

    banned = PhraseSpellings(Letters(), 60).banned(tf.constant(["ab|||c", ""]), longest=8)
    letter = {c: ord(c) % 50 + 4 for c in "abc"}
    expected = BannedPhrases.of_ids([[[letter["a"], letter["b"]], [letter["c"]]], []])
    np.testing.assert_array_equal(banned.table.numpy(), expected.table)
    np.testing.assert_array_equal(banned.ends.numpy(), expected.ends)
    assert banned.lengths is None and banned.columns is None


@pytest.mark.large  # uses the trained letter reverser
def test_no_translation_spells_a_banned_phrase_in_other_pieces(letter_reverser):
    from keras_transformer import Translator
    from tests.training.helpers import letter_reversal_corpus

    tokenizer = letter_reverser.tokenizer
    translator = Translator(letter_reverser.model, tokenizer, beam_size=4)
    spellings = tokenizer.spellings(tokenizer.vocab_size)
    sources, targets = letter_reversal_corpus(24, seed=5)
    # Each output's own words: "f" is the piece "▁f", and also "▁" + "f",
    # "▁" + a byte piece, ...: banned, none of them may come out.
    banned = [[target.split()[-1], " ".join(target.split()[:2])] for target in targets]
    joined = tf.constant([" ||| ".join(phrases) for phrases in banned])
    graph = translator.graph
    phrases = graph.spellings.banned(joined, 127)
    ids, _ = graph.search_ids(graph.encode_text(tf.constant(sources)), 1, {"banned": phrases})
    texts = graph.translate_with_constraints(
        tf.constant(sources), tf.constant([""] * len(sources)), joined
    )["translation"].numpy()
    for row, text, target, phrases in zip(ids.numpy()[:, 0], texts, targets, banned, strict=True):
        assert tokenizer.detokenize(tf.constant(row)).numpy() == text  # the signature's output
        assert text.decode() != target
        output = [int(i) for i in row if i not in (tokenizer.pad_id, tokenizer.eos_id)]
        for phrase in phrases:
            segmented = tokenizer.tokenize_target(tf.constant(phrase)).numpy().tolist()
            words = b"".join(spellings[i] for i in segmented)
            assert not spelled_by_a_run(output, words, spellings), (phrase, output)
