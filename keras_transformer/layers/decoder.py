"""The decoder: a stack of `num_layers` identical `DecoderLayer`s."""

import keras
from keras import ops

from keras_transformer.layers._base import LayerStackBase
from keras_transformer.layers._base import document_layer_arguments
from keras_transformer.layers._cache import check_cache_keys
from keras_transformer.layers._utils import require_built
from keras_transformer.layers.decoder_layer import CACHE_KEYS
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.decoder_layer import _check_encoder_sequence
from keras_transformer_runtime import validation


@keras.saving.register_keras_serializable(package="keras_transformer")
@document_layer_arguments
class Decoder(LayerStackBase):
    """`num_layers` `DecoderLayer`s (N = 6 in the paper).

    Takes embedded targets and the encoder output; with `norm_first=True` a
    final `LayerNormalization` follows the stack.

    `call` is the full (training) pass. Incremental decoding goes through
    `call_with_cache(decoder_sequence, cache, index)`, where `cache` is a
    dict (from `initial_cache`) whose shapes never change, so a decoding
    loop traces once:

    * `"self_attention"`: per layer, a `"key"`/`"value"` dict of `cache_len`
      target positions, filled one step at a time;
    * `"cross_attention"`: per layer, a `"transposed_key"`/`"value"` dict of
      the encoder output, projected once per source;
    * `"encoder_padding_mask"`: boolean `(batch, source_len)`.

    Args:
        num_layers: number of layers N (6 in the paper).
        {layer_arguments}

    Call arguments:
        decoder_sequence: `(batch, target_len, d_model)`.
        encoder_sequence: `(batch, source_len, d_model)`.
        decoder_padding_mask: optional boolean `(batch, target_len)`.
        encoder_padding_mask: optional boolean `(batch, source_len)`.
        training: whether dropout is active.

    Returns:
        `(batch, target_len, d_model)`. `attention_scores` (same arguments,
        no `training`) gives each layer's `{"self_attention": ...,
        "cross_attention": ...}` probabilities.

    Example:

    >>> decoder = Decoder(num_layers=6, num_heads=8, d_ff=2048)
    >>> memory = keras.random.normal((2, 10, 512))
    >>> decoder(keras.random.normal((2, 7, 512)), memory).shape
    TensorShape([2, 7, 512])
    >>> cache = decoder.initial_cache(memory, ops.ones((2, 10), "bool"), cache_length=20)
    >>> step, cache = decoder.call_with_cache(keras.random.normal((2, 1, 512)), cache, 0)
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self._make_stack(DecoderLayer, decoder_sequence_shape, encoder_sequence_shape)
        self.built = True

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
        for layer in self.stack:
            x = layer(
                x,
                encoder_sequence,
                decoder_padding_mask=decoder_padding_mask,
                encoder_padding_mask=encoder_padding_mask,
                training=training,
            )
        return self._final(x)

    def initial_cache(self, encoder_sequence, encoder_padding_mask, cache_length, batch_size=None):
        """The cache of `call_with_cache` before the first step: empty
        self-attention caches for `cache_length` positions and `batch_size`
        rows (default the encoder batch), and the encoder keys/values."""
        require_built(self, "initial_cache")
        if batch_size is None:
            batch_size = ops.shape(encoder_sequence)[0]
        return {
            "self_attention": tuple(
                layer.self_attention.initial_cache(batch_size, cache_length) for layer in self.stack
            ),
            "cross_attention": tuple(
                layer.cross_attention.project_memory(encoder_sequence) for layer in self.stack
            ),
            "encoder_padding_mask": encoder_padding_mask,
        }

    def call_with_cache(self, decoder_sequence, cache, index, attention_layer=None):
        """`call` for target positions `index .. index + steps - 1` of
        `decoder_sequence` `(batch, steps, d_model)` through `cache` (see
        the class docstring); dropout off.

        Returns:
            `(outputs, cache)`: `(batch, steps, d_model)` and the cache with
            these positions written; with `attention_layer` (an index into
            the layers), `(outputs, cache, cross_scores)`: that layer's
            cross-attention probabilities `(batch, num_heads, steps,
            source_len)` too.
        """
        require_built(self, "call_with_cache")
        check_cache_keys(cache, "cache", CACHE_KEYS)
        for entry in ("self_attention", "cross_attention"):
            if len(cache[entry]) != len(self.stack):
                raise ValueError(
                    f'`cache["{entry}"]` must have one entry per layer ({len(self.stack)}). '
                    f"Received: {len(cache[entry])} entries"
                )
        chosen = _layer_index(attention_layer, len(self.stack))
        x, self_attention, cross_scores = decoder_sequence, [], None
        for i, (layer, layer_self, layer_cross) in enumerate(
            zip(self.stack, cache["self_attention"], cache["cross_attention"], strict=True)
        ):
            layer_cache = {
                "self_attention": layer_self,
                "cross_attention": layer_cross,
                "encoder_padding_mask": cache["encoder_padding_mask"],
            }
            x, layer_cache, *scores = layer.call_with_cache(
                x, layer_cache, index, return_attention_scores=i == chosen
            )
            if scores:
                (cross_scores,) = scores
            self_attention.append(layer_cache["self_attention"])
        outputs = self._final(x), {**cache, "self_attention": tuple(self_attention)}
        return outputs if chosen is None else (*outputs, cross_scores)

    def call_with_attention(
        self,
        decoder_sequence,
        encoder_sequence,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        training=None,
    ):
        """`call` that also returns each layer's attention probabilities, in
        one pass: `(outputs, [{"self_attention": ..., "cross_attention":
        ...}, ...])` (`DecoderLayer.call_with_attention`); dropout off
        unless `training`."""
        self._build_for(decoder_sequence, encoder_sequence)
        x, scores = decoder_sequence, []
        masks = dict(
            decoder_padding_mask=decoder_padding_mask, encoder_padding_mask=encoder_padding_mask
        )
        for layer in self.stack:
            x, layer_scores = layer.call_with_attention(
                x, encoder_sequence, **masks, training=training
            )
            scores.append(layer_scores)
        return self._final(x), scores

    def attention_scores(
        self,
        decoder_sequence,
        encoder_sequence,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
    ):
        """Each layer's attention probabilities in `call` (dropout off): a
        list of `{"self_attention": ..., "cross_attention": ...}`."""
        return self.call_with_attention(
            decoder_sequence, encoder_sequence, decoder_padding_mask, encoder_padding_mask
        )[1]

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape


def _layer_index(layer, layers):
    """`layer` (an index into `layers` layers, negative from the end, or
    None) as a position from the start; a `ValueError` out of range."""
    if layer is None:
        return None
    validation.check_index(layers, "decoder layers", attention_layer=layer)
    return layer % layers
