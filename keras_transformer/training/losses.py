"""Label-smoothed cross-entropy over real target tokens (§5.4)."""

import keras
from keras import ops

from keras_transformer import _backend
from keras_transformer.special_ids import PAD_ID
from keras_transformer_runtime import validation

if _backend.is_tensorflow():
    from keras_transformer.training import _tensorflow_losses as _kernel
else:
    from keras_transformer.training import _keras_ops_losses as _kernel


def smoothed_token_losses(y_true, logits, label_smoothing, smoothed=None):
    """Per-token cross-entropy against (1 − ε)·one_hot + ε/V, V the first
    `smoothed` ids (None: every id).

    Returns float32 `(batch, length)`: `(1 − ε)·NLL + ε·mean_v(−log p_v)`.

    Each backend has its kernel: on TensorFlow the gradient is written by
    hand (`_tensorflow_losses`), on JAX and PyTorch it is differentiated
    automatically (`_keras_ops_losses`); the values agree.
    """
    return _kernel.smoothed_token_losses(y_true, logits, label_smoothing, smoothed)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy with label smoothing ε_ls, averaged over non-pad tokens.

    The target distribution puts `1 − ε` on the reference token and spreads
    `ε` uniformly over the vocabulary: its first `smoothed_vocab_size` ids
    (None: all of them), so that ids a model can never output (an imported
    Marian model's decoder-start id, whose logit is −10⁹) do not count, and
    the loss stays a cross-entropy (`compile_for_training` sets it). Pad
    positions (`y_true == pad_id`) contribute nothing, to the sum or to
    the count. Under a `tf.distribute` strategy the average is over the
    tokens of the *global* batch: each replica divides its sum by the
    token count summed over all replicas, and Keras sums the replicas'
    gradients.

    Args:
        label_smoothing: ε_ls, 0.1 in the paper.
        pad_id: the padding id.
        smoothed_vocab_size: the ids smoothed over, the first ones (None:
            every id).
        name: the loss's name.

    Call arguments:
        y_true: integer `(batch, length)`.
        y_pred: logits `(batch, length, vocab)`.

    Returns:
        The scalar mean loss per real token.

    Example:

    >>> model.compile(optimizer=paper_optimizer(),
    ...               loss=LabelSmoothedCrossEntropy(label_smoothing=0.1))
    """

    def __init__(
        self,
        label_smoothing=0.1,
        pad_id=PAD_ID,
        smoothed_vocab_size=None,
        name="label_smoothed_cross_entropy",
        dtype=None,
    ):
        # The per-token values are already divided by the global count: Keras
        # must only sum them (and not divide again by the number of replicas).
        super().__init__(name=name, reduction="sum", dtype=dtype)
        validation.check_rate(label_smoothing=label_smoothing)
        validation.check_positive_int(allow_none=True, smoothed_vocab_size=smoothed_vocab_size)
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.smoothed_vocab_size = smoothed_vocab_size

    def call(self, y_true, y_pred):
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        losses = smoothed_token_losses(
            y_true, y_pred, self.label_smoothing, self.smoothed_vocab_size
        )
        losses = losses * mask
        count = _kernel.sum_over_replicas(ops.sum(mask))
        return losses / ops.maximum(count, 1.0)

    def get_config(self):
        config = super().get_config()
        # The reduction is fixed ("sum": `call` already divides by the
        # global token count), so it is not a constructor argument.
        config.pop("reduction", None)
        config.update(
            {
                "label_smoothing": self.label_smoothing,
                "pad_id": self.pad_id,
                "smoothed_vocab_size": self.smoothed_vocab_size,
            }
        )
        return config
