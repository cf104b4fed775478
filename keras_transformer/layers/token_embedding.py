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
class TokenEmbedding(keras.layers.Embedding):
    """Token embeddings multiplied by √d_model, reusable as the output layer.

    `keras.layers.Embedding` (its weights, LoRA, int8 quantization and
    config are Keras's), with two additions: `layer(ids)` multiplies the
    looked-up rows by √d_model (§3.4), and `layer(x, reverse=True)`
    projects hidden states back to vocabulary logits with the same
    matrix, `x @ Eᵀ`. Using one instance for the source embedding, the
    target embedding and the pre-softmax projection gives the paper's
    three-way weight tying; separate instances give the untied variants.

    `quantize("int8")` (as `model.quantize("int8")` calls it) stores the
    matrix in int8 with a scale per row, as `keras.layers.Embedding` does;
    the tied projection then multiplies int8 by int8, the hidden states
    quantized per row, as Keras's `Dense` does.

    Ids outside `[0, vocab_size)` raise (see `_check_ids_in_range`)
    instead of looking up garbage.

    Args:
        vocab_size: number of token ids (`input_dim`).
        d_model: embedding size (`output_dim`).
        scale: whether lookups are multiplied by √d_model.
        embeddings_initializer: initializer of the `(vocab_size, d_model)`
            matrix. Defaults to normal with stddev d_model^-0.5, so that
            scaled lookups have unit variance and tied logits start small.
        **kwargs: the other arguments of `keras.layers.Embedding`
            (`embeddings_regularizer`, `mask_zero`, `lora_rank`...) and of
            `keras.layers.Layer`.

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

    def __init__(self, vocab_size, d_model, scale=True, embeddings_initializer=None, **kwargs):
        validation.check_positive_int(vocab_size=vocab_size, d_model=d_model)
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        kwargs.pop("input_dim", None), kwargs.pop("output_dim", None)  # from Keras's config
        super().__init__(
            vocab_size, d_model, embeddings_initializer=embeddings_initializer, **kwargs
        )
        self.scale = scale

    @property
    def vocab_size(self):
        return self.input_dim

    @property
    def d_model(self):
        return self.output_dim

    def call(self, inputs, reverse=False):
        if reverse:
            kernel = ops.transpose(ops.cast(self.embeddings, self.compute_dtype))
            return on_last_axis(lambda x: ops.matmul(x, kernel), inputs)
        return self._scaled(super().call(_check_ids_in_range(inputs, self.vocab_size)))

    def _int8_call(self, inputs, reverse=False, training=None):
        """`call` of the int8-quantized layer (Keras's `quantized_call`)."""
        if reverse:
            return on_last_axis(self._int8_logits, inputs)
        ids = _check_ids_in_range(inputs, self.vocab_size)
        return self._scaled(super()._int8_call(ids, training=training))

    def _int8_logits(self, x):
        """`x @ Eᵀ` `(n, d_model)` to `(n, vocab_size)` with the int8
        matrix: `x` quantized per row, an int8 product, both scales
        divided out; its gradient reaches `x` (LoRA fine-tuning of a
        quantized model), as Keras's quantized `Dense`'s does."""

        @ops.custom_gradient
        def logits(x, embeddings, embeddings_scale):
            def gradient(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream
                matrix = ops.cast(embeddings, self.compute_dtype) / embeddings_scale[:, None]
                return ops.matmul(upstream, matrix), None, None

            quantized, scale = keras.quantizers.abs_max_quantize(x, axis=-1)  # (n, d), (n, 1)
            product = ops.matmul(quantized, ops.transpose(embeddings))  # int32
            return ops.cast(product, self.compute_dtype) / (scale * embeddings_scale), gradient

        y = logits(
            x,
            ops.convert_to_tensor(self._embeddings),
            ops.cast(self.embeddings_scale, self.compute_dtype),
        )
        if self.lora_enabled:  # x @ (A B)ᵀ = (x Bᵀ) Aᵀ
            lora = ops.matmul(
                ops.matmul(x, ops.transpose(self.lora_embeddings_b)),
                ops.transpose(self.lora_embeddings_a),
            )
            y = ops.add(y, ops.cast((self.lora_alpha / self.lora_rank) * lora, y.dtype))
        return y

    def _scaled(self, outputs):
        if not self.scale:
            return outputs
        return outputs * ops.cast(math.sqrt(self.d_model), outputs.dtype)

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras's int8 quantization of the matrix, which the tied
        projection then uses too (see the class docstring)."""
        if mode != "int8":
            raise ValueError(
                "TokenEmbedding quantizes to 'int8' (the tied output projection multiplies "
                f"by the same matrix). Received: mode={mode!r}"
            )
        super().quantize(mode, type_check=False, config=config)

    def get_config(self):
        config = super().get_config()
        config["vocab_size"] = config.pop("input_dim")
        config["d_model"] = config.pop("output_dim")
        config["scale"] = self.scale
        return config

    def compute_output_shape(self, inputs_shape, reverse=False):
        if reverse:
            return (*inputs_shape[:-1], self.vocab_size)
        return (*inputs_shape, self.d_model)

    def compute_output_spec(self, inputs, reverse=False):
        shape = self.compute_output_shape(inputs.shape, reverse=reverse)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)
