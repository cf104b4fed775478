import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import LearnedPositionalEmbedding
from keras_transformer.layers import PositionalEncoding
from tests import reference
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import run_layer_test


def test_layer_contract():
    run_layer_test(
        PositionalEncoding,
        {},
        np.zeros((2, 9, 16), "float32"),
        expected_output_shape=(2, 9, 16),
        expected_num_trainable_weights=0,
    )


@pytest.mark.parametrize("depth", [512, 7])
def test_equals_formula_at_known_positions(depth):
    out = ops.convert_to_numpy(PositionalEncoding()(np.zeros((1, 60, depth))))
    assert_close(out[0], reference.sinusoid(60, depth), atol=1e-5)
    # Hand-checked values: PE(pos, 2i) = sin(pos / 10000^(2i/d)), cos next.
    assert out[0, 0, 0] == 0.0 and out[0, 0, 1] == 1.0
    np.testing.assert_allclose(out[0, 7, 0], np.sin(7.0), rtol=1e-6)
    np.testing.assert_allclose(out[0, 7, 1], np.cos(7.0), rtol=1e-6)
    np.testing.assert_allclose(
        out[0, 59, 4], np.sin(59 / 10000 ** (4 / depth)), rtol=1e-5, atol=1e-6
    )


def test_start_offset_and_long_sequences():
    layer = PositionalEncoding()
    whole = ops.convert_to_numpy(layer(np.zeros((1, 3000, 8))))
    shifted = ops.convert_to_numpy(layer(np.zeros((2, 4, 8)), start_index=2990))
    assert_close(shifted[1], whole[0, 2990:2994], atol=1e-4)
    assert_close(whole[0], reference.sinusoid(3000, 8), atol=1e-3)


def test_bad_wavelength():
    with pytest.raises(ValueError, match="max_wavelength"):
        PositionalEncoding(max_wavelength=0)


def test_learned_layer_contract():
    run_layer_test(
        LearnedPositionalEmbedding,
        dict(max_length=12),
        np.zeros((2, 9, 16), "float32"),
        expected_output_shape=(2, 9, 16),
        expected_num_trainable_weights=weight_counts.TABLE,
    )


def test_learned_start_offset_reads_the_table():
    layer = LearnedPositionalEmbedding(max_length=10)
    out = ops.convert_to_numpy(layer(np.zeros((2, 3, 4)), start_index=5))
    table = ops.convert_to_numpy(layer.embeddings)
    assert_close(out[0], table[5:8], atol=0)
    assert_close(out[1], table[5:8], atol=0)


def test_learned_bad_length():
    with pytest.raises(ValueError, match="Received: max_length=0"):
        LearnedPositionalEmbedding(max_length=0)
