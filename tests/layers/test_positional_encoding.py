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


def marian_sinusoid(length, depth):
    """Marian's table: the frequencies of the paper, sines in the first
    ceil(d/2) features, cosines in the rest (Hugging Face's layout)."""
    angles = np.array(
        [[pos / 10000 ** (2 * (j // 2) / depth) for j in range(depth)] for pos in range(length)]
    )
    return np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], axis=1)


@pytest.mark.parametrize("depth", [16, 7])
def test_concatenated_layout_equals_marians_table(depth):
    layer = PositionalEncoding(layout="concatenated")
    out = ops.convert_to_numpy(layer(np.zeros((1, 50, depth))))
    assert_close(out[0], marian_sinusoid(50, depth), atol=1e-5)
    # The same values as the paper's layout, features permuted.
    paper = ops.convert_to_numpy(PositionalEncoding()(np.zeros((1, 50, depth))))
    order = list(range(0, depth, 2)) + list(range(1, depth, 2))
    assert_close(out[0], paper[0][:, order], atol=1e-6)
    restored = PositionalEncoding.from_config(layer.get_config())
    assert restored.layout == "concatenated"


def test_bad_wavelength_and_layout():
    with pytest.raises(ValueError, match="max_wavelength"):
        PositionalEncoding(max_wavelength=0)
    with pytest.raises(ValueError, match="Received: layout='halves'"):
        PositionalEncoding(layout="halves")


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
