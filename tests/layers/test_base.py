"""What the encoder/decoder layers and stacks share: their arguments, as
`help()` shows them, and seeded dropout."""

import inspect

import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import Decoder
from keras_transformer.layers import DecoderLayer
from keras_transformer.layers import Encoder
from keras_transformer.layers import EncoderLayer

LAYER_ARGUMENTS = [
    "num_heads",
    "d_ff",
    "key_dim",
    "value_dim",
    "dropout",
    "attention_dropout",
    "relu_dropout",
    "activation",
    "norm_first",
    "layer_norm_epsilon",
    "kernel_initializer",
    "bias_initializer",
    "seed",
]
X = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")


@pytest.mark.parametrize(
    "cls, leading",
    [(EncoderLayer, []), (DecoderLayer, []), (Encoder, ["num_layers"]), (Decoder, ["num_layers"])],
)
def test_signature_and_docstring_list_every_argument(cls, leading):
    assert list(inspect.signature(cls).parameters) == leading + LAYER_ARGUMENTS + ["kwargs"]
    for name in leading + LAYER_ARGUMENTS:
        assert f"\n        {name}: " in cls.__doc__, name
    assert "{" not in cls.__doc__.split("Call arguments:")[0]


def test_stacks_take_positional_arguments_like_the_layers():
    encoder = Encoder(3, 4, 32, None, None, 0.0)
    assert (encoder.num_layers, encoder.num_heads, encoder.d_ff, encoder.dropout) == (3, 4, 32, 0.0)


@pytest.mark.parametrize("cls", [EncoderLayer, Encoder])
def test_seed_reproduces_training_outputs(cls):
    arguments = dict(num_heads=4, d_ff=32, dropout=0.5, attention_dropout=0.5, relu_dropout=0.5)
    if cls is Encoder:
        arguments["num_layers"] = 2

    def run(seed, weights=None):
        layer = cls(**arguments, seed=seed)
        layer.build(X.shape)
        if weights is not None:
            layer.set_weights(weights)
        return layer, ops.convert_to_numpy(layer(X, training=True))

    first, expected = run(5)
    weights = first.get_weights()
    np.testing.assert_array_equal(run(5, weights)[1], expected)
    assert not np.allclose(run(6, weights)[1], expected)


@pytest.mark.parametrize("cls", [EncoderLayer, DecoderLayer, Encoder, Decoder])
def test_set_dropout_changes_every_residual_dropout(cls):
    arguments = dict(num_heads=4, d_ff=32, dropout=0.5, seed=3)
    layer = cls(**({"num_layers": 2} if cls in (Encoder, Decoder) else {}), **arguments)
    inputs = (X,) if cls in (EncoderLayer, Encoder) else (X, X)
    inference = ops.convert_to_numpy(layer(*inputs, training=False))
    assert not np.allclose(ops.convert_to_numpy(layer(*inputs, training=True)), inference)
    layer.set_dropout(0.0)  # no dropout left anywhere: training computes as inference
    np.testing.assert_allclose(ops.convert_to_numpy(layer(*inputs, training=True)), inference)
    assert layer.get_config()["dropout"] == 0.0
    layer.set_dropout(0.3)
    assert not np.allclose(ops.convert_to_numpy(layer(*inputs, training=True)), inference)
    assert cls.from_config(layer.get_config()).dropout == 0.3


def test_set_dropout_refuses_a_rate_it_cannot_set():
    with pytest.raises(ValueError, match=r"`rate` must be in \[0, 1\)"):
        EncoderLayer(num_heads=4, d_ff=32, dropout=0.1).set_dropout(1.0)
    layer = Encoder(2, num_heads=4, d_ff=32, dropout=0.0)
    layer.build(X.shape)
    layer.set_dropout(0.0)  # nothing to change
    with pytest.raises(ValueError, match="dropout=0"):
        layer.set_dropout(0.1)  # a Keras Dropout made at 0 has no seed
