"""The label-smoothed loss in `keras.ops`: the kernel of the JAX and
PyTorch backends. There is no strategy whose replicas share a batch here:
the token count is the batch's own."""

from keras import ops

__all__ = ["smoothed_token_losses", "sum_over_replicas"]


def smoothed_token_losses(y_true, logits, label_smoothing, smoothed=None):
    """`losses.smoothed_token_losses`, with its gradient written out:
    `(softmax − target distribution) · upstream`, from the logits and their
    log-sum-exp alone. What the backward pass keeps is the logits the model
    returned (no log-probabilities, no one-hot of their size), and under a
    compiler (XLA, `torch.compile`) the gradient is one fused pass over
    them, written in the logits' dtype."""
    ids = ops.expand_dims(ops.cast(y_true, "int32"), -1)

    @ops.custom_gradient
    def losses(logits):
        x = ops.cast(logits, "float32")
        log_normalizer = ops.logsumexp(x, axis=-1)
        target = ops.squeeze(ops.take_along_axis(x, ids, axis=-1), -1)
        mean = ops.mean(x if smoothed is None else x[..., :smoothed], axis=-1)

        def gradient(*arguments, upstream=None):
            if upstream is None:  # JAX passes it positionally, PyTorch by name
                (upstream,) = arguments
            x = ops.cast(logits, "float32")
            vocab = ops.shape(x)[-1]
            probabilities = ops.exp(x - ops.expand_dims(log_normalizer, -1))
            reference = ops.one_hot(ops.squeeze(ids, -1), vocab, dtype="float32")
            if smoothed is None:
                uniform = label_smoothing / vocab
            else:
                uniform = ops.where(ops.arange(vocab) < smoothed, label_smoothing / smoothed, 0.0)
            wanted = (1.0 - label_smoothing) * reference + uniform
            return ops.cast((probabilities - wanted) * ops.expand_dims(upstream, -1), logits.dtype)

        return log_normalizer - (1.0 - label_smoothing) * target - label_smoothing * mean, gradient

    return losses(logits)


def sum_over_replicas(value):
    """`value`: one replica."""
    return value
