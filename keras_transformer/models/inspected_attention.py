"""The attention probabilities of `Transformer`'s forward pass, for plots
and for aligning each output token with the source (a mixin: it uses the
model's `encoder`, `decoder`, `pad_id`, `encode`, `_embed`, the embeddings,
the position encodings and `_logits`)."""

from keras_transformer.layers.masking import padding_mask


class InspectedAttention:
    """What each attention of `Transformer` looked at, dropout off."""

    def logits_and_attention(self, source_ids, target_ids, training=None):
        """`call` that also returns each decoder layer's attention
        probabilities from the same pass: `(logits, [{"self_attention":
        ..., "cross_attention": ...}, ...])`, each `(batch, num_heads,
        target_len, key_len)`; the encoder runs once; dropout off unless
        `training`.

        Example:

        >>> logits, scores = model.logits_and_attention(source_ids, target_ids)
        >>> scores[-1]["cross_attention"].shape  # (batch, heads, target_len, source_len)
        TensorShape([2, 8, 7, 10])
        """
        source_mask = padding_mask(source_ids, self.pad_id)
        encoder_output = self.encode(source_ids, training=training)
        y = self._embed(target_ids, self._target_embedding(), self.target_positions, 0, training)
        y, scores = self.decoder.call_with_attention(
            y, encoder_output, padding_mask(target_ids, self.pad_id), source_mask, training
        )
        return self._logits(y), scores

    def attention_scores(self, source_ids, target_ids):
        """Every attention's probabilities for one forward pass (dropout
        off), for plots like the paper's Figures 3-5.

        Returns:
            A dict of per-layer lists, each entry `(batch, num_heads,
            query_len, key_len)`: `"encoder"` (source over source),
            `"decoder"` (target over target, causal) and `"cross"` (target
            over source).
        """
        x = self._embed(source_ids, self.source_embedding, self.source_positions, 0, False)
        encoder_scores = self.encoder.attention_scores(
            x, padding_mask=padding_mask(source_ids, self.pad_id)
        )
        _, decoder_scores = self.logits_and_attention(source_ids, target_ids)
        return {
            "encoder": encoder_scores,
            "decoder": [s["self_attention"] for s in decoder_scores],
            "cross": [s["cross_attention"] for s in decoder_scores],
        }
