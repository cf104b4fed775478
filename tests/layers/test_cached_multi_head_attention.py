import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import CachedMultiHeadAttention
from tests import reference
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import run_layer_test

RNG = np.random.default_rng(0)


def _inputs(batch=2, q_len=5, k_len=7, dim=16):
    query = RNG.normal(size=(batch, q_len, dim)).astype("float32")
    value = RNG.normal(size=(batch, k_len, dim)).astype("float32")
    return query, value


def test_layer_contract():
    query, value = _inputs()
    run_layer_test(
        CachedMultiHeadAttention,
        dict(num_heads=4, key_dim=8, dropout=0.1),
        {"query": query, "value": value},
        expected_output_shape=(2, 5, 16),
        expected_num_trainable_weights=weight_counts.ATTENTION,
    )


def test_layer_contract_with_scores_and_value_dim():
    query, value = _inputs()
    run_layer_test(
        CachedMultiHeadAttention,
        dict(num_heads=2, key_dim=8, value_dim=3, output_dim=6),
        {"query": query, "value": value},
        call_kwargs={"return_attention_scores": True},
        expected_output_shape=((2, 5, 6), (2, 2, 5, 7)),
        expected_num_trainable_weights=weight_counts.ATTENTION,
    )


@pytest.mark.parametrize("k_len", [7, 1])
def test_equals_numpy_formula_without_mask(k_len):
    query, value = _inputs(k_len=k_len)
    layer = CachedMultiHeadAttention(num_heads=4, key_dim=8, value_dim=6)
    out = layer(query, value)
    assert_close(out, reference.attention(query, value, layer), atol=1e-5)


def test_equals_numpy_formula_with_masks():
    query, value = _inputs()
    layer = CachedMultiHeadAttention(num_heads=4, key_dim=4)
    attention_mask = RNG.random((2, 5, 7)) > 0.4
    attention_mask[0, 1] = False  # one query sees no key at all
    value_mask = np.array([[1] * 7, [1] * 4 + [0] * 3], bool)
    out = layer(query, value, attention_mask=attention_mask, value_mask=value_mask)
    merged = attention_mask & value_mask[:, None, :]
    assert_close(out, reference.attention(query, value, layer, merged), atol=1e-5)


def test_fully_masked_rows_are_zero_not_nan():
    query, value = _inputs()
    layer = CachedMultiHeadAttention(num_heads=2, key_dim=8, bias_initializer="ones")
    mask = np.zeros((2, 5, 7), bool)
    mask[:, :2] = True
    out, scores = layer(query, value, attention_mask=mask, return_attention_scores=True)
    out = ops.convert_to_numpy(out)
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[:, 2:], 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(scores)[:, :, 2:], 0.0)
    assert np.abs(out[:, :2]).sum() > 0


def test_keras_masks_are_honoured():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    embedded = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    layer = CachedMultiHeadAttention(num_heads=2, key_dim=4)
    implicit = layer(embedded, embedded)
    explicit = layer(
        ops.convert_to_numpy(embedded),
        ops.convert_to_numpy(embedded),
        query_mask=ids != 0,
        value_mask=ids != 0,
    )
    assert_close(implicit, explicit, atol=0)
    # Pad keys get no attention weight.
    _, scores = layer(embedded, embedded, return_attention_scores=True)
    np.testing.assert_array_equal(ops.convert_to_numpy(scores)[1, :, :, 2:], 0.0)


def test_causal_mask_equals_lower_triangle():
    query, _ = _inputs(q_len=6)
    layer = CachedMultiHeadAttention(num_heads=2, key_dim=8)
    causal = layer(query, query, use_causal_mask=True)
    tril = np.broadcast_to(np.tril(np.ones((6, 6), bool)), (2, 6, 6))
    assert_close(causal, reference.attention(query, query, layer, tril), atol=1e-5)


def test_cache_step_by_step_equals_full_causal_pass():
    x, _ = _inputs(q_len=6)
    layer = CachedMultiHeadAttention(num_heads=2, key_dim=8, value_dim=4)
    full = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    cache = (np.zeros((2, 2, 9, 8), "float32"), np.zeros((2, 2, 9, 4), "float32"))
    for t in range(6):
        step, cache = layer(
            x[:, t : t + 1],
            x[:, t : t + 1],
            use_causal_mask=True,
            cache=cache,
            cache_update_index=t,
        )
        assert_close(step[:, 0], full[:, t], atol=1e-5)
    keys, _ = layer.project_key_value(x)
    assert_close(cache[0][:, :, :6], keys, atol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(cache[0])[:, :, 6:], 0.0)


def test_static_cache_equals_cross_attention():
    query, value = _inputs()
    layer = CachedMultiHeadAttention(num_heads=4, key_dim=4)
    value_mask = np.array([[1] * 7, [1] * 3 + [0] * 4], bool)
    direct = layer(query, value, value_mask=value_mask)
    cached, _ = layer(query, None, value_mask=value_mask, cache=layer.project_key_value(value))
    assert_close(cached, direct, atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_matches_float32(policy):
    query, value = _inputs()
    exact = CachedMultiHeadAttention(num_heads=4, key_dim=4)
    expected = exact(query, value)
    mixed = CachedMultiHeadAttention(num_heads=4, key_dim=4, dtype=policy)
    mixed.build(query.shape, value.shape)
    mixed.set_weights(exact.get_weights())
    out, scores = mixed(query, value, return_attention_scores=True)
    assert out.dtype == mixed.compute_dtype
    # Probabilities were normalized in float32 before the cast.
    sums = ops.convert_to_numpy(ops.sum(ops.cast(scores, "float32"), -1))
    np.testing.assert_allclose(sums, 1.0, atol=1e-2)
    assert_close(ops.cast(out, "float32"), expected, atol=0.1, rtol=0.05)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_heads=0, key_dim=8), "num_heads"),
        (dict(num_heads=2, key_dim=-1), "key_dim"),
        (dict(num_heads=2, key_dim=8, dropout=1.0), "dropout"),
        (dict(num_heads=2, key_dim=8, dropout=-0.1), "dropout"),
    ],
)
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=f"Received: {name}="):
        CachedMultiHeadAttention(**kwargs)
