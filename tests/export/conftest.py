"""What the export tests share."""

import os
import pathlib

import pytest

import keras_transformer.export.saved_model as saved_model_module


@pytest.fixture
def quick_writes(monkeypatch):
    """Exports that write a stand-in `saved_model.pb` (its contents number
    the writes) instead of tracing the search: for the tests of versions,
    claims and swaps, which the contents do not change."""
    writes = []

    def write(translator, directory, version, limits, warmup_sentences):
        writes.append(version)
        os.remove(os.path.join(directory, "owner"))  # as the real writer does
        pathlib.Path(directory, "saved_model.pb").write_text(f"write {len(writes)}")

    monkeypatch.setattr(saved_model_module, "_write_export", write)
    return writes


@pytest.fixture(scope="session")
def words_tokenizer():
    """`(tokenizer, sentences)`: a SentencePiece tokenizer of 300 pieces
    trained on 400 sentences of a dozen words, and those sentences."""
    from keras_transformer.tokenization import train_sentencepiece
    from tests.export.random_models import word_sentences

    sentences = word_sentences()
    return train_sentencepiece(sentences, 300), sentences
