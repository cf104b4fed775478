"""What every export checks of the weights it writes."""

import keras
import tensorflow as tf


def check_finite(model):
    """Raises a `ValueError` if a float weight of `model` holds NaN or an
    infinity (a diverged run), before anything is written. Integer weights
    (a model quantized by `model.quantize("int8")`) are finite by type."""
    floats = (
        w
        for w in model.weights
        if keras.backend.is_float_dtype(keras.backend.standardize_dtype(w.dtype))
    )
    if not all(bool(tf.reduce_all(tf.math.is_finite(w))) for w in floats):
        raise ValueError("The model's weights hold NaN or infinite values; nothing exported.")
