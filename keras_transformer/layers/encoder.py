"""The encoder: a stack of `num_layers` identical `EncoderLayer`s."""

import keras

from keras_transformer.layers import _validation
from keras_transformer.layers._base import TransformerLayerBase
from keras_transformer.layers.encoder_layer import EncoderLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(TransformerLayerBase):
    """`num_layers` `EncoderLayer`s (N = 6 in the paper).

    Takes embedded inputs (token embeddings + positions); with
    `norm_first=True` a final `LayerNormalization` follows the stack, as
    pre-norm Transformers need.

    Args:
        num_layers: number of layers N.
        Other arguments: see `TransformerLayerBase`; every layer gets them.

    Call arguments:
        inputs: `(batch, seq_len, d_model)`.
        padding_mask: optional boolean `(batch, seq_len)`, `True` at real
            tokens.
        training: whether dropout is active.

    Returns:
        `(batch, seq_len, d_model)`.

    Example:

    >>> encoder = Encoder(num_layers=6, num_heads=8, d_ff=2048)
    >>> encoder(keras.random.normal((2, 10, 512))).shape
    TensorShape([2, 10, 512])
    """

    def __init__(self, num_layers, num_heads, d_ff, **kwargs):
        super().__init__(num_heads, d_ff, **kwargs)
        _validation.check_positive_int("num_layers", num_layers)
        self.num_layers = num_layers

    def get_config(self):
        config = super().get_config()
        config["num_layers"] = self.num_layers
        return config

    def build(self, inputs_shape):
        self.stack = []
        for i in range(self.num_layers):
            layer = EncoderLayer(
                **self.layer_arguments(), dtype=self.dtype_policy, name=f"layer_{i}"
            )
            layer.build(inputs_shape)
            self.stack.append(layer)
        self.final_norm = (
            self._make_norm("final_norm", inputs_shape) if self.norm_first else None
        )
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        x = inputs
        for layer in self.stack:
            x = layer(x, padding_mask=padding_mask, training=training)
        return self.final_norm(x) if self.final_norm is not None else x

    def compute_output_shape(self, inputs_shape):
        return inputs_shape
