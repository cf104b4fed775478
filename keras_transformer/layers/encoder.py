"""The encoder: a stack of `num_layers` identical `EncoderLayer`s."""

import keras

from keras_transformer.layers._base import LayerStackBase
from keras_transformer.layers._base import document_layer_arguments
from keras_transformer.layers.encoder_layer import EncoderLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
@document_layer_arguments
class Encoder(LayerStackBase):
    """`num_layers` `EncoderLayer`s (N = 6 in the paper).

    Takes embedded inputs (token embeddings + positions); with
    `norm_first=True` a final `LayerNormalization` follows the stack, as
    pre-norm Transformers need.

    Args:
        num_layers: number of layers N (6 in the paper).
        {layer_arguments}

    Call arguments:
        inputs: `(batch, seq_len, d_model)`.
        padding_mask: optional boolean `(batch, seq_len)`, `True` at real
            tokens.
        training: whether dropout is active.

    Returns:
        `(batch, seq_len, d_model)`. `attention_scores` (same arguments, no
        `training`) gives each layer's self-attention probabilities.

    Example:

    >>> encoder = Encoder(num_layers=6, num_heads=8, d_ff=2048)
    >>> encoder(keras.random.normal((2, 10, 512))).shape
    TensorShape([2, 10, 512])
    """

    def build(self, inputs_shape):
        self._make_stack(EncoderLayer, inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        x = inputs
        for layer in self.stack:
            x = layer(x, padding_mask=padding_mask, training=training)
        return self._final(x)

    def attention_scores(self, inputs, padding_mask=None):
        """Each layer's self-attention probabilities in `call` (dropout
        off): a list of `(batch, num_heads, seq_len, seq_len)`."""
        self._build_for(inputs)
        x, scores = inputs, []
        for layer in self.stack:
            scores.append(layer.attention_scores(x, padding_mask=padding_mask))
            x = layer(x, padding_mask=padding_mask, training=False)
        return scores

    def compute_output_shape(self, inputs_shape):
        return inputs_shape
