"""The SavedModel's own language tagging (`serving_module.tagged`) against
the runners' (`TargetLanguages`): the same text reaches the model, and the
graph refuses what a runner refuses, in the same words."""

import pytest
import tensorflow as tf

from keras_transformer.export.serving_module import tagged
from keras_transformer_runtime.text.languages import TargetLanguages

pytestmark = pytest.mark.tensorflow_only  # a TensorFlow graph by design

CODES = ("cs", "de", "fr")
HOST = TargetLanguages(CODES)
CASES = [
    ("A dog runs.", "de"),
    ("A >>fr<< dog runs.", "de"),  # a user's text never chooses the language
    (">>fr<< A dog.>>cs<<", "de"),
    ("  >>cs<< A dog. >>fr<<A cat.", "fr"),
    ("A dog >>xx<< runs.", "fr"),  # not a tag of the model: words
    (">>fr<< A dog runs.", ""),
    ("  >>de<<A cow.", ""),
    (">>de<< A >>fr<< cow.", ""),
    ("", "de"),
    ("   ", "fr"),
    ("", ""),
    (" \t", ""),
]
REFUSED = [
    ("A dog runs.", "", "pass target_lang"),  # untagged, no language
    (">>xx<< A dog runs.", "", "knows: cs, de, fr"),  # a typed tag the model lacks
    ("A dog runs.", "es", "knows: cs, de, fr"),
    ("", "es", "knows: cs, de, fr"),
]


def host(text, target_lang):
    return HOST.tagged_texts([text], target_lang or None)[0]


def graph(texts, langs):
    found = tagged(tf.constant(texts), tf.constant(langs), CODES)
    return [t.decode() for t in found.numpy()]


def test_the_graph_tags_as_the_runners_do():
    """Tags stripped from user text, a typed tag honoured, an empty text
    left empty, all in one request."""
    texts, langs = zip(*CASES, strict=True)
    assert graph(list(texts), list(langs)) == [host(t, lang) for t, lang in CASES]
    assert host("A >>fr<< dog runs.", "de") == ">>de<< A dog runs."


@pytest.mark.parametrize(("text", "target_lang", "words"), REFUSED)
def test_the_graph_refuses_what_the_runners_refuse(text, target_lang, words):
    """An untagged text or an unknown typed tag with `""`, and an unknown
    language: a runner's `ValueError` and the graph's `InvalidArgument`
    say the same (TensorFlow's messages without the quotes)."""
    with pytest.raises(ValueError) as refused:
        host(text, target_lang)
    assert words in str(refused.value).replace("'", "").replace("`", "")
    with pytest.raises(tf.errors.InvalidArgumentError, match=words):
        graph(["A fine text.", text], ["de", target_lang])
