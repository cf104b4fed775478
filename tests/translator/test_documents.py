"""Texts of several sentences in the graph: the graph splits as the hosts
(`keras_transformer_runtime.text.documents`), and its signatures translate a
text as its sentences translated one by one, joined."""

import pytest
import tensorflow as tf

from keras_transformer import Translator
from keras_transformer.translator import documents
from keras_transformer_runtime.text.documents import Split
from keras_transformer_runtime.text.sentences import segments
from tests.runtime.text.test_sentences import CASES

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design

PARAGRAPHS = [
    "A dog runs. A cat sleeps.",
    "Dr. Smith arrived. He sat down.\nThen he left.\n\nThe end.",
    "\nStarts with a line break. Ends with one.\n",
    "  Spaces first. Then more.  ",
    "\n",
    "",
    "One sentence, no split.",
]
# Sentences over a limit of 8 tokens: pieces of whole words, and a word
# alone over it (cut).
LONG = [
    "abc def ghi jkl mno pqr stu vwx. Short one.",
    "tiny\tgap   and\nbreak xyz abcdefghijklmnopqrstuvwxyz abc.",
]


def lengths_of(tokenizer):
    """The host's `lengths`: each text's source tokens."""

    def lengths(texts):
        ids = tokenizer.tokenize(tf.constant(list(texts), tf.string))
        return ids.row_lengths().numpy().tolist()

    return lengths


@pytest.mark.parametrize("limit", [1000, 7])
def test_the_graph_cuts_every_text_as_the_hosts(sentencepiece_tokenizer, limit):
    texts = [text for text, _ in CASES] + PARAGRAPHS + LONG
    split = tf.function(lambda text: documents.split(text, sentencepiece_tokenizer, True, limit))
    graph = split(tf.constant(texts))
    host = Split.of(texts, True, limit, lengths_of(sentencepiece_tokenizer))
    assert [p.decode() for p in graph.pieces.numpy()] == host.sentences
    over = graph.over_limit.numpy().tolist()
    assert [row for row, value in enumerate(over) if value] == host.in_pieces
    if limit == 7:  # (the letter vocabulary writes most words in several pieces)
        assert {len(texts) - 2, len(texts) - 1} <= set(host.in_pieces) and host.cut
    # Translated as themselves, the pieces give each text back (a long
    # sentence's whitespace as single spaces), as the host joins them.
    joined = [t.decode() for t in graph.joined(graph.pieces).numpy()]
    assert joined == host.texts(host.sentences)
    for text, back in zip(texts, joined, strict=True):
        assert back == text or limit == 7


def test_unsplit_texts_are_one_piece_each(sentencepiece_tokenizer):
    parts = documents.split(tf.constant(PARAGRAPHS), sentencepiece_tokenizer, False, 1000)
    assert [p.decode() for p in parts.pieces.numpy()] == PARAGRAPHS


def test_a_text_translates_as_its_sentences_one_by_one_joined(micro_translator):
    translator = micro_translator
    graph = translator.graph
    outputs = graph.serving_default(tf.constant(PARAGRAPHS))
    # The reference: each sentence translated in a batch of its own text's
    # sentences, joined with the text's separators.
    for text, translation, score in zip(
        PARAGRAPHS, outputs["translation"].numpy(), outputs["score"].numpy(), strict=True
    ):
        parts = segments(text)
        sentences = [p for p in parts[::2] if p] if len(parts) > 1 else parts
        alone = graph.serving_default(tf.constant(sentences, tf.string))
        words = iter(t.decode() for t in alone["translation"].numpy())
        expected = "".join(
            part if i % 2 or (len(parts) > 1 and not part) else next(words)
            for i, part in enumerate(parts)
        )
        assert translation.decode() == expected
        assert score == pytest.approx(float(alone["score"].numpy().sum()), abs=1e-4)
    assert not outputs["truncated"].numpy().any()
    # The Python translator (which splits on the host) gives the same.
    assert translator.translate(PARAGRAPHS) == [t.decode() for t in outputs["translation"].numpy()]
    n_best = graph.n_best(tf.constant(PARAGRAPHS[:2]))
    assert [t.decode() for t in n_best["translations"].numpy()[:, 0]] == [
        t.decode() for t in outputs["translation"].numpy()[:2]
    ]


def test_sentences_over_the_limit_are_translated_in_pieces_and_flagged(micro_translator):
    translator = Translator(
        micro_translator.model, micro_translator.tokenizer, max_input_length=8, beam_size=1,
        max_extra_length=4,
    )  # fmt: skip
    outputs = translator.graph.serving_default(tf.constant(LONG + ["Fits. In."]))
    assert outputs["truncated"].numpy().tolist() == [True, True, False]
    with pytest.warns(RuntimeWarning, match=r"2 input\(s\) had a sentence longer"):
        host = translator.translate(LONG + ["Fits. In."])
    assert host == [t.decode() for t in outputs["translation"].numpy()]
    # The signatures that take a text as one sentence say where they cut it.
    whole = translator.graph.translate_with_alignments(tf.constant(LONG + ["Fits. In.", "a b"]))
    assert whole["truncated"].numpy().tolist() == [True, True, True, False]  # one sentence
