"""The projections of `MultiHeadAttention`: Keras's `EinsumDense`, applied
as one matrix product, that also loads the weights keras_transformer wrote
before its attention extended Keras's layer."""

import math

import keras
import numpy as np
from keras import ops

from keras_transformer.layers._utils import on_last_axis


def merges_axes(stored_shape, shape):
    """Whether `stored_shape` is `shape` with runs of adjacent axes merged
    into one, and not `shape` itself: the flat layout keras_transformer
    wrote before 0.2, `(d_model, heads * depth)` for Keras's `(d_model,
    heads, depth)`.

    Example:

    >>> merges_axes((16, 8), (16, 2, 4)), merges_axes((8, 16), (16, 2, 4))
    (True, False)
    """
    stored_shape, shape = tuple(stored_shape), tuple(shape)
    if len(stored_shape) >= len(shape) or math.prod(stored_shape) != math.prod(shape):
        return False
    axes = list(shape)
    for size in stored_shape:
        merged = axes.pop(0) if axes else 0
        while merged < size and axes:
            merged *= axes.pop(0)
        if merged != size:
            return False
    return not axes


def in_shape(value, shape):
    """`value` reshaped to `shape` when it is stored in the flat layout
    (`merges_axes`); as it is otherwise, for the caller's own check."""
    if merges_axes(np.shape(value), shape):
        return np.reshape(np.asarray(value), shape)
    return value


class _SplitHeadsStore:
    """A weights store read by a `Projection`: the values it holds for the
    kernel (`"0"`) and bias (`"1"`) in the flat layout, in the layer's
    shapes."""

    def __init__(self, store, shapes):
        self._store, self._shapes = store, shapes

    def keys(self):
        return self._store.keys()

    def __len__(self):
        return len(self._store.keys())

    def __getitem__(self, key):
        value = self._store[key]
        shape = self._shapes.get(key)
        return value if shape is None else in_shape(value, shape)


@keras.saving.register_keras_serializable(package="keras_transformer")
class Projection(keras.layers.EinsumDense):
    """Keras's `EinsumDense` as `MultiHeadAttention` builds it over
    sequences (`"abc,cde->abde"` into heads, `"abcd,cde->abe"` out of
    them), with two additions:

    * `flat(x)`: the projection with the contracted axes and the output
      axes each flattened, `(..., inputs)` to `(..., outputs)`: one 2D
      matrix product over the kernel viewed as `(inputs, outputs)`, where
      `call`'s einsum costs a dozen shape ops around it;
    * loading kernels and biases stored in the flat layout that
      keras_transformer wrote before 0.2 (`(d_model, heads * depth)`),
      so that `.keras` and `.weights.h5` files of that time still load.

    Everything else (weights, LoRA, quantization, dtype policies) is
    `EinsumDense`'s.

    Example:

    >>> query = Projection("abc,cde->abde", (None, 8, 64), bias_axes="de")
    >>> query.build((None, None, 512))
    >>> query.flat(keras.ops.ones((2, 5, 512))).shape
    TensorShape([2, 5, 512])
    """

    def flat(self, x):
        """`self(x)` for `x` `(..., inputs)`, the contracted axes
        flattened, as `(..., outputs)`, the output axes flattened.

        Unquantized weights (LoRA's included, through `kernel`) go through
        one 2D product; a quantized layer runs Keras's own quantized call
        on the rows reshaped to its axes."""
        inputs, outputs = self.matrix_shape
        if self.quantization_mode is not None:
            contracted = tuple(self._kernel.shape)[: self._contracted_rank()]

            def product(rows):  # (n, inputs) -> (n, outputs), Keras's quantized call
                return ops.reshape(self(ops.reshape(rows, (-1, 1, *contracted))), (-1, outputs))

            return on_last_axis(product, x)
        matrix = ops.reshape(ops.cast(self.kernel, self.compute_dtype), (inputs, outputs))
        bias = None
        if self.bias is not None:
            bias = ops.reshape(ops.cast(self.bias, self.compute_dtype), (outputs,))

        def product(rows):  # (n, inputs) -> (n, outputs); the bias on the 2D product, which
            y = ops.matmul(rows, matrix)  # oneDNN fuses with it, as Keras's `Dense` adds it
            return self.activation(y if bias is None else ops.add(y, bias))

        return on_last_axis(product, x)

    @property
    def matrix_shape(self):
        """`(inputs, outputs)`: the kernel's contracted axes (they lead it)
        and its other axes, each flattened."""
        shape = tuple(self._kernel.shape)
        inputs = math.prod(shape[: self._contracted_rank()])
        return inputs, math.prod(shape) // inputs

    def _contracted_rank(self):
        inputs, kernel = self.equation.split("->")[0].split(",")
        return sum(axis in inputs for axis in kernel)

    def matrix(self):
        """The kernel as the `(inputs, outputs)` matrix `flat` multiplies
        by (LoRA's update included), a NumPy array: what a converter to
        another runtime reads.

        Raises:
            ValueError: the layer is quantized (its float kernel is gone).
        """
        if self.quantization_mode is not None:
            raise ValueError(
                f"{self.path} is quantized, so its float matrix is gone: convert the model "
                f"before `quantize`. Received: quantization_mode={self.quantization_mode!r}"
            )
        return np.reshape(ops.convert_to_numpy(self.kernel), self.matrix_shape)

    def flat_bias(self):
        """The bias flattened to `(outputs,)` as a NumPy array, or `None`."""
        return None if self.bias is None else np.reshape(ops.convert_to_numpy(self.bias), (-1,))

    def assign_matrix(self, matrix, bias=None):
        """Sets the kernel from its `(inputs, outputs)` matrix, and the
        bias from `(outputs,)` (the inverse of `matrix` and `flat_bias`):
        what an importer of another framework's weights writes.

        Raises:
            ValueError: a shape that is not this layer's, flattened.
        """
        outputs = self.matrix_shape[1]
        for name, variable, value, shape in (
            ("matrix", self._kernel, matrix, self.matrix_shape),
            ("bias", self.bias, bias, (outputs,)),
        ):
            if value is None:
                continue
            if variable is None or tuple(np.shape(value)) != shape:
                takes = f"a {name} of shape {shape}" if variable is not None else f"no {name}"
                raise ValueError(
                    f"{self.path} takes {takes}. Received: {name} of shape {np.shape(value)}"
                )
            variable.assign(np.reshape(value, variable.shape).astype(variable.dtype))

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras's `EinsumDense.quantize` refuses subclasses unless they say
        # that its quantized call still computes them: this one adds no
        # computation of its own.
        super().quantize(mode, type_check=False, config=config)

    def load_own_variables(self, store):
        if self.quantization_mode is None:
            shapes = {"0": tuple(self._kernel.shape)}
            if self.bias is not None:
                shapes["1"] = tuple(self.bias.shape)
            store = _SplitHeadsStore(store, shapes)
        super().load_own_variables(store)
