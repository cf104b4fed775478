"""A runner tokenizes each source sentence once on the host: the length
it measures to split and batch a request is the tokenization it
translates (`RecentTexts`)."""

import sentencepiece

from keras_transformer_runtime.text.tokenizers import RecentTexts
from keras_transformer_runtime.text.tokenizers import SentencePieces


def test_a_text_is_computed_once_and_its_value_cannot_be_changed():
    calls = []
    pieces = RecentTexts(lambda text: calls.append(text) or text.split(), size=3)
    first = pieces("a b")
    first.append("changed")
    assert pieces("a b") == ["a", "b"] and calls == ["a b"]
    for text in ("c", "d", "e"):  # past `size`: forgotten, computed again
        pieces(text)
    assert pieces("a b") == ["a", "b"] and calls == ["a b", "c", "d", "e", "a b"]


class CountingProcessor:
    """A SentencePiece processor that counts its `encode` calls."""

    def __init__(self, processor):
        self.processor, self.encoded = processor, []

    def encode(self, text, **options):
        self.encoded.append(text)
        return self.processor.encode(text, **options)


def test_sentencepiece_pieces_tokenize_each_text_once(tmp_path):
    lines = [f"a dog runs {n} times in the park" for n in range(200)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines))
    sentencepiece.SentencePieceTrainer.train(
        input=str(tmp_path / "corpus.txt"), model_prefix=str(tmp_path / "spm"), vocab_size=40,
        minloglevel=2,
    )  # fmt: skip
    pieces = SentencePieces(str(tmp_path / "spm.model"))
    counting = pieces.processor = CountingProcessor(pieces.processor)
    sentences = ["a dog runs", "in the park"]
    lengths = [len(pieces.source(s)) for s in sentences]  # as a runner measures them
    translated = [pieces.source(s) for s in sentences]  # as it translates them
    assert [len(p) for p in translated] == lengths
    assert translated[0] == counting.processor.encode("a dog runs", out_type=str)
    assert counting.encoded == sentences
    ids = [pieces.source_ids(s) for s in sentences * 2]
    assert ids[:2] == ids[2:] and counting.encoded == sentences * 2  # ids: once more each
