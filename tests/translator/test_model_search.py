"""`ModelSearch`'s view of the tokenizer's vocabulary."""

import numpy as np
import pytest

from keras_transformer.translator.model_search import ModelSearch
from keras_transformer_runtime.runners.settings import DecodingSettings

pytestmark = pytest.mark.tensorflow_only

WORDS = ["Hunde", "Hund", "laufen", "schnell", "Katzen", "schlafen", "rote", "Mützen"]


@pytest.fixture(scope="module")
def word_tokenizer():
    from keras_transformer.tokenization import train_sentencepiece

    rng = np.random.default_rng(0)
    sentences = [" ".join(rng.choice(WORDS, 5)) + "." for _ in range(300)]
    return train_sentencepiece(sentences, 300)


def test_word_starts_mark_the_pieces_a_word_or_punctuation_begins_with(word_tokenizer):
    from tests.micro import micro_model

    model = micro_model(vocab_size=word_tokenizer.vocab_size + 3)  # ids past the tokenizer's
    settings = DecodingSettings(max_input_length=16, max_output_length=16)
    starts = ModelSearch(model, word_tokenizer, settings, -1).word_starts
    assert starts.shape == (word_tokenizer.vocab_size + 3,) and not starts[-3:].any()
    split = 0
    for text in WORDS + ["Hundeschlafen", "ä"]:
        ids = word_tokenizer.tokenize_target([text]).to_list()[0]
        assert starts[ids[0]], text  # alone, a word's first piece
        assert not starts[ids[1:]].any(), text  # the rest go on with it
        split += len(ids) > 1
    assert split >= 2  # some words are several pieces
    (period,) = word_tokenizer.tokenize_target(["Hund."]).to_list()[0][-1:]
    assert starts[period] and starts[word_tokenizer.eos_id]


def test_word_starts_are_none_without_the_word_mark():
    from keras_transformer.tokenizer import Tokenizer
    from tests.micro import micro_model

    class Suffixed(Tokenizer):  # pieces that mark a word's end, not its start ("Hund@@")
        vocab_size, pad_id, bos_id, eos_id = 8, 0, 2, 3

        def id_to_piece(self, i):
            return ["<pad>", "<unk>", "<s>", "</s>", "Hu@@", "nd", "la@@", "ufen"][i]

    settings = DecodingSettings(max_input_length=16, max_output_length=16)
    model = micro_model(vocab_size=8)
    assert ModelSearch(model, Suffixed(), settings, -1).word_starts is None
