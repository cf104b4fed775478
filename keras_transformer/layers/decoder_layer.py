"""One decoder layer: masked self-attention, encoder-decoder attention,
feed-forward (§3.1)."""

import keras

from keras_transformer.layers._base import TransformerLayerBase
from keras_transformer.layers._base import document_layer_arguments


@keras.saving.register_keras_serializable(package="keras_transformer")
@document_layer_arguments
class DecoderLayer(TransformerLayerBase):
    """Causal self-attention, attention over the encoder output, and a
    feed-forward network, each in a residual connection with dropout and
    layer normalization (post-norm as in the paper, or `norm_first`).

    For incremental decoding pass `self_attention_cache` (zeros from
    `CachedMultiHeadAttention.project_key_value`'s shape, `cache_len` positions)
    with `cache_update_index`, and `cross_attention_cache` (the encoder
    output projected once by `self.cross_attention.project_key_value`);
    `encoder_sequence` is then not needed.

    Args:
        {layer_arguments}

    Call arguments:
        decoder_sequence: `(batch, target_len, d_model)`.
        encoder_sequence: `(batch, source_len, encoder_dim)`.
        decoder_padding_mask: optional boolean `(batch, target_len)`.
        encoder_padding_mask: optional boolean `(batch, source_len)`.
        self_attention_cache: optional `(keys, values)` self-attention cache.
        cross_attention_cache: optional `(keys, values)` of the encoder
            output.
        cache_update_index: where the new positions go in the cache.
        training: whether dropout is active.
        return_attention_scores: also return `{"self_attention": ...,
            "cross_attention": ...}`, the probabilities `(batch, num_heads,
            target_len, key_len)` of both attentions.

    Returns:
        `(batch, target_len, d_model)`; the scores dict follows if asked,
        then the self-attention cache if one is given.

    Example:

    >>> layer = DecoderLayer(num_heads=8, d_ff=2048)
    >>> target = keras.random.normal((2, 7, 512))
    >>> memory = keras.random.normal((2, 10, 512))
    >>> layer(target, memory).shape
    TensorShape([2, 7, 512])
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        encoder_sequence_shape = encoder_sequence_shape or decoder_sequence_shape
        self._build_self_attention(decoder_sequence_shape)
        self.cross_attention = self._make_attention(
            "cross_attention", decoder_sequence_shape, encoder_sequence_shape
        )
        self.cross_attention_norm, self.cross_attention_dropout = self._make_residual(
            "cross_attention", decoder_sequence_shape
        )
        self._build_feed_forward(decoder_sequence_shape)
        self.built = True

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        cross_attention_cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
    ):
        if encoder_sequence is None and cross_attention_cache is None:
            raise ValueError("DecoderLayer needs `encoder_sequence` or `cross_attention_cache`.")
        x = decoder_sequence
        y = self._sublayer_input(x, self.self_attention_norm)
        y = self.self_attention(
            y,
            y,
            value_mask=decoder_padding_mask,
            use_causal_mask=True,
            training=training,
            cache=self_attention_cache,
            cache_update_index=cache_update_index,
            return_attention_scores=True,
        )
        if self_attention_cache is not None:
            y, self_scores, self_attention_cache = y
        else:
            y, self_scores = y
        x = self._sublayer_output(
            x, y, self.self_attention_norm, self.self_attention_dropout, training
        )

        y = self._sublayer_input(x, self.cross_attention_norm)
        y = self.cross_attention(
            y,
            encoder_sequence,
            value_mask=encoder_padding_mask,
            attention_mask=None,
            training=training,
            cache=cross_attention_cache,
            return_attention_scores=True,
        )
        y, cross_scores = y[0], y[1]
        x = self._sublayer_output(
            x, y, self.cross_attention_norm, self.cross_attention_dropout, training
        )

        y = self._sublayer_input(x, self.feed_forward_norm)
        y = self.feed_forward(y, training=training)
        x = self._sublayer_output(x, y, self.feed_forward_norm, self.feed_forward_dropout, training)
        outputs = (x,)
        if return_attention_scores:
            outputs += ({"self_attention": self_scores, "cross_attention": cross_scores},)
        if self_attention_cache is not None:
            outputs += (self_attention_cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape
