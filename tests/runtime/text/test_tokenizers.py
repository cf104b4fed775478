"""The host's tokenizers give the in-graph tokenizers' ids and text."""

import numpy as np
import pytest

from keras_transformer_runtime.text.tokenizers import MarianPieces
from keras_transformer_runtime.text.tokenizers import SentencePieces

# The in-graph tokenizers are the oracle: skipped where TensorFlow is not.
tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tensorflow_only

AWKWARD = ["", " ", "A  dog\truns.", "Ünïcode ☃ 123", "x" * 300, "\u2581piece", "<unk> </s>"]


def random_rows(vocab_size, eos_id, rows=200, seed=0):
    """Rows of random ids, some cut by EOS, some padded after it."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab_size, size=(rows, 12)).astype(np.int32)
    ends = rng.integers(0, 14, size=rows)
    for row, end in zip(ids, ends, strict=True):
        if end < 12:
            row[end] = eos_id
    return ids


def test_sentencepiece_ids_and_text_are_the_graphs(sentencepiece_tokenizer, tmp_path):
    from tests.training.helpers import letter_reversal_corpus

    sentencepiece_tokenizer.save(tmp_path / "spm.model")
    pieces = SentencePieces(str(tmp_path / "spm.model"))
    sources, targets = letter_reversal_corpus(300, seed=3)
    texts = sources + targets + AWKWARD
    graph = sentencepiece_tokenizer.tokenize(tf.constant(texts)).to_list()
    assert [pieces.source_ids(t) for t in texts] == graph
    rows = random_rows(sentencepiece_tokenizer.vocab_size, sentencepiece_tokenizer.eos_id)
    expected = [t.decode() for t in sentencepiece_tokenizer.detokenize(rows).numpy()]
    assert [pieces.text_of_ids(row) for row in rows] == expected
    row = [5, 6, sentencepiece_tokenizer.eos_id, 7]
    assert pieces.pieces_of_ids(row) == [sentencepiece_tokenizer.id_to_piece(i) for i in row[:3]]


def test_marian_ids_and_text_are_the_graphs(marian_directory):
    from keras_transformer.tokenization import MarianTokenizer

    tokenizer = MarianTokenizer.from_directory(marian_directory)
    pieces = MarianPieces(
        f"{marian_directory}/source.spm",
        f"{marian_directory}/target.spm",
        f"{marian_directory}/vocab.json",
    )
    texts = ["A dog runs.", ">>deu<< Two cats.", ">>fra<<", ">>deu<<>>fra<< x", *AWKWARD]
    assert [pieces.source_ids(t) for t in texts] == tokenizer.tokenize(tf.constant(texts)).to_list()
    # The decoder's start (`bos_id`, past vocab.json's ids) among them.
    rows = random_rows(tokenizer.vocab_size, tokenizer.eos_id)
    assert (rows == tokenizer.bos_id).any()
    expected = [t.decode() for t in tokenizer.detokenize(rows).numpy()]
    assert [pieces.text_of_ids(row) for row in rows] == expected
