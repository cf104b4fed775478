"""The TensorFlow kernel of the label-smoothed loss: a hand-written
gradient, and the token count summed over a strategy's replicas."""

import tensorflow as tf

from keras_transformer.training._distribute import sum_over_replicas

__all__ = ["smoothed_token_losses", "sum_over_replicas"]


def _smoothed_forward(logits, ids, label_smoothing, smoothed):
    """Per-token losses `lse − (1 − ε)·l_y − ε·mean_v(l_v)`, float32, the
    mean over the first `smoothed` ids (None: all).

    The log-sum-exp comes from the softmax's largest probability,
    `lse = max_v l_v − log(max_v p_v)`: `max_v p_v ≥ 1/V` never underflows,
    and the softmax is one fused kernel (oneDNN on a CPU), where
    `tf.reduce_logsumexp` makes separate passes.
    """
    x = tf.cast(logits, tf.float32)
    lse = tf.reduce_max(x, axis=-1) - tf.math.log(tf.reduce_max(tf.nn.softmax(x), axis=-1))
    target = tf.cast(tf.gather(logits, ids, batch_dims=2), tf.float32)
    mean = tf.reduce_mean(x if smoothed is None else x[..., :smoothed], axis=-1)
    return lse - (1.0 - label_smoothing) * target - label_smoothing * mean


def _smoothed_backward(logits, ids, upstream, label_smoothing, smoothed):
    """d loss / d logits = (softmax − target distribution) · upstream.

    `(p − ε/V)·u` over the vocabulary (`ε/n` on the first `smoothed = n`
    ids and 0 past them), then `(1 − ε)·u` subtracted at the reference
    tokens: no one-hot tensor of the logits' size, and each step can
    reuse the softmax's buffer.
    """
    vocab = tf.shape(logits)[-1]
    if smoothed is None:
        uniform = label_smoothing / tf.cast(vocab, tf.float32)
    else:
        uniform = tf.where(tf.range(vocab) < smoothed, label_smoothing / smoothed, 0.0)
    rows = tf.reshape(
        (tf.nn.softmax(tf.cast(logits, tf.float32)) - uniform) * upstream[..., None], [-1, vocab]
    )
    targets = tf.stack([tf.range(tf.shape(rows)[0]), tf.reshape(ids, [-1])], axis=1)
    rows = tf.tensor_scatter_nd_sub(
        rows, targets, tf.reshape((1.0 - label_smoothing) * upstream, [-1])
    )
    return tf.cast(tf.reshape(rows, tf.shape(logits)), logits.dtype)


def smoothed_token_losses(y_true, logits, label_smoothing, smoothed=None):
    """`losses.smoothed_token_losses` with its gradient written by hand,
    `softmax − target distribution`, recomputing the softmax rather than
    keeping a `(batch, length, vocab)` tensor between the passes; the
    logits are the largest tensor of a training step, and the automatic
    gradient of a log-softmax, a gather and a mean takes a dozen full
    passes over them. On a CPU this is faster than XLA-fusing the same
    formulas (`benchmarks/README.md`)."""
    ids = tf.cast(y_true, tf.int32)
    smoothing = tf.constant(label_smoothing, tf.float32)

    @tf.custom_gradient
    def losses(logits):
        def grad(upstream):
            return _smoothed_backward(logits, ids, upstream, smoothing, smoothed)

        return _smoothed_forward(logits, ids, smoothing, smoothed), grad

    return losses(logits)
