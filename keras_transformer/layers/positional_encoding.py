"""The paper's sinusoidal positional encoding (§3.5)."""

import keras
from keras import ops

from keras_transformer.layers._utils import size
from keras_transformer_runtime import validation

LAYOUTS = ("interleaved", "concatenated")


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Sinusoidal positional encodings, interleaved as in the paper.

    PE(pos, 2i) = sin(pos / 10000^(2i / d_model)) and
    PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model)): even features are
    sines, odd features cosines of the same frequency. With
    `layout="concatenated"` the same values come as all sines, then all
    cosines: feature i < d_model / 2 is sin(pos / 10000^(2i / d_model)) and
    feature d_model / 2 + i its cosine (Marian and OPUS-MT models). The
    encodings are computed on the fly (in float32, then cast), so any
    sequence length works and the layer has no weights.

    Args:
        max_wavelength: the base of the geometric progression of
            wavelengths, 10000 in the paper.
        layout: `"interleaved"` (the paper) or `"concatenated"`.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, seq_len, d_model)`, only the shape is used.
        start_index: absolute position of the first element (int or scalar
            tensor), for decoding one step at a time.

    Returns:
        Encodings of the same shape and dtype as `inputs`, to add to them.

    Example:

    >>> x = keras.ops.zeros((2, 5, 512))
    >>> pe = PositionalEncoding()(x, start_index=3)  # positions 3..7
    >>> pe.shape
    TensorShape([2, 5, 512])
    """

    def __init__(self, max_wavelength=10000.0, layout="interleaved", **kwargs):
        if not max_wavelength > 0:
            raise ValueError(
                f"`max_wavelength` must be positive. Received: max_wavelength={max_wavelength!r}"
            )
        validation.check_choice(LAYOUTS, layout=layout)
        super().__init__(**kwargs)
        self.max_wavelength = float(max_wavelength)
        self.layout = layout
        self.built = True

    def call(self, inputs, start_index=0):
        length, depth = size(inputs, -2), size(inputs, -1)
        positions = ops.cast(ops.arange(length) + start_index, "float32")
        features = ops.arange(depth)
        if self.layout == "interleaved":
            pair, is_sine = features // 2, ops.equal(features % 2, 0)  # i of 2i and 2i+1
        else:  # i of i and d/2 + i (an odd d has one sine more than cosines)
            sines = (depth + 1) // 2
            is_sine = features < sines
            pair = ops.where(is_sine, features, features - sines)
        inverse_wavelengths = ops.power(
            self.max_wavelength, -2.0 * ops.cast(pair, "float32") / ops.cast(depth, "float32")
        )
        angles = ops.expand_dims(positions, -1) * inverse_wavelengths  # (seq, d)
        encoding = ops.where(is_sine, ops.sin(angles), ops.cos(angles))
        return ops.broadcast_to(ops.cast(encoding, self.compute_dtype), ops.shape(inputs))

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "layout": self.layout})
        return config

    def compute_output_shape(self, input_shape):
        return input_shape
