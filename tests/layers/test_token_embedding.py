import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import TokenEmbedding
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import run_layer_test


def test_layer_contract():
    run_layer_test(
        TokenEmbedding,
        dict(vocab_size=20, d_model=8),
        np.array([[1, 2, 3, 0], [4, 5, 0, 0]]),
        expected_output_shape=(2, 4, 8),
        expected_num_trainable_weights=weight_counts.TABLE,
    )


def test_lookup_is_scaled_by_sqrt_d_model():
    layer = TokenEmbedding(vocab_size=20, d_model=16)
    ids = np.array([[3, 7, 0]])
    out = ops.convert_to_numpy(layer(ids))
    table = ops.convert_to_numpy(layer.embeddings)
    assert_close(out[0], table[[3, 7, 0]] * 4.0, atol=1e-6)
    unscaled = TokenEmbedding(vocab_size=20, d_model=16, scale=False)
    unscaled.build()
    unscaled.set_weights([table])
    assert_close(unscaled(ids)[0], table[[3, 7, 0]], atol=0)


def test_reverse_projects_with_the_same_matrix():
    layer = TokenEmbedding(vocab_size=20, d_model=16)
    x = np.random.default_rng(0).normal(size=(2, 3, 16)).astype("float32")
    layer.build()
    logits = layer(x, reverse=True)
    assert_close(logits, x @ ops.convert_to_numpy(layer.embeddings).T, atol=1e-5)


def test_default_initializer_gives_unit_variance_lookups():
    layer = TokenEmbedding(vocab_size=4000, d_model=64)
    out = ops.convert_to_numpy(layer(np.arange(4000)[None]))
    assert abs(out.std() - 1.0) < 0.05


def test_out_of_range_ids_raise():
    layer = TokenEmbedding(vocab_size=20, d_model=4)
    with pytest.raises(ValueError, match="vocab_size=20"):
        layer(np.array([[1, 20]]))
    with pytest.raises(ValueError, match="vocab_size=20"):
        layer(np.array([[-1, 2]]))


@pytest.mark.tensorflow_only
def test_out_of_range_ids_raise_in_a_graph():
    import tensorflow as tf

    layer = TokenEmbedding(vocab_size=20, d_model=4)

    @tf.function
    def in_graph(ids):
        return layer(ids)

    with pytest.raises(tf.errors.InvalidArgumentError, match="vocab_size=20"):
        in_graph(tf.constant([[1, 25]]))


@pytest.mark.parametrize(
    "name, kwargs",
    [("vocab_size", dict(vocab_size=0, d_model=4)), ("d_model", dict(vocab_size=5, d_model=-2))],
)
def test_bad_arguments(name, kwargs):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        TokenEmbedding(**kwargs)


def _abs_max_int8(x, axis):
    """NumPy's abs-max quantization: `(int8 values, scale)`, `x ≈ q / scale`."""
    scale = 127.0 / np.maximum(np.abs(x).max(axis=axis, keepdims=True), 1e-7)
    return np.clip(np.round(x * scale), -127, 127), scale


def test_int8_quantizes_the_lookup_and_the_tied_projection():
    layer = TokenEmbedding(vocab_size=20, d_model=16)
    layer.build()
    table = ops.convert_to_numpy(layer.embeddings)
    layer.quantize("int8")
    assert str(layer._embeddings.dtype) == "int8" and layer.quantization_mode == "int8"
    rows, row_scale = _abs_max_int8(table, axis=-1)  # a scale per vocabulary entry
    ids = np.array([[3, 7, 0]])
    assert_close(layer(ids)[0], rows[[3, 7, 0]] / row_scale[[3, 7, 0]] * 4.0, atol=1e-5)
    x = np.random.default_rng(0).normal(size=(2, 3, 16)).astype("float32")
    inputs, input_scale = _abs_max_int8(x, axis=-1)  # a scale per hidden state
    expected = (inputs @ rows.T) / (input_scale * row_scale[:, 0])
    assert_close(layer(x, reverse=True), expected, atol=1e-4, rtol=1e-4)
    # Within int8's rounding of the float projection.
    assert_close(layer(x, reverse=True), x @ table.T, atol=0.05)


def test_int8_only():
    layer = TokenEmbedding(vocab_size=20, d_model=16)
    layer.build()
    with pytest.raises(ValueError, match="Received: mode='int4'"):
        layer.quantize("int4")
