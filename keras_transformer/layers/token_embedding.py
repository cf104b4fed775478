"""Token embedding that doubles as the pre-softmax projection (§3.4)."""

import math

import keras
import numpy as np
from keras import ops

from keras_transformer.layers._utils import on_last_axis
from keras_transformer_runtime import validation


def _concrete_values(ids):
    """`ids` as a NumPy array when their values exist now (eager code), or
    `None` while a function is being traced or compiled."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return None if isinstance(ids, jax.core.Tracer) else np.asarray(ids)
    if backend == "torch":
        import torch

        return None if torch.compiler.is_compiling() else ops.convert_to_numpy(ids)
    return ops.convert_to_numpy(ids)


def _check_ids_in_range(ids, vocab_size):
    """Returns `ids`, raising on ids outside [0, vocab_size) instead of
    letting the lookup return garbage.

    Eagerly (any backend) this is a `ValueError`; in a TensorFlow graph an
    `InvalidArgumentError` from an assert op. XLA drops assert ops (and
    clamps out-of-range gathers), and JAX-compiled or `torch.compile`d
    functions have no assert, so there the ids must be checked before they
    reach the model (the training input pipeline does).
    """
    message = f"Token ids must be in [0, vocab_size) with vocab_size={vocab_size}."
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # assertions have no keras.ops equivalent

        if not tf.executing_eagerly():
            checks = [
                tf.debugging.assert_non_negative(ids, message=message),
                tf.debugging.assert_less(ids, tf.cast(vocab_size, ids.dtype), message=message),
            ]
            with tf.control_dependencies(checks):  # check before the lookup
                return tf.identity(ids)
    values = _concrete_values(ids)
    if values is not None and values.size and (values.min() < 0 or values.max() >= vocab_size):
        raise ValueError(f"{message} Received ids in [{values.min()}, {values.max()}].")
    return ids


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenEmbedding(keras.layers.Layer):
    """Token embeddings multiplied by √d_model, reusable as the output layer.

    `layer(ids)` looks up ids and multiplies by √d_model (§3.4);
    `layer(x, reverse=True)` projects hidden states back to vocabulary
    logits with the same matrix, `x @ Eᵀ`. Using one instance for the source
    embedding, the target embedding and the pre-softmax projection gives the
    paper's three-way weight tying; separate instances give the untied
    variants.

    Args:
        vocab_size: number of token ids.
        d_model: embedding size.
        scale: whether lookups are multiplied by √d_model.
        embeddings_initializer: initializer of the `(vocab_size, d_model)`
            matrix. Defaults to normal with stddev d_model^-0.5, so that
            scaled lookups have unit variance and tied logits start small.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: integer ids `(batch, seq_len)`, or with `reverse=True`
            hidden states `(batch, seq_len, d_model)`.
        reverse: project to logits instead of embedding.

    Returns:
        `(batch, seq_len, d_model)` embeddings, or `(batch, seq_len,
        vocab_size)` logits in the compute dtype with `reverse=True`.

    Example:

    >>> embedding = TokenEmbedding(vocab_size=100, d_model=16)
    >>> x = embedding(keras.ops.array([[3, 4, 0]]))
    >>> embedding(x, reverse=True).shape
    TensorShape([1, 3, 100])
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        scale=True,
        embeddings_initializer=None,
        **kwargs,
    ):
        validation.check_positive_int(vocab_size=vocab_size, d_model=d_model)
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.scale = scale
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=self.embeddings_initializer,
        )
        self.built = True

    def call(self, inputs, reverse=False):
        if reverse:
            kernel = ops.transpose(ops.cast(self.embeddings, self.compute_dtype))
            return on_last_axis(lambda x: ops.matmul(x, kernel), inputs)
        ids = _check_ids_in_range(inputs, self.vocab_size)
        outputs = ops.take(self.embeddings, ops.cast(ids, "int32"), axis=0)
        outputs = ops.cast(outputs, self.compute_dtype)
        if self.scale:
            outputs = outputs * ops.cast(math.sqrt(self.d_model), self.compute_dtype)
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "scale": self.scale,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config

    def compute_output_spec(self, inputs, reverse=False):
        last = self.vocab_size if reverse else self.d_model
        shape = inputs.shape[:-1] if reverse else inputs.shape
        return keras.KerasTensor(shape + (last,), dtype=self.compute_dtype)
