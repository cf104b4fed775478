"""The graph's sentence splitter splits every case of the hosts' table as
the hosts do."""

import pytest
import tensorflow as tf

from keras_transformer.tokenization.sentences import segments
from tests.runtime.text.test_sentences import CASES
from tests.runtime.text.test_sentences import expected_segments

pytestmark = pytest.mark.tensorflow_only  # TensorFlow by design


def test_the_graph_splits_every_case_as_the_hosts():
    texts = [text for text, _ in CASES]
    found = segments(tf.constant(texts)).to_list()
    for text, expected, parts in zip(texts, [e for _, e in CASES], found, strict=True):
        assert [p.decode() for p in parts] == expected_segments(expected), text


def test_one_text_and_an_empty_batch():
    assert segments(tf.constant(["A bc. Cd e."])).to_list() == [[b"A bc.", b" ", b"Cd e."]]
    assert segments(tf.constant([], tf.string)).to_list() == []


def test_splits_in_a_graph_function():
    split = tf.function(segments, input_signature=[tf.TensorSpec([None], tf.string)])
    assert split(tf.constant(["Hi. Yo."])).to_list() == [[b"Hi.", b" ", b"Yo."]]
