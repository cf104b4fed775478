"""One encoder layer: self-attention, then feed-forward (§3.1)."""

import keras

from keras_transformer.layers._base import TransformerLayerBase
from keras_transformer.layers._base import document_layer_arguments


@keras.saving.register_keras_serializable(package="keras_transformer")
@document_layer_arguments
class EncoderLayer(TransformerLayerBase):
    """Self-attention and a feed-forward network, each wrapped in a residual
    connection with dropout and layer normalization.

    Post-norm (the paper): `x = LayerNorm(x + Dropout(SelfAttention(x)))`,
    then `x = LayerNorm(x + Dropout(FFN(x)))`. With `norm_first=True`
    (pre-norm) the normalization moves inside the residual branch.
    The feature size `d_model` is that of the inputs.

    Args:
        {layer_arguments}

    Call arguments:
        inputs: `(batch, seq_len, d_model)`.
        padding_mask: optional boolean `(batch, seq_len)`, `True` at real
            tokens; pad positions are hidden as keys.
        attention_mask: optional boolean `(batch, seq_len, seq_len)`.
        training: whether dropout is active.

    Returns:
        `(batch, seq_len, d_model)`. `attention_scores` (same arguments, no
        `training`) gives the self-attention probabilities `(batch,
        num_heads, seq_len, seq_len)`.

    Example:

    >>> layer = EncoderLayer(num_heads=8, d_ff=2048)
    >>> x = keras.random.normal((2, 10, 512))
    >>> mask = keras.ops.arange(10)[None, :] < keras.ops.array([[10], [6]])
    >>> layer(x, padding_mask=mask).shape
    TensorShape([2, 10, 512])
    """

    def build(self, inputs_shape):
        self._build_self_attention(inputs_shape)
        self._build_feed_forward(inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, attention_mask=None, training=None):
        x = inputs
        y = self._sublayer_input(x, self.self_attention_norm)
        y = self.self_attention(
            y, y, value_mask=padding_mask, attention_mask=attention_mask, training=training
        )
        x = self._sublayer_output(
            x, y, self.self_attention_norm, self.self_attention_dropout, training
        )
        return self._feed_forward_block(x, training)

    def attention_scores(self, inputs, padding_mask=None, attention_mask=None):
        """The self-attention probabilities of `call` (dropout off):
        `(batch, num_heads, seq_len, seq_len)`."""
        self._build_for(inputs)
        y = self._sublayer_input(inputs, self.self_attention_norm)
        return self.self_attention.attention_scores(
            y, y, value_mask=padding_mask, attention_mask=attention_mask
        )

    def compute_output_shape(self, inputs_shape):
        return inputs_shape
