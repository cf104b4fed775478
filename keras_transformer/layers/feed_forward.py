"""The position-wise feed-forward network (§3.3)."""

import keras

from keras_transformer.layers._utils import clone_initializer
from keras_transformer.layers._utils import on_last_axis
from keras_transformer.layers._utils import sublayer_seed
from keras_transformer_runtime import validation


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """FFN(x) = max(0, xW1 + b1)W2 + b2, applied at every position.

    Maps `d_model -> d_ff -> d_model` (the output size is the input's).

    Args:
        d_ff: inner size, 2048 in the base model.
        activation: inner activation, ReLU in the paper.
        dropout: dropout on the inner activations ("ReLU dropout", off in
            the paper; tensor2tensor's later recipes use it).
        kernel_initializer: initializer of both kernels.
        bias_initializer: initializer of both biases.
        seed: seed of the inner dropout, for reproducible runs.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(..., d_model)`.
        training: whether dropout is active.

    Returns:
        A tensor of the shape of `inputs`.

    Example:

    >>> ffn = FeedForward(d_ff=2048)
    >>> ffn(keras.ops.ones((2, 7, 512))).shape
    TensorShape([2, 7, 512])
    """

    def __init__(
        self,
        d_ff,
        activation="relu",
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        validation.check_positive_int(d_ff=d_ff)
        validation.check_rate(dropout=dropout)
        super().__init__(**kwargs)
        self.d_ff = d_ff
        self.activation = keras.activations.get(activation)
        self.dropout = dropout
        self.seed = seed  # of the dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, inputs_shape):
        d_model = inputs_shape[-1]
        common = dict(dtype=self.dtype_policy)
        self.inner_dense = keras.layers.Dense(
            self.d_ff,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name="inner",
            **common,
        )
        self.inner_dense.build(inputs_shape)
        self.inner_dropout = keras.layers.Dropout(
            self.dropout,
            seed=sublayer_seed(self.seed, "inner_dropout"),
            name="inner_dropout",
            **common,
        )
        self.output_dense = keras.layers.Dense(
            d_model,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            name="output",
            **common,
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs, training=None):
        x = on_last_axis(self.inner_dense, inputs)
        x = self.inner_dropout(x, training=training)
        return on_last_axis(self.output_dense, x)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_ff": self.d_ff,
                "activation": keras.activations.serialize(self.activation),
                "dropout": self.dropout,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

    def compute_output_shape(self, inputs_shape):
        return inputs_shape
