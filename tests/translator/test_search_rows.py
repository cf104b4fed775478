"""`searched_in_chunks` and `TranslatorGraph(max_rows=)`: a request whose
texts split into more sentences than `max_rows` is searched `max_rows`
at a time (the SavedModel's memory bound), with the outputs of one search
of all of them."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.translator.graph import TranslatorGraph
from keras_transformer.translator.model_search import ModelSearch
from keras_transformer.translator.search_rows import chunk_seed
from keras_transformer.translator.search_rows import searched_in_chunks

pytestmark = pytest.mark.tensorflow_only  # TensorFlow graphs by design

# Eleven sentences in three texts, an empty text among them.
TEXTS = ["Abc. Def ghi. Jk. Lmn. Op.", "", "Qrs tuv. Wx. Yz ab. Cde. Fgh. Ijk."]


class AtMostTwoRows(ModelSearch):
    """The search of a translator, failing any search of over 2 rows."""

    def _checked(self, source):
        rows = tf.shape(source)[0]
        with tf.control_dependencies([tf.debugging.assert_less_equal(rows, 2)]):
            return tf.identity(source)

    def best_ids(self, source, seed, options=None):
        return super().best_ids(self._checked(source), seed, options)

    def search_ids(self, source, num_results, options=None):
        return super().search_ids(self._checked(source), num_results, options)

    def sample_ids(self, source, seed, options=None):
        return super().sample_ids(self._checked(source), seed, options)


@pytest.fixture(scope="module")
def graphs(micro_translator):
    """The micro translator's own graph (one search of all sentences) and
    one searching at most 2 at a time, with a search that checks it."""
    t = micro_translator
    search = AtMostTwoRows(t.model, t.tokenizer, t.settings, t.alignment_layer)
    return t.graph, TranslatorGraph(search, max_rows=2)


def test_the_graph_sees_more_sentences_than_max_rows(graphs):
    whole, _ = graphs
    assert whole.split(tf.constant(TEXTS)).pieces.shape[0] == 12  # the empty text: one piece


def test_searches_of_two_rows_give_one_search_s_translations(graphs):
    whole, chunked = graphs
    text = tf.constant(TEXTS)
    expected, found = whole.serving_default(text), chunked.serving_default(text)
    assert found["translation"].numpy().tolist() == expected["translation"].numpy().tolist()
    np.testing.assert_allclose(found["score"], expected["score"], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(found["truncated"], expected["truncated"])
    expected, found = whole.n_best(text), chunked.n_best(text)
    assert found["translations"].numpy().tolist() == expected["translations"].numpy().tolist()
    np.testing.assert_allclose(found["scores"], expected["scores"], rtol=1e-4, atol=1e-5)


def test_prefixes_and_output_lengths_follow_their_sentences(graphs):
    whole, chunked = graphs
    text, prefix = tf.constant(TEXTS), tf.constant(["ba", "", "cd"])
    for max_output_length in (0, 3):
        expected = whole.translate_with_options(text, prefix, max_output_length)
        found = chunked.translate_with_options(text, prefix, max_output_length)
        assert found["translation"].numpy().tolist() == expected["translation"].numpy().tolist()
        np.testing.assert_allclose(found["score"], expected["score"], rtol=1e-4, atol=1e-5)


def test_samples_repeat_with_a_seed_and_each_chunk_draws_its_own(graphs):
    _, chunked = graphs
    text = tf.constant(TEXTS)
    first = chunked.sample(text, tf.constant(3, tf.int64))["translation"].numpy().tolist()
    assert chunked.sample(text, tf.constant(3, tf.int64))["translation"].numpy().tolist() == first
    seeds = [int(chunk_seed(tf.constant(3, tf.int64), chunk)) for chunk in range(6)]
    assert seeds[0] == 3 and len(set(seeds)) == 6


def test_empty_requests_and_no_chunking():
    calls = []

    seeds = []

    def search(source, seed):
        chunk = len(calls)
        calls.append(int(tf.shape(source)[0]))
        seeds.append(int(seed))
        rows = tf.shape(source)[0]
        ids = tf.tile(source[:, None, :], [1, 2, 1])  # "outputs": each source twice
        return ids, tf.cast(tf.fill([rows, 2], chunk), tf.float32)

    source = tf.constant([[5, 6, 1, 0], [7, 1, 0, 0], [8, 9, 4, 1], [2, 1, 0, 0], [3, 1, 0, 0]])
    ids, scores = searched_in_chunks(search, source, 3, max_rows=2, width=8, pad_id=0)
    assert calls == [2, 2, 1]  # eager: each chunk's search runs in Python
    assert seeds == [int(chunk_seed(tf.constant(3, tf.int64), chunk)) for chunk in range(3)]
    np.testing.assert_array_equal(ids, np.repeat(source.numpy()[:, None, :], 2, axis=1))
    np.testing.assert_array_equal(scores[:, 0], [0, 0, 1, 1, 2])
    calls.clear()
    ids, _ = searched_in_chunks(search, source[:0], 3, max_rows=2, width=8, pad_id=0)
    assert calls == [0] and ids.shape[0] == 0
    calls.clear()
    seeds.clear()
    ids, _ = searched_in_chunks(search, source, 3, max_rows=None, width=8, pad_id=0)
    assert calls == [5] and ids.shape == (5, 2, 4) and seeds == [3]
