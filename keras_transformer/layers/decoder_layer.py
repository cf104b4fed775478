"""One decoder layer: masked self-attention, encoder-decoder attention,
feed-forward (§3.1)."""

import keras

from keras_transformer.layers._base import TransformerLayerBase
from keras_transformer.layers._base import document_layer_arguments
from keras_transformer.layers._cache import check_cache_keys
from keras_transformer.layers._utils import require_built


@keras.saving.register_keras_serializable(package="keras_transformer")
@document_layer_arguments
class DecoderLayer(TransformerLayerBase):
    """Causal self-attention, attention over the encoder output, and a
    feed-forward network, each in a residual connection with dropout and
    layer normalization (post-norm as in the paper, or `norm_first`).

    `call` is the full (training) pass. Incremental decoding goes through
    `call_with_cache(decoder_sequence, cache, index)`, where `cache` is a
    dict:

    * `"self_attention"`: a `"key"`/`"value"` dict of `cache_len` target
      positions, zeros at first (`self.self_attention.initial_cache`);
    * `"cross_attention"`: a `"transposed_key"`/`"value"` dict of the encoder
      output, from `self.cross_attention.project_memory(encoder_sequence)`;
    * `"encoder_padding_mask"`: boolean `(batch, source_len)`.

    Its rows may be a multiple of the cross-attention batch (the beams of a
    sentence, rows together, share one copy of the encoder keys/values).

    Args:
        {layer_arguments}

    Call arguments:
        decoder_sequence: `(batch, target_len, d_model)`.
        encoder_sequence: `(batch, source_len, encoder_dim)`.
        decoder_padding_mask: optional boolean `(batch, target_len)`.
        encoder_padding_mask: optional boolean `(batch, source_len)`.
        training: whether dropout is active.

    Returns:
        `(batch, target_len, d_model)`. `attention_scores` (same arguments,
        no `training`) gives `{"self_attention": ..., "cross_attention":
        ...}`, the probabilities `(batch, num_heads, target_len, key_len)`.

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

    def _residual_dropouts(self):
        return [*super()._residual_dropouts(), self.cross_attention_dropout]

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        training=None,
    ):
        _check_encoder_sequence(encoder_sequence)
        x = decoder_sequence
        y = self._sublayer_input(x, self.self_attention_norm)
        y = self.self_attention(
            y, y, value_mask=decoder_padding_mask, use_causal_mask=True, training=training
        )
        x = self._sublayer_output(
            x, y, self.self_attention_norm, self.self_attention_dropout, training
        )
        y = self._sublayer_input(x, self.cross_attention_norm)
        y = self.cross_attention(
            y, encoder_sequence, value_mask=encoder_padding_mask, training=training
        )
        x = self._sublayer_output(
            x, y, self.cross_attention_norm, self.cross_attention_dropout, training
        )
        return self._feed_forward_block(x, training)

    def call_with_cache(self, decoder_sequence, cache, index, return_attention_scores=False):
        """`call` for target positions `index .. index + steps - 1` of
        `decoder_sequence` `(batch, steps, d_model)`, attending to earlier
        positions through `cache` (see the class docstring); dropout off.

        Returns:
            `(outputs, cache)`: `(batch, steps, d_model)` and the cache with
            these positions' self-attention keys and values written; with
            `return_attention_scores`, `(outputs, cache, cross_scores)`, the
            cross-attention's probabilities `(batch, num_heads, steps,
            source_len)`.
        """
        require_built(self, "call_with_cache")
        check_cache_keys(cache, "cache", CACHE_KEYS)
        x = decoder_sequence
        y = self._sublayer_input(x, self.self_attention_norm)
        y, self_attention = self.self_attention.call_with_cache(y, cache["self_attention"], index)
        x = self._sublayer_output(
            x, y, self.self_attention_norm, self.self_attention_dropout, False
        )
        y = self._sublayer_input(x, self.cross_attention_norm)
        y = self.cross_attention.call_with_memory(
            y,
            cache["cross_attention"],
            cache["encoder_padding_mask"],
            return_attention_scores=return_attention_scores,
        )
        if return_attention_scores:
            y, cross_scores = y
        x = self._sublayer_output(
            x, y, self.cross_attention_norm, self.cross_attention_dropout, False
        )
        outputs = self._feed_forward_block(x, False), {**cache, "self_attention": self_attention}
        return (*outputs, cross_scores) if return_attention_scores else outputs

    def call_with_attention(
        self,
        decoder_sequence,
        encoder_sequence,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        training=None,
    ):
        """`call` that also returns both attentions' probabilities (before
        any attention dropout), each attention computed once: `(outputs,
        {"self_attention": (batch, heads, target_len, target_len),
        "cross_attention": (batch, heads, target_len, source_len)})`.
        Dropout is off unless `training` (guided alignment trains on
        these probabilities)."""
        self._build_for(decoder_sequence, encoder_sequence)
        x = decoder_sequence
        y = self._sublayer_input(x, self.self_attention_norm)
        y, self_scores = self.self_attention(
            y, y, value_mask=decoder_padding_mask, use_causal_mask=True,
            return_attention_scores=True, training=training,
        )  # fmt: skip
        x = self._sublayer_output(
            x, y, self.self_attention_norm, self.self_attention_dropout, training
        )
        y = self._sublayer_input(x, self.cross_attention_norm)
        y, cross_scores = self.cross_attention(
            y, encoder_sequence, value_mask=encoder_padding_mask,
            return_attention_scores=True, training=training,
        )  # fmt: skip
        x = self._sublayer_output(
            x, y, self.cross_attention_norm, self.cross_attention_dropout, training
        )
        scores = {"self_attention": self_scores, "cross_attention": cross_scores}
        return self._feed_forward_block(x, training), scores

    def attention_scores(
        self,
        decoder_sequence,
        encoder_sequence,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
    ):
        """Both attentions' probabilities in `call` (dropout off):
        `{"self_attention": (batch, heads, target_len, target_len),
        "cross_attention": (batch, heads, target_len, source_len)}`."""
        return self.call_with_attention(
            decoder_sequence, encoder_sequence, decoder_padding_mask, encoder_padding_mask
        )[1]

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape


CACHE_KEYS = ("self_attention", "cross_attention", "encoder_padding_mask")


def _check_encoder_sequence(encoder_sequence):
    if encoder_sequence is None:
        raise ValueError(
            "The decoder's `call` needs `encoder_sequence`; for decoding with a cache of the "
            "encoder keys and values use `call_with_cache`. Received: encoder_sequence=None"
        )
