"""Learned positional embeddings (the paper's Table 3, row E)."""

import keras
from keras import ops

from keras_transformer_runtime import validation


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionalEmbedding(keras.layers.Layer):
    """A trained vector for each position `0 .. max_length - 1`.

    A drop-in alternative to `PositionalEncoding` (same call signature);
    the paper found it "nearly identical" in quality (Table 3, row E).
    Positions at or beyond `max_length` have no embedding: inputs must be
    truncated to `max_length` first.

    Args:
        max_length: number of positions that have an embedding.
        initializer: initializer of the `(max_length, d_model)` table.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, seq_len, d_model)`, only the shape is used.
        start_index: position of the first element (int or scalar tensor).

    Returns:
        Embeddings of the same shape as `inputs`, to add to them.

    Example:

    >>> layer = LearnedPositionalEmbedding(max_length=256)
    >>> layer(keras.ops.zeros((2, 10, 64))).shape
    TensorShape([2, 10, 64])
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        validation.check_positive_int(max_length=max_length)
        super().__init__(**kwargs)
        self.max_length = max_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, inputs_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, inputs_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        table = ops.slice(
            ops.convert_to_tensor(self.embeddings),
            (start_index, 0),
            (shape[-2], shape[-1]),
        )
        return ops.broadcast_to(ops.cast(table, self.compute_dtype), shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config

    def compute_output_shape(self, input_shape):
        return input_shape
