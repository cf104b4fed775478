"""The attention's projections: Keras's `EinsumDense`, as one matrix
product (`flat`), as a matrix for converters, and loading the flat layout
of keras_transformer 0.1 (tests/fixtures/former_layout, written by that
version)."""

import itertools
import math
import pathlib

import keras
import numpy as np
import pytest

from keras_transformer.layers import MultiHeadAttention
from keras_transformer.layers._projection import Projection
from keras_transformer.layers._projection import merges_axes
from tests.test_case import assert_close
from tests.test_case import numpy

FORMER = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "former_layout"
RNG = np.random.default_rng(0)


def _merged_forms(shape):
    """Every `shape` with runs of adjacent axes multiplied together, by
    brute force over where the runs end."""
    forms = set()
    for cuts in itertools.product((False, True), repeat=len(shape) - 1):
        form, run = [], shape[0]
        for size, cut in zip(shape[1:], cuts, strict=True):
            if cut:
                form.append(run)
                run = size
            else:
                run *= size
        forms.add((*form, run))
    return forms - {tuple(shape)}


@pytest.mark.parametrize("shape", [(16, 2, 4), (4, 1, 3, 2), (6, 6)])
def test_merges_axes_names_exactly_the_merged_forms(shape):
    size = math.prod(shape)
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    candidates = {
        c
        for rank in range(1, len(shape) + 1)
        for c in itertools.product(divisors, repeat=rank)
        if math.prod(c) == size
    }
    expected = _merged_forms(shape)
    assert {c for c in candidates if merges_axes(c, shape)} == expected


def _projections():
    query = Projection("abc,cde->abde", (None, 2, 4), bias_axes="de", name="query")
    query.build((None, None, 6))
    output = Projection("abcd,cde->abe", (None, 6), bias_axes="e", name="output")
    output.build((None, None, 2, 4))
    for layer in (query, output):  # a bias that is not zero
        layer.bias.assign(RNG.normal(size=layer.bias.shape).astype("float32"))
    return query, output


@pytest.mark.parametrize("change", [None, "lora", "int8"])
def test_flat_is_keras_s_call_with_the_axes_flattened(change):
    query, output = _projections()
    x = RNG.normal(size=(3, 5, 6)).astype("float32")
    heads = RNG.normal(size=(3, 5, 2, 4)).astype("float32")
    for layer in (query, output):
        if change == "lora":
            layer.enable_lora(2)
            layer.lora_kernel_b.assign(RNG.normal(size=layer.lora_kernel_b.shape))
        elif change == "int8":
            layer.quantize("int8")
    assert_close(query.flat(x), numpy(query(x)).reshape(3, 5, 8), atol=1e-6)
    assert_close(output.flat(heads.reshape(3, 5, 8)), output(heads), atol=1e-6)


def test_matrix_and_assign_matrix_are_each_other_s_inverse():
    query, _ = _projections()
    matrix = RNG.normal(size=(6, 8)).astype("float32")
    bias = RNG.normal(size=(8,)).astype("float32")
    query.assign_matrix(matrix, bias)
    np.testing.assert_array_equal(query.matrix(), matrix)
    np.testing.assert_array_equal(query.flat_bias(), bias)
    x = RNG.normal(size=(2, 3, 6)).astype("float32")
    assert_close(query(x), (x @ matrix + bias).reshape(2, 3, 2, 4), atol=1e-5)
    with pytest.raises(ValueError, match=r"takes a matrix of shape \(6, 8\)"):
        query.assign_matrix(matrix.T)
    query.quantize("int8")
    with pytest.raises(ValueError, match="quantization_mode='int8'"):
        query.matrix()


@pytest.mark.parametrize("file", ["attention.keras", "attention.weights.h5"])
def test_files_of_the_former_flat_layout_load(file):
    """A functional model around the layer alone (other value and output
    sizes), saved by keras_transformer 0.1: its kernels `(features, heads
    * depth)` load into today's `(features, heads, depth)`, the outputs
    as they were."""
    expected = np.load(FORMER / "attention_outputs.npz")
    inputs = [expected["query"], expected["value"]]
    if file.endswith(".keras"):
        model = keras.saving.load_model(FORMER / file)
    else:
        query, value = keras.Input((5, 12)), keras.Input((7, 10))
        layer = MultiHeadAttention(3, 4, value_dim=5, output_shape=6, name="attention")
        model = keras.Model([query, value], layer(query, value))
        model.load_weights(FORMER / file)
    attention = model.get_layer("attention")
    assert tuple(attention.query_dense.kernel.shape) == (12, 3, 4)
    assert tuple(attention.output_dense.kernel.shape) == (3, 5, 6)
    assert_close(model(inputs), expected["output"], atol=1e-6)
