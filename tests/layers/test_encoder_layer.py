import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import Encoder
from keras_transformer.layers import EncoderLayer
from tests import reference
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import run_layer_test

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 6, 16)).astype("float32")
MASK = np.array([[1] * 6, [1] * 4 + [0] * 2], bool)


def test_layer_contract():
    run_layer_test(
        EncoderLayer,
        dict(num_heads=4, d_ff=32, dropout=0.1, attention_dropout=0.1, relu_dropout=0.1),
        {"inputs": X, "padding_mask": MASK},
        expected_output_shape=(2, 6, 16),
        expected_num_trainable_weights=weight_counts.ENCODER_LAYER,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_equals_reference(norm_first):
    layer = EncoderLayer(num_heads=4, d_ff=32, norm_first=norm_first)
    out = layer(X, padding_mask=MASK)
    assert_close(out, reference.encoder_layer(X, layer, MASK), atol=1e-4)


def test_post_norm_output_is_normalized():
    out = ops.convert_to_numpy(EncoderLayer(num_heads=4, d_ff=32)(X))
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(out.std(-1), 1.0, atol=1e-3)


def test_dropout_only_in_training():
    layer = EncoderLayer(num_heads=4, d_ff=32, dropout=0.5)
    a = ops.convert_to_numpy(layer(X))
    assert_close(layer(X, training=False), a, atol=0)
    assert not np.allclose(ops.convert_to_numpy(layer(X, training=True)), a)


def test_padding_does_not_leak():
    layer = EncoderLayer(num_heads=4, d_ff=32)
    changed = X.copy()
    changed[1, 4:] = 100.0  # pad positions
    a = ops.convert_to_numpy(layer(X, padding_mask=MASK))
    b = ops.convert_to_numpy(layer(changed, padding_mask=MASK))
    assert_close(b[1, :4], a[1, :4], atol=1e-5)


def test_d_model_must_divide_by_heads():
    layer = EncoderLayer(num_heads=5, d_ff=32)
    with pytest.raises(ValueError, match="Received: d_model=16"):
        layer(X)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_heads=0, d_ff=4), "num_heads"),
        (dict(num_heads=2, d_ff=0), "d_ff"),
        (dict(num_heads=2, d_ff=4, dropout=1.0), "dropout"),
        (dict(num_heads=2, d_ff=4, attention_dropout=-1), "attention_dropout"),
        (dict(num_heads=2, d_ff=4, relu_dropout=2), "relu_dropout"),
    ],
)
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        EncoderLayer(**kwargs)


def test_encoder_stack_contract():
    run_layer_test(
        Encoder,
        dict(num_layers=2, num_heads=4, d_ff=32),
        {"inputs": X, "padding_mask": MASK},
        expected_output_shape=(2, 6, 16),
        expected_num_trainable_weights=2 * weight_counts.ENCODER_LAYER,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack_equals_composed_layers(norm_first):
    encoder = Encoder(num_layers=3, num_heads=4, d_ff=32, norm_first=norm_first)
    out = encoder(X, padding_mask=MASK)
    expected = X
    for layer in encoder.stack:
        expected = reference.encoder_layer(expected, layer, MASK)
    if norm_first:
        expected = reference.layer_norm(expected, encoder.final_norm)
    assert_close(out, expected, atol=1e-4)
    assert (encoder.final_norm is not None) == norm_first


def test_encoder_bad_num_layers():
    with pytest.raises(ValueError, match="Received: num_layers=0"):
        Encoder(num_layers=0, num_heads=2, d_ff=4)
