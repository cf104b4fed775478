"""`Transformer`'s methods for generation: a fixed-shape cache in two
named parts, and one decoding step through it."""

from keras import ops
from keras import tree

from keras_transformer.layers._cache import check_cache_keys
from keras_transformer.layers._cache import write_at


class CachedDecoding:
    """The cache and the decoding step of `Transformer` (a mixin: it uses
    the model's `decoder`, `max_length`, `_embed`, `_target_embedding`,
    `target_positions` and `_logits`).

    `init_cache` prepares the decoder's state for a batch of encoded
    sources, `decode_step` feeds one or more target tokens at a position
    and returns their logits with the cache updated, and `resize_cache`
    grows the part of the cache that a search grows. Shapes never change
    within a step, so a `tf.while_loop` over `decode_step` traces once.
    """

    def init_cache(self, encoder_output, source_padding_mask, max_length=None, aligned=False):
        """Fixed-shape decoding state for `decode_step`, in two parts:

        * `"per_hypothesis"`: what belongs to one output prefix, and what a
          beam search must reorder whenever it reorders its hypotheses:
          `{"self_attention": per layer {"key", "value"}}`, `(batch,
          num_heads, max_length, head_dim)` each, zeros at first;
        * `"per_sentence"`: what depends on the source only and is never
          written: `{"cross_attention": per layer {"transposed_key",
          "value"} (see `MultiHeadAttention.project_memory`),
          "encoder_padding_mask": (batch, source_len)}`.

        With `aligned`, the per-hypothesis part also holds `"alignment"`
        `(batch, 1, max_length, source_len)` float32, zeros at first:
        `decode_step` with an `alignment_layer` writes, at each position it
        decodes, the mean over heads of that decoder layer's
        cross-attention (what aligns the token predicted there with the
        source, as Marian and CTranslate2 align).

        A search may repeat the per-hypothesis part `k` times per sentence
        (rows of a sentence together) and keep the per-sentence part as it
        is: `decode_step` then lets the `k` rows of a sentence share its
        one copy of the encoder keys/values.

        Args:
            encoder_output: `(batch, source_len, d_model)` from `encode`.
            source_padding_mask: boolean `(batch, source_len)`.
            max_length: target positions the cache holds (default
                `self.max_length`).
            aligned: whether to hold the `"alignment"` as above.

        Returns:
            `{"per_hypothesis": ..., "per_sentence": ...}` as above; every
            tensor has the batch as its first axis.
        """
        length = self.max_length if max_length is None else max_length
        decoder_cache = self.decoder.initial_cache(
            encoder_output, source_padding_mask, cache_length=length
        )
        per_hypothesis = {"self_attention": decoder_cache["self_attention"]}
        if aligned:
            shape = ops.shape(source_padding_mask)
            per_hypothesis["alignment"] = ops.zeros((shape[0], 1, length, shape[1]), "float32")
        return {
            "per_hypothesis": per_hypothesis,
            "per_sentence": {
                "cross_attention": decoder_cache["cross_attention"],
                "encoder_padding_mask": decoder_cache["encoder_padding_mask"],
            },
        }

    def resize_cache(self, per_hypothesis, length):
        """The `"per_hypothesis"` part of a cache (from `init_cache`) holding
        `length` target positions (an int or scalar tensor): its first
        `length` positions kept, zeros for new ones. The searches take it
        as `resize_cache` to grow the cache as decoding goes on.

        Example:

        >>> cache = model.init_cache(encoder_output, mask, max_length=8)
        >>> longer = model.resize_cache(cache["per_hypothesis"], 16)
        """

        def resize(buffer):  # (rows, heads, positions, depth)
            kept = buffer[:, :, :length]
            shape = ops.shape(kept)
            missing = ops.maximum(length - shape[2], 0)
            zeros = ops.zeros((shape[0], shape[1], missing, shape[3]), buffer.dtype)
            return ops.concatenate([kept, zeros], axis=2)

        return tree.map_structure(resize, per_hypothesis)

    def decode_step(self, target_ids, cache, index, alignment_layer=None):
        """Decodes `target_ids` `(rows, steps)` placed at positions
        `index .. index + steps - 1`, reusing and updating `cache`.

        `rows` is the per-hypothesis batch of `cache`, a multiple of its
        per-sentence batch (beams of a sentence on consecutive rows). A
        cache from `init_cache(aligned=True)` gets its `"alignment"` written
        at these positions, from the same pass: the `alignment_attention`
        of decoder layer `alignment_layer` (default the model's).

        Returns:
            `(logits, cache)`: float32 logits `(rows, steps, vocab)`, equal
            to those of the full forward pass at these positions, and the
            cache with these positions written.

        Example:

        >>> cache = model.init_cache(encoder_output, mask, max_length=8, aligned=True)
        >>> logits, cache = model.decode_step(bos_ids, cache, 0)
        >>> cache["per_hypothesis"]["alignment"][:, 0, 0]  # (rows, source_len)
        """
        check_cache_keys(cache, "cache", ("per_hypothesis", "per_sentence"))
        aligned = "alignment" in cache["per_hypothesis"]
        if alignment_layer is not None and not aligned:
            raise ValueError(
                "`alignment_layer` needs a cache from `init_cache(aligned=True)`. Received: "
                f"alignment_layer={alignment_layer!r} and a cache without an alignment"
            )
        if aligned and alignment_layer is None:
            alignment_layer = self.alignment_layer
        x = self._embed(target_ids, self._target_embedding(), self.target_positions, index, False)
        x, decoder_cache, *cross_scores = self.decoder.call_with_cache(
            x, {**cache["per_hypothesis"], **cache["per_sentence"]}, index, alignment_layer
        )
        per_hypothesis = {"self_attention": decoder_cache["self_attention"]}
        if aligned:
            alignment = ops.expand_dims(self.alignment_attention(cross_scores[0]), 1)
            written = write_at(cache["per_hypothesis"]["alignment"], alignment, index)
            per_hypothesis["alignment"] = written
        return self._logits(x), {**cache, "per_hypothesis": per_hypothesis}
