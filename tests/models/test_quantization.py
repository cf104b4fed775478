"""`model.quantize("int8")` on a `Transformer`: Keras's quantization of
every matrix (the attention's projections, the feed-forward layers, the
token embedding and its tied output projection), which still computes the
model, saves, loads and decodes."""

import warnings

import keras
import numpy as np
import pytest
from keras import ops

from tests.micro import micro_model
from tests.test_case import assert_close
from tests.test_case import numpy

RNG = np.random.default_rng(0)
SOURCE = np.array([[5, 6, 7, 3, 9, 0], [8, 4, 11, 2, 0, 0]])
TARGET = np.array([[1, 8, 9, 4, 12], [1, 3, 3, 6, 7]])


# Keras warns of every layer it leaves as it was: these hold no matrix.
WITHOUT_MATRICES = {"Dropout", "LayerNormalization", "PositionalEncoding", "Softmax"}


def _quantized(**overrides):
    model = micro_model(**overrides)
    float_logits = numpy(model((SOURCE, TARGET)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", "Layer .* does not have a `quantize` method")
        model.quantize("int8")
    left = {str(w.message).split()[1] for w in caught if "`quantize` method" in str(w.message)}
    assert left <= WITHOUT_MATRICES
    return model, float_logits


@pytest.mark.parametrize("tie_embeddings", ["all", "none"])
def test_every_matrix_is_int8_and_the_logits_stay_close(tie_embeddings):
    model, float_logits = _quantized(tie_embeddings=tie_embeddings)
    matrices = [v for v in model.weights if v.path.split("/")[-1] in ("kernel", "embeddings")]
    assert matrices and [v.path for v in matrices if v.dtype != "int8"] == []
    logits = numpy(model((SOURCE, TARGET)))
    assert np.abs(logits - float_logits).max() < 0.05 * np.abs(float_logits).max()


def test_an_int8_model_saves_and_loads(tmp_path):
    model, _ = _quantized()
    path = str(tmp_path / "int8.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert [v.dtype for v in restored.weights] == [v.dtype for v in model.weights]
    assert_close(restored((SOURCE, TARGET)), model((SOURCE, TARGET)), atol=0)
    restored.save(path)  # a loaded int8 model saves as it loaded
    again = keras.saving.load_model(path)
    assert_close(again((SOURCE, TARGET)), model((SOURCE, TARGET)), atol=0)


def test_an_int8_model_decodes_step_by_step_as_its_full_pass():
    model, _ = _quantized()
    full = numpy(model((SOURCE, TARGET)))
    mask = ops.not_equal(SOURCE, 0)
    cache = model.init_cache(model.encode(SOURCE), mask, max_length=8)
    for index in range(TARGET.shape[1]):
        logits, cache = model.decode_step(TARGET[:, index : index + 1], cache, index)
        assert_close(logits[:, 0], full[:, index], atol=1e-4)


@pytest.mark.large  # traces and saves a SavedModel
@pytest.mark.tensorflow_only  # Translator and the export are TensorFlow's
def test_an_int8_translator_exports_a_saved_model_that_translates_as_it(
    sentencepiece_tokenizer, tmp_path
):
    import tensorflow as tf

    from keras_transformer import Translator
    from keras_transformer.export import export_saved_model

    model, _ = _quantized(vocab_size=sentencepiece_tokenizer.vocab_size)
    translator = Translator(model, sentencepiece_tokenizer, beam_size=2, max_extra_length=4)
    sentences = ["A dog runs.", "Two men play."]
    expected = translator.translate(sentences)
    served = tf.saved_model.load(export_saved_model(translator, str(tmp_path / "int8")))
    outputs = served.signatures["serving_default"](text=tf.constant(sentences))["translation"]
    assert [t.decode("utf-8") for t in outputs.numpy()] == expected
