"""`MultiHeadAttention.call` through the backend's fused kernel
(`keras.ops.dot_product_attention`, JAX and PyTorch) against the layer's
own path (the one that keeps the probabilities, checked against NumPy in
test_multi_head_attention.py): the same outputs and gradients, every mask."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import Transformer
from keras_transformer import _backend
from keras_transformer.layers import MultiHeadAttention
from tests.backends import value_and_gradient
from tests.test_case import numpy

RNG = np.random.default_rng(0)


@pytest.fixture
def kernel_calls(monkeypatch):
    """The fused path on every backend (TensorFlow's kernel is a plain
    composition, but the path is the same), and a count of its calls."""
    calls = []
    fused = ops.dot_product_attention

    def counted(*args, **kwargs):
        calls.append(kwargs.get("mask") is not None)
        return fused(*args, **kwargs)

    monkeypatch.setattr(_backend, "has_fused_attention", lambda dtype: True)
    monkeypatch.setattr(ops, "dot_product_attention", counted)
    return calls


def masks(batch, q_len, k_len):
    """Key and query padding (a query row that sees no key, a sentence
    whose keys are all padding) and an attention mask."""
    value_mask = np.ones((batch, k_len), bool)
    value_mask[0, 4:] = False
    value_mask[1, :] = False  # every key hidden: zeros, never NaN
    query_mask = np.ones((batch, q_len), bool)
    query_mask[0, -1] = False
    attention_mask = RNG.random((batch, q_len, k_len)) > 0.3
    return {"value_mask": value_mask, "query_mask": query_mask, "attention_mask": attention_mask}


@pytest.mark.parametrize(
    "arguments, causal, masked",
    [
        (dict(num_heads=2, key_dim=8), False, False),
        (dict(num_heads=4, key_dim=4, output_shape=10), False, True),
        (dict(num_heads=2, key_dim=8), True, False),
        (dict(num_heads=2, key_dim=8), True, True),
    ],
)
def test_fused_outputs_equal_the_layers_own(kernel_calls, arguments, causal, masked):
    key_length = 5 if causal else 7  # causal self-attention, or attention over a memory
    query = RNG.normal(size=(3, 5, 16)).astype("float32")
    value = RNG.normal(size=(3, key_length, 16)).astype("float32")
    call = {"use_causal_mask": causal, **(masks(3, 5, key_length) if masked else {})}
    layer = MultiHeadAttention(**arguments)
    own, _ = layer(query, value, return_attention_scores=True, **call)  # keeps the scores
    assert not kernel_calls
    fused = layer(query, value, **call)
    assert kernel_calls == [masked or causal]  # one kernel call, with the mask if any
    np.testing.assert_allclose(numpy(fused), numpy(own), atol=2e-6)
    if masked:
        assert not np.any(numpy(fused)[1])  # the sentence that sees no key


def test_fused_gradients_equal_the_layers_own(kernel_calls, monkeypatch):
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    x = RNG.normal(size=(3, 6, 16)).astype("float32")
    weights = ops.convert_to_tensor(RNG.normal(size=(3, 6, 16)).astype("float32"))
    padding = {name: ops.convert_to_tensor(mask) for name, mask in masks(3, 6, 6).items()}

    def loss(x):
        output = layer(x, x, use_causal_mask=True, **padding)
        return ops.sum(output * weights)

    fused_value, fused_gradient, _ = value_and_gradient(loss, x)
    assert kernel_calls
    monkeypatch.setattr(_backend, "has_fused_attention", lambda dtype: False)
    own_value, own_gradient, _ = value_and_gradient(loss, x)
    np.testing.assert_allclose(fused_value, own_value, rtol=1e-5)
    np.testing.assert_allclose(fused_gradient, own_gradient, atol=2e-5)
    assert np.abs(own_gradient).max() > 1e-3  # not vacuous


def test_value_heads_of_another_size_keep_the_layers_own_path(kernel_calls):
    # JAX's kernel needs values of the keys' depth (the paper's d_v = d_k).
    layer = MultiHeadAttention(num_heads=4, key_dim=4, value_dim=3)
    query = RNG.normal(size=(2, 5, 16)).astype("float32")
    assert layer(query, query).shape == (2, 5, 16)
    assert not kernel_calls


def test_attention_dropout_in_training_keeps_the_layers_own_path(kernel_calls):
    layer = MultiHeadAttention(num_heads=2, key_dim=8, dropout=0.5, seed=1)
    query = RNG.normal(size=(2, 5, 16)).astype("float32")
    dropped = [numpy(layer(query, query, training=True)) for _ in range(2)]
    assert not kernel_calls and not np.allclose(*dropped)
    layer(query, query, training=False)  # no dropout outside training: fused
    assert len(kernel_calls) == 1


def test_transformer_logits_with_and_without_the_fused_kernel(kernel_calls, monkeypatch):
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=30, num_layers=2, d_model=16, num_heads=2, d_ff=32, dropout=0.0)
    source = RNG.integers(4, 30, (3, 7))
    source[0, 5:] = 0  # padding
    target = RNG.integers(4, 30, (3, 6))
    fused = numpy(model((source, target)))
    # Self-attention and cross-attention of each layer: 2 + 2 * 2.
    assert len(kernel_calls) == 6
    monkeypatch.setattr(_backend, "has_fused_attention", lambda dtype: False)
    np.testing.assert_allclose(fused, numpy(model((source, target))), atol=1e-5)


def test_the_backends_with_a_fused_kernel():
    backend = keras.backend.backend()
    assert _backend.has_fused_attention("float32") is (backend in ("jax", "torch"))
    assert _backend.has_fused_attention("bfloat16") is (backend in ("jax", "torch"))
    # JAX on a CPU has no float16 products accumulated in float32.
    assert _backend.has_fused_attention("float16") is (backend == "torch")
