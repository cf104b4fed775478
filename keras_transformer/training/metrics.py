"""Token-level metrics that ignore padding."""

import keras
from keras import ops

from keras_transformer.special_ids import PAD_ID
from keras_transformer.training.losses import smoothed_token_losses


class _MaskedTokenMean(keras.metrics.Metric):
    """A running mean of a per-token value over non-pad tokens.

    `total` and `count` are summed across replicas, so the result is the
    mean over every token seen, not a mean of per-batch means.
    """

    def __init__(self, pad_id=PAD_ID, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.pad_id = pad_id
        self.total = self.add_variable(
            shape=(), initializer="zeros", name="total", aggregation="sum"
        )
        self.count = self.add_variable(
            shape=(), initializer="zeros", name="count", aggregation="sum"
        )

    def token_values(self, y_true, y_pred):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            mask = mask * ops.cast(sample_weight, "float32")
        values = ops.cast(self.token_values(y_true, y_pred), "float32")
        self.total.assign_add(ops.sum(values * mask))
        self.count.assign_add(ops.sum(mask))

    def mean(self):
        return ops.divide_no_nan(self.total, self.count)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config["pad_id"] = self.pad_id
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(_MaskedTokenMean):
    """Fraction of non-pad target tokens whose argmax prediction is right.

    Example:

    >>> model.compile(..., metrics=[MaskedAccuracy(), Perplexity()])
    """

    def __init__(self, pad_id=PAD_ID, name="accuracy", dtype=None):
        super().__init__(pad_id=pad_id, name=name, dtype=dtype)

    def token_values(self, y_true, y_pred):
        predicted = ops.argmax(y_pred, axis=-1)
        return ops.equal(ops.cast(predicted, "int32"), ops.cast(y_true, "int32"))

    def result(self):
        return self.mean()


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(_MaskedTokenMean):
    """exp(mean negative log-likelihood per non-pad token), without label
    smoothing (the paper's Table 3 reports it per word-piece)."""

    def __init__(self, pad_id=PAD_ID, name="perplexity", dtype=None):
        super().__init__(pad_id=pad_id, name=name, dtype=dtype)

    def token_values(self, y_true, y_pred):
        return smoothed_token_losses(y_true, y_pred, 0.0)

    def result(self):
        return ops.exp(self.mean())


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenCount(_MaskedTokenMean):
    """Non-pad target tokens seen since the last reset (each epoch in
    `fit`); `train` divides it by time for tokens/s."""

    def __init__(self, pad_id=PAD_ID, name="tokens", dtype=None):
        super().__init__(pad_id=pad_id, name=name, dtype=dtype)

    def token_values(self, y_true, y_pred):
        return ops.ones_like(y_true)

    def result(self):
        # A tensor, not the variable: JAX cannot trace a returned variable.
        return ops.convert_to_tensor(self.count)
