"""Label-smoothed cross-entropy over real target tokens (§5.4)."""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import _backend
from keras_transformer.special_ids import PAD_ID
from keras_transformer.training._distribute import sum_over_replicas
from keras_transformer_runtime import _validation


def _smoothed_forward(logits, ids, label_smoothing):
    """Per-token losses `lse − (1 − ε)·l_y − ε·mean_v(l_v)`, float32.

    The log-sum-exp comes from the softmax's largest probability,
    `lse = max_v l_v − log(max_v p_v)`: `max_v p_v ≥ 1/V` never underflows,
    and the softmax is one fused kernel (oneDNN on a CPU), where
    `tf.reduce_logsumexp` makes separate passes.
    """
    x = tf.cast(logits, tf.float32)
    lse = tf.reduce_max(x, axis=-1) - tf.math.log(tf.reduce_max(tf.nn.softmax(x), axis=-1))
    target = tf.cast(tf.gather(logits, ids, batch_dims=2), tf.float32)
    mean = tf.reduce_mean(x, axis=-1)
    return lse - (1.0 - label_smoothing) * target - label_smoothing * mean


def _smoothed_backward(logits, ids, upstream, label_smoothing):
    """d loss / d logits = (softmax − target distribution) · upstream.

    `(p − ε/V)·u` over the vocabulary, then `(1 − ε)·u` subtracted at the
    reference tokens: no one-hot tensor of the logits' size, and each step
    can reuse the softmax's buffer.
    """
    vocab = tf.shape(logits)[-1]
    uniform = label_smoothing / tf.cast(vocab, tf.float32)
    rows = tf.reshape(
        (tf.nn.softmax(tf.cast(logits, tf.float32)) - uniform) * upstream[..., None], [-1, vocab]
    )
    targets = tf.stack([tf.range(tf.shape(rows)[0]), tf.reshape(ids, [-1])], axis=1)
    rows = tf.tensor_scatter_nd_sub(
        rows, targets, tf.reshape((1.0 - label_smoothing) * upstream, [-1])
    )
    return tf.cast(tf.reshape(rows, tf.shape(logits)), logits.dtype)


def _smoothed_token_losses_with_ops(y_true, logits, label_smoothing):
    """`smoothed_token_losses` in `keras.ops`, differentiated automatically:
    the JAX and PyTorch backends' path (their compilers fuse the passes
    that the TensorFlow path avoids by hand)."""
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    ids = ops.expand_dims(ops.cast(y_true, "int32"), -1)
    nll = -ops.squeeze(ops.take_along_axis(log_probs, ids, axis=-1), -1)
    return (1.0 - label_smoothing) * nll - label_smoothing * ops.mean(log_probs, axis=-1)


def smoothed_token_losses(y_true, logits, label_smoothing):
    """Per-token cross-entropy against (1 − ε)·one_hot + ε/V.

    Returns float32 `(batch, length)`: `(1 − ε)·NLL + ε·mean_v(−log p_v)`.

    The gradient is written by hand, `softmax − target distribution`,
    recomputing the softmax rather than keeping a `(batch, length, vocab)`
    tensor between the passes; the logits are the largest tensor of a
    training step, and the automatic gradient of a log-softmax, a gather
    and a mean takes a dozen full passes over them. On a CPU this is
    faster than XLA-fusing the same formulas (`benchmarks/README.md`).
    """
    if not _backend.is_tensorflow():
        return _smoothed_token_losses_with_ops(y_true, logits, label_smoothing)
    ids = tf.cast(y_true, tf.int32)
    smoothing = tf.constant(label_smoothing, tf.float32)

    @tf.custom_gradient
    def losses(logits):
        def grad(upstream):
            return _smoothed_backward(logits, ids, upstream, smoothing)

        return _smoothed_forward(logits, ids, smoothing), grad

    return losses(logits)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy with label smoothing ε_ls, averaged over non-pad tokens.

    The target distribution puts `1 − ε` on the reference token and spreads
    `ε` uniformly over the vocabulary. Pad positions (`y_true == pad_id`)
    contribute nothing, to the sum or to the count. Under a `tf.distribute`
    strategy the average is over the tokens of the *global* batch: each
    replica divides its sum by the token count summed over all replicas,
    and Keras sums the replicas' gradients.

    Args:
        label_smoothing: ε_ls, 0.1 in the paper.
        pad_id: the padding id.
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
        self, label_smoothing=0.1, pad_id=PAD_ID, name="label_smoothed_cross_entropy", dtype=None
    ):
        # The per-token values are already divided by the global count: Keras
        # must only sum them (and not divide again by the number of replicas).
        super().__init__(name=name, reduction="sum", dtype=dtype)
        _validation.check_rate(label_smoothing=label_smoothing)
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        losses = smoothed_token_losses(y_true, y_pred, self.label_smoothing) * mask
        count = sum_over_replicas(ops.sum(mask))
        return losses / ops.maximum(count, 1.0)

    def get_config(self):
        config = super().get_config()
        # The reduction is fixed ("sum": `call` already divides by the
        # global token count), so it is not a constructor argument.
        config.pop("reduction", None)
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config
