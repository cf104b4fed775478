"""What the tests need from the backend itself: gradients."""

import keras
import numpy as np
from keras import ops


def value_and_gradient(function, x, dtype="float32"):
    """`function(x)` (a scalar) and its gradient with respect to `x`, both
    as NumPy float32, computed by the running backend's autodiff with `x` a
    `dtype` tensor; also returns the dtypes of the value and the gradient."""
    backend = keras.backend.backend()
    x = ops.cast(ops.convert_to_tensor(np.asarray(x)), dtype)
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(x)
            value = function(x)
        gradient = tape.gradient(value, x)
    elif backend == "jax":
        import jax

        value, gradient = jax.value_and_grad(function)(x)
    elif backend == "torch":
        x = x.detach().requires_grad_(True)
        value = function(x)
        value.backward()
        gradient = x.grad
    else:
        raise NotImplementedError(f"no gradients on the {backend!r} backend")
    dtypes = tuple(keras.backend.standardize_dtype(t.dtype) for t in (value, gradient))
    as_numpy = [ops.convert_to_numpy(ops.cast(t, "float32")) for t in (value, gradient)]
    return as_numpy[0], as_numpy[1], dtypes
