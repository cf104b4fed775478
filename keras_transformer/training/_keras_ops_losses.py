"""The label-smoothed loss in `keras.ops`, differentiated automatically:
the kernel of the JAX and PyTorch backends (their compilers fuse the passes
that the TensorFlow kernel avoids by hand). There is no strategy whose
replicas share a batch here: the token count is the batch's own."""

from keras import ops

__all__ = ["smoothed_token_losses", "sum_over_replicas"]


def smoothed_token_losses(y_true, logits, label_smoothing):
    """`losses.smoothed_token_losses`."""
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    ids = ops.expand_dims(ops.cast(y_true, "int32"), -1)
    nll = -ops.squeeze(ops.take_along_axis(log_probs, ids, axis=-1), -1)
    return (1.0 - label_smoothing) * nll - label_smoothing * ops.mean(log_probs, axis=-1)


def sum_over_replicas(value):
    """`value`: one replica."""
    return value
