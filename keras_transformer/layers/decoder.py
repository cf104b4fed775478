"""The decoder: a stack of `num_layers` identical `DecoderLayer`s."""

import keras
from keras import ops

from keras_transformer.layers._base import LayerStackBase
from keras_transformer.layers._base import document_layer_arguments
from keras_transformer.layers.decoder_layer import DecoderLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
@document_layer_arguments
class Decoder(LayerStackBase):
    """`num_layers` `DecoderLayer`s (N = 6 in the paper), with caches for
    incremental decoding.

    Takes embedded targets and the encoder output; with `norm_first=True` a
    final `LayerNormalization` follows the stack.

    Incremental decoding keeps two caches, each a tuple with one
    `(keys, values)` pair per layer: `initial_self_attention_cache` (zeros,
    filled one position per step) and `cross_attention_cache` (the encoder
    output projected once per source). Their shapes never change, so a
    decoding loop traces once.

    Args:
        num_layers: number of layers N (6 in the paper).
        {layer_arguments}

    Call arguments:
        decoder_sequence: `(batch, target_len, d_model)`.
        encoder_sequence: `(batch, source_len, d_model)`; not needed when a
            `cross_attention_cache` is given.
        decoder_padding_mask: optional boolean `(batch, target_len)`.
        encoder_padding_mask: optional boolean `(batch, source_len)`.
        self_attention_cache: optional per-layer self-attention caches.
        cross_attention_cache: optional per-layer encoder keys/values.
        cache_update_index: position of `decoder_sequence[:, 0]`.
        training: whether dropout is active.
        return_attention_scores: also return a list with each layer's
            `{"self_attention": ..., "cross_attention": ...}` probabilities.

    Returns:
        `(batch, target_len, d_model)`; the scores follow if asked, then the
        updated self-attention cache if one is given.

    Example:

    >>> decoder = Decoder(num_layers=6, num_heads=8, d_ff=2048)
    >>> memory = keras.random.normal((2, 10, 512))
    >>> decoder(keras.random.normal((2, 7, 512)), memory).shape
    TensorShape([2, 7, 512])
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self._make_stack(DecoderLayer, decoder_sequence_shape, encoder_sequence_shape)
        self.built = True

    def initial_self_attention_cache(self, batch_size, cache_length):
        """Zero self-attention caches for `cache_length` target positions."""
        cache = []
        for layer in self.stack:
            attention = layer.self_attention
            shape = (batch_size, attention.num_heads, cache_length)
            cache.append(
                (
                    ops.zeros(shape + (attention.key_dim,), self.compute_dtype),
                    ops.zeros(shape + (attention.value_dim,), self.compute_dtype),
                )
            )
        return tuple(cache)

    def cross_attention_cache(self, encoder_sequence):
        """Per-layer keys and values of `encoder_sequence`, computed once."""
        return tuple(
            layer.cross_attention.project_key_value(encoder_sequence) for layer in self.stack
        )

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
        x = decoder_sequence
        new_cache, scores = [], []
        for i, layer in enumerate(self.stack):
            outputs = layer(
                x,
                encoder_sequence,
                decoder_padding_mask=decoder_padding_mask,
                encoder_padding_mask=encoder_padding_mask,
                self_attention_cache=(
                    None if self_attention_cache is None else self_attention_cache[i]
                ),
                cross_attention_cache=(
                    None if cross_attention_cache is None else cross_attention_cache[i]
                ),
                cache_update_index=cache_update_index,
                training=training,
                return_attention_scores=True,
            )
            x, layer_scores = outputs[0], outputs[1]
            scores.append(layer_scores)
            if self_attention_cache is not None:
                new_cache.append(outputs[2])
        if self.final_norm is not None:
            x = self.final_norm(x)
        outputs = (x,)
        if return_attention_scores:
            outputs += (scores,)
        if self_attention_cache is not None:
            outputs += (tuple(new_cache),)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape
