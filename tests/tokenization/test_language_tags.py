"""Target-language tags in a trained vocabulary: each tag is one piece
wherever it stands, in the graph and on the host, and the tokenizer lists
them."""

import pytest

from keras_transformer.tokenization import train_sentencepiece
from keras_transformer_runtime.text import languages
from keras_transformer_runtime.text.tokenizers import SentencePieces
from tests.tokenization.test_sentencepiece import ENGLISH
from tests.tokenization.test_sentencepiece import GERMAN

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

TAGS = languages.tags(["cs", "de", "fr"])


@pytest.fixture(scope="module")
def tagged_tokenizer():
    english, german = ENGLISH * 20, GERMAN * 20
    pairs = [(f"{TAGS[i % 3]} {e}", german[i]) for i, e in enumerate(english)]
    return train_sentencepiece(pairs, vocab_size=400, user_defined_symbols=TAGS)


@pytest.mark.parametrize(
    "text",
    [
        ">>fr<< Two dogs.",
        ">>fr<<Two dogs.",
        "Two >>fr<< dogs.",
        "Two dogs.>>fr<<",
        ">>de<<>>fr<<",
        "x>>cs<<y",
    ],
)
def test_a_tag_is_one_piece_wherever_it_stands(tagged_tokenizer, text, tmp_path):
    ids = tagged_tokenizer.tokenize([text]).to_list()[0]
    pieces = [tagged_tokenizer.id_to_piece(i) for i in ids]
    for tag in TAGS:
        assert pieces.count(tag) == text.count(tag)
        assert not any(tag in piece and piece != tag for piece in pieces)
    tagged_tokenizer.save(tmp_path / "spm.model")
    assert SentencePieces(str(tmp_path / "spm.model")).source(text) == pieces


def test_the_tokenizer_and_its_files_list_the_languages(tagged_tokenizer, tmp_path):
    assert tagged_tokenizer.language_tags == tuple(TAGS)
    assert tagged_tokenizer.languages.codes == ("cs", "de", "fr")
    tagged_tokenizer.save(tmp_path / "spm.model")
    assert SentencePieces(str(tmp_path / "spm.model")).languages.codes == ("cs", "de", "fr")
    plain = train_sentencepiece(ENGLISH * 20, 300)
    assert plain.language_tags == () and not plain.languages


@pytest.mark.parametrize(
    "symbols, message",
    [
        (">>de<<", "a list of strings, not one string"),
        ([">>de<<", ">>de<<"], "must be distinct"),
        (["a b"], "without white space"),
        ([""], "non-empty"),
        ([3], "non-empty string"),
    ],
)
def test_bad_user_defined_symbols_are_refused(symbols, message):
    with pytest.raises(ValueError, match=message):
        train_sentencepiece(ENGLISH, 300, user_defined_symbols=symbols)


def test_the_vocabulary_must_hold_the_symbols():
    with pytest.raises(ValueError, match="at least 262"):
        train_sentencepiece(ENGLISH, 261, user_defined_symbols=TAGS[:2])
