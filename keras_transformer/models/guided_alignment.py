"""Guided alignment training (Garg et al., 2019, "Jointly Learning to
Align and Translate with Transformer Models"; Marian's
`--guided-alignment`): the alignment heads of one decoder layer's
cross-attention are trained towards word alignments of the training pairs,
so that the attention the search keeps (`Transformer.alignment_attention`)
places markup on the right words.

A mixin of `Transformer`: it uses the model's `alignment_layer`,
`alignment_heads`, `logits_and_attention` and Keras's `add_loss`."""

import keras
from keras import ops

from keras_transformer_runtime import validation

GUIDED_ALIGNMENT_WEIGHT = 0.05


def guided_alignment_loss(alignment, attention):
    """Cross-entropy of `attention` against a word alignment, over the
    target positions that have one (Garg et al., 2019, eq. 4).

    Args:
        alignment: `(batch, target_len, source_len)`, nonzero where a
            target token is aligned to a source token; each row is
            normalized to sum to one, rows of zeros (unaligned tokens,
            padding) count for nothing.
        attention: the attention probabilities `(batch, target_len,
            source_len)`.

    Returns:
        The float32 scalar `−Σ_t Σ_s a_ts log p_ts / #aligned rows`, `a`
        the normalized alignment, `p` the attention.

    Example:

    >>> alignment = keras.ops.array([[[1.0, 0.0], [0.0, 0.0]]])
    >>> attention = keras.ops.array([[[0.5, 0.5], [0.9, 0.1]]])
    >>> float(guided_alignment_loss(alignment, attention))  # −log 0.5
    0.6931...
    """
    alignment = ops.cast(alignment, "float32")
    attention = ops.cast(attention, "float32")
    links = ops.sum(alignment, axis=-1)
    target = alignment / ops.expand_dims(ops.maximum(links, 1e-9), -1)
    cross = -ops.sum(target * ops.log(ops.maximum(attention, 1e-9)), axis=-1)
    aligned = ops.cast(links > 0, "float32")
    return ops.sum(cross * aligned) / ops.maximum(ops.sum(aligned), 1.0)


class GuidedAlignment:
    """Guided alignment training for `Transformer`.

    Batches whose inputs carry a third part, the word alignment
    `(batch, target_len, source_len)` (`training.make_batches` with word
    links), make `call` add `guided_alignment_weight` times
    `guided_alignment_loss` of the alignment heads' mean attention to the
    model's losses (Keras's `add_loss`), beside the translation loss.
    `compile(guided_alignment_weight=)` sets the weight (default 0.05, as
    Garg et al. and OpenNMT-py; Marian's is 0.1).

    Example:

    >>> model = Transformer.from_preset("small", vocab_size=4000, alignment_heads=1)
    >>> model.compile(optimizer="adam", loss=loss, guided_alignment_weight=0.05)
    >>> model.train_on_batch((source, target_in, alignment), target_out)
    """

    guided_alignment_weight = GUIDED_ALIGNMENT_WEIGHT

    def compile(self, *args, guided_alignment_weight=None, **kwargs):
        """Keras's `compile`, and the weight of the guided alignment loss
        (`None`: keep the model's, 0.05 unless set before)."""
        if guided_alignment_weight is not None:
            validation.check_non_negative(guided_alignment_weight=guided_alignment_weight)
            self.guided_alignment_weight = float(guided_alignment_weight)
        super().compile(*args, **kwargs)

    def get_compile_config(self):
        """Keras's compile configuration, with the guided alignment weight."""
        config = super().get_compile_config()
        if config:
            config["guided_alignment_weight"] = self.guided_alignment_weight
        return config

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved (Keras's own, which
        skips a model whose `compile` takes more arguments than Keras's)."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def alignment_attention(self, cross_scores):
        """The alignment of one cross-attention's probabilities `(batch,
        num_heads, target_len, source_len)`: the float32 mean of its first
        `alignment_heads` heads (all if `None`), `(batch, target_len,
        source_len)`."""
        heads = self.alignment_heads or self.num_heads
        return ops.mean(ops.cast(cross_scores[:, :heads], "float32"), axis=1)

    def call_guided(self, source_ids, target_ids, alignment, training=None):
        """`call`'s logits, adding the guided alignment loss of
        `alignment_layer`'s alignment heads against `alignment` `(batch,
        target_len, source_len)` (see the class docstring)."""
        logits, scores = self.logits_and_attention(source_ids, target_ids, training)
        attention = self.alignment_attention(scores[self.alignment_layer]["cross_attention"])
        loss = guided_alignment_loss(alignment, attention)
        self.add_loss(self.guided_alignment_weight * loss)
        return logits
