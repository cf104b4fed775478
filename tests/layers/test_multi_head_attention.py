import json
import zipfile

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import MultiHeadAttention
from tests import reference
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import dtype
from tests.test_case import numpy
from tests.test_case import run_layer_test

RNG = np.random.default_rng(0)


def _inputs(batch=2, q_len=5, k_len=7, dim=16):
    query = RNG.normal(size=(batch, q_len, dim)).astype("float32")
    value = RNG.normal(size=(batch, k_len, dim)).astype("float32")
    return query, value


def test_layer_contract():
    query, value = _inputs()
    run_layer_test(
        MultiHeadAttention,
        dict(num_heads=4, key_dim=8, dropout=0.1),
        {"query": query, "value": value},
        expected_output_shape=(2, 5, 16),
        expected_num_trainable_weights=weight_counts.ATTENTION,
    )


def test_layer_contract_with_value_dim():
    query, value = _inputs()
    run_layer_test(
        MultiHeadAttention,
        dict(num_heads=2, key_dim=8, value_dim=3, output_shape=6),
        {"query": query, "value": value},
        expected_output_shape=(2, 5, 6),
        expected_num_trainable_weights=weight_counts.ATTENTION,
    )


def test_attention_scores_equal_numpy_probabilities():
    query, value = _inputs()
    layer = MultiHeadAttention(num_heads=2, key_dim=8, dropout=0.5)
    value_mask = np.array([[1] * 7, [1] * 4 + [0] * 3], bool)
    scores = ops.convert_to_numpy(layer.attention_scores(query, value, value_mask=value_mask))
    q = reference.dense(query, layer.query_dense).reshape(2, 5, 2, 8).transpose(0, 2, 1, 3)
    k = reference.dense(value, layer.key_dense).reshape(2, 7, 2, 8).transpose(0, 2, 1, 3)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(8)
    logits = np.where(value_mask[:, None, None, :], logits, -np.inf)
    assert_close(scores, reference.softmax(logits), atol=1e-6)


@pytest.mark.parametrize("k_len", [7, 1])
def test_equals_numpy_formula_without_mask(k_len):
    query, value = _inputs(k_len=k_len)
    layer = MultiHeadAttention(num_heads=4, key_dim=8, value_dim=6)
    out = layer(query, value)
    assert_close(out, reference.attention(query, value, layer), atol=1e-5)


def test_equals_numpy_formula_with_masks():
    query, value = _inputs()
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    attention_mask = RNG.random((2, 5, 7)) > 0.4
    attention_mask[0, 1] = False  # one query sees no key at all
    value_mask = np.array([[1] * 7, [1] * 4 + [0] * 3], bool)
    out = layer(query, value, attention_mask=attention_mask, value_mask=value_mask)
    merged = attention_mask & value_mask[:, None, :]
    assert_close(out, reference.attention(query, value, layer, merged), atol=1e-5)


def test_fully_masked_rows_are_zero_not_nan():
    query, value = _inputs()
    layer = MultiHeadAttention(num_heads=2, key_dim=8, bias_initializer="ones")
    mask = np.zeros((2, 5, 7), bool)
    mask[:, :2] = True
    out = ops.convert_to_numpy(layer(query, value, attention_mask=mask))
    scores = layer.attention_scores(query, value, attention_mask=mask)
    assert np.all(np.isfinite(out))
    np.testing.assert_array_equal(out[:, 2:], 0.0)
    np.testing.assert_array_equal(ops.convert_to_numpy(scores)[:, :, 2:], 0.0)
    assert np.abs(out[:, :2]).sum() > 0


def test_keras_masks_are_honoured():
    ids = np.array([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    embedded = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    implicit = layer(embedded, embedded)
    explicit = layer(
        ops.convert_to_numpy(embedded),
        ops.convert_to_numpy(embedded),
        query_mask=ids != 0,
        value_mask=ids != 0,
    )
    assert_close(implicit, explicit, atol=0)
    # Pad keys get no attention weight.
    scores = layer.attention_scores(embedded, embedded, value_mask=ids != 0)
    np.testing.assert_array_equal(ops.convert_to_numpy(scores)[1, :, :, 2:], 0.0)


def test_causal_mask_equals_lower_triangle():
    query, _ = _inputs(q_len=6)
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    causal = layer(query, query, use_causal_mask=True)
    tril = np.broadcast_to(np.tril(np.ones((6, 6), bool)), (2, 6, 6))
    assert_close(causal, reference.attention(query, query, layer, tril), atol=1e-5)


def test_cache_step_by_step_equals_full_causal_pass():
    x, _ = _inputs(q_len=6)
    layer = MultiHeadAttention(num_heads=2, key_dim=8, value_dim=4)
    full = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.initial_cache(batch_size=2, length=9)
    assert tuple(cache["value"].shape) == (2, 2, 9, 4)
    for t in range(6):
        step, cache = layer.call_with_cache(x[:, t : t + 1], cache, t)
        assert_close(step[:, 0], full[:, t], atol=1e-5)
    keys = ops.swapaxes(layer.project_memory(x)["transposed_key"], -1, -2)
    assert_close(cache["key"][:, :, :6], keys, atol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(cache["key"])[:, :, 6:], 0.0)


def test_cache_written_several_positions_at_a_time():
    x, _ = _inputs(q_len=6)
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    full = ops.convert_to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.initial_cache(batch_size=2, length=9)
    first, cache = layer.call_with_cache(x[:, :2], cache, 0)
    rest, cache = layer.call_with_cache(x[:, 2:6], cache, 2)
    assert_close(ops.concatenate([first, rest], 1), full, atol=1e-5)
    assert_close(cache["value"][:, :, :6], layer.project_memory(x)["value"], atol=1e-6)
    np.testing.assert_array_equal(ops.convert_to_numpy(cache["value"])[:, :, 6:], 0.0)


def test_memory_holds_transposed_keys_and_values_by_position():
    _, value = _inputs()
    layer = MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)
    layer(value, value)
    memory = layer.project_memory(value)
    value = ops.convert_to_numpy(value)

    def heads(dense, depth):  # (batch, len, heads * depth) -> (batch, heads, len, depth)
        x = reference.dense(value, dense)
        return x.reshape(x.shape[0], x.shape[1], 2, depth).transpose(0, 2, 1, 3)

    assert_close(memory["transposed_key"], heads(layer.key_dense, 4).swapaxes(-1, -2), atol=1e-5)
    assert_close(memory["value"], heads(layer.value_dense, 3), atol=1e-5)


def test_memory_equals_cross_attention():
    query, value = _inputs()
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    value_mask = np.array([[1] * 7, [1] * 3 + [0] * 4], bool)
    direct = layer(query, value, value_mask=value_mask)
    memory = layer.project_memory(value)
    assert_close(layer.call_with_memory(query, memory, value_mask), direct, atol=1e-6)


def test_memory_is_shared_by_the_rows_of_a_sentence():
    query, value = _inputs(batch=2, q_len=3)
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    value_mask = np.array([[1] * 7, [1] * 3 + [0] * 4], bool)
    beams = np.concatenate([query, query[:, ::-1], query * 2], 0)[[0, 2, 4, 1, 3, 5]]
    repeated = layer(beams, np.repeat(value, 3, 0), value_mask=np.repeat(value_mask, 3, 0))
    grouped = layer.call_with_memory(beams, layer.project_memory(value), value_mask)
    assert_close(grouped, repeated, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of the memory's 2 rows"):
        layer.call_with_memory(beams[:5], layer.project_memory(value), value_mask)


def test_memory_attention_scores_are_calls_per_row():
    """`return_attention_scores` gives each row's probabilities `(rows,
    heads, steps, key_len)`, as `call` gives them with the memory repeated
    per row, beside the same output."""
    query, value = _inputs(batch=2, q_len=3)
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    value_mask = np.array([[1] * 7, [1] * 3 + [0] * 4], bool)
    beams = np.concatenate([query, query[:, ::-1], query * 2], 0)[[0, 2, 4, 1, 3, 5]]
    output, scores = layer(
        beams,
        np.repeat(value, 3, 0),
        value_mask=np.repeat(value_mask, 3, 0),
        return_attention_scores=True,
    )
    grouped, grouped_scores = layer.call_with_memory(
        beams, layer.project_memory(value), value_mask, return_attention_scores=True
    )
    assert tuple(grouped_scores.shape) == (6, 4, 3, 7)
    assert_close(grouped_scores, scores, atol=1e-6)
    assert_close(grouped, output, atol=1e-5)


@pytest.mark.parametrize(
    "method, cache, match",
    [
        ("call_with_cache", {"key": None}, "missing \\['value'\\]"),
        ("call_with_cache", (None, None), "Received: cache with tuple"),
        ("call_with_memory", {"value": None}, "`memory` must be a dict"),
    ],
)
def test_cache_misuse_says_what_is_missing(method, cache, match):
    query, _ = _inputs()
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    layer(query, query)
    with pytest.raises(ValueError, match=match):
        getattr(layer, method)(query, cache, 0)
    with pytest.raises(ValueError, match="Received: index=None"):
        layer.call_with_cache(query, layer.initial_cache(2, 9), None)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_matches_float32(policy):
    query, value = _inputs()
    exact = MultiHeadAttention(num_heads=4, key_dim=4)
    expected = exact(query, value)
    mixed = MultiHeadAttention(num_heads=4, key_dim=4, dtype=policy)
    mixed.build(query.shape, value.shape)
    mixed.set_weights(exact.get_weights())
    out = mixed(query, value)
    scores = mixed.attention_scores(query, value)
    assert dtype(out) == mixed.compute_dtype
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
        MultiHeadAttention(**kwargs)


def _keras_twin(layer, **kwargs):
    """`keras.layers.MultiHeadAttention` with `layer`'s weights, as they
    are: the same layout, in the same order."""
    twin = keras.layers.MultiHeadAttention(**kwargs)
    query, value = _inputs()
    twin(query, value)
    twin.set_weights(layer.get_weights())
    return twin


@pytest.mark.parametrize(
    "kwargs, call_kwargs",
    [
        (dict(num_heads=4, key_dim=8), {}),
        (dict(num_heads=2, key_dim=8), {"use_causal_mask": True}),
        (dict(num_heads=2, key_dim=8, output_shape=6), {"value_mask": "half"}),
        pytest.param(
            dict(num_heads=2, key_dim=8, value_dim=3, output_shape=6),
            {"value_mask": "half"},
            marks=pytest.mark.skipif(
                keras.backend.backend() == "jax",
                reason="keras.layers.MultiHeadAttention itself fails under JAX when "
                "value_dim != key_dim (Keras 3.15: a reshape to key_dim)",
            ),
        ),
        (dict(num_heads=2, key_dim=4), {"attention_mask": "random"}),
    ],
)
def test_a_drop_in_for_keras_multi_head_attention(kwargs, call_kwargs):
    """The same arguments, call and results as Keras's own layer (with the
    same weights), attention scores included."""
    query, value = _inputs(q_len=7)
    masks = {
        "half": np.array([[1] * 7, [1] * 4 + [0] * 3], bool),
        "random": RNG.random((2, 7, 7)) < 0.7,
    }
    if "attention_mask" in call_kwargs:
        masks["random"][:, :, 0] = True  # no query sees no key
    call_kwargs = {k: masks.get(v, v) if isinstance(v, str) else v for k, v in call_kwargs.items()}
    layer = MultiHeadAttention(**kwargs)
    output, scores = layer(query, value, return_attention_scores=True, **call_kwargs)
    twin = _keras_twin(layer, **kwargs)
    expected, expected_scores = twin(query, value, return_attention_scores=True, **call_kwargs)
    assert_close(output, expected, atol=1e-5)
    assert_close(scores, expected_scores, atol=1e-6)
    # Without scores, JAX and PyTorch run their fused kernel: the same
    # output, rounded differently (test_fused_attention.py).
    assert_close(layer(query, value, **call_kwargs), output, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(attention_axes=2), "attention_axes"),
        (dict(sliding_window=4), "sliding_window"),
        (dict(use_gate=True), "use_gate"),
        (dict(output_shape=(4, 5)), "output_shape"),
    ],
)
def test_what_keras_computes_beyond_the_papers_attention_is_keras_s(kwargs, name):
    """`call` with the arguments that ask for another attention than the
    paper's over sequences gives Keras's own layer's outputs (with the
    same weights); the decoding methods refuse them by name."""
    query, value = _inputs(q_len=7)
    layer = MultiHeadAttention(num_heads=2, key_dim=4, **kwargs)
    output = layer(query, value)
    twin = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, **kwargs)
    twin(query, value)
    twin.set_weights(layer.get_weights())
    assert_close(output, twin(query, value), atol=1e-6)
    with pytest.raises(ValueError, match=f"Received: {name}="):
        layer.call_with_cache(query, layer.initial_cache(2, 9), 0)
    with pytest.raises(ValueError, match=f"Received: {name}="):
        layer.project_memory(value)


def test_flash_attention_chooses_a_kernel_not_the_decoding():
    """`flash_attention=True` makes `call` Keras's (which requires the
    flash kernel: TensorFlow has none); the decoding methods, which run
    their own kernels, still work."""
    query, value = _inputs()
    layer = MultiHeadAttention(num_heads=2, key_dim=4, flash_attention=True)
    layer.build(query.shape, value.shape)
    memory = layer.project_memory(value)
    assert tuple(layer.call_with_memory(query, memory).shape) == (2, 5, 16)


def test_regularizers_and_constraints_reach_every_projection():
    query, value = _inputs()
    layer = MultiHeadAttention(
        num_heads=2, key_dim=4, kernel_regularizer="l2", kernel_constraint="non_neg"
    )
    layer(query, value)
    kernels = [d.kernel for d in (layer.query_dense, layer.key_dense, layer.value_dense)]
    kernels.append(layer.output_dense.kernel)
    expected = sum(0.01 * np.sum(np.square(numpy(k))) for k in kernels)
    np.testing.assert_allclose(sum(numpy(loss) for loss in layer.losses), expected, rtol=1e-5)
    assert all(isinstance(k.constraint, keras.constraints.NonNeg) for k in kernels)


def test_files_saved_under_the_former_name_still_load(tmp_path):
    """A `.keras` file of the layer under its former registered name
    (`CachedMultiHeadAttention`, with `output_dim`) loads and gives the
    same outputs."""
    query, value = _inputs()
    inputs = [keras.Input((5, 16)), keras.Input((7, 16))]
    layer = MultiHeadAttention(2, 8, output_shape=6, name="cached_multi_head_attention")
    model = keras.Model(inputs, layer(*inputs))
    path = str(tmp_path / "new.keras")
    model.save(path)
    old = str(tmp_path / "old.keras")
    with zipfile.ZipFile(path) as new_file, zipfile.ZipFile(old, "w") as old_file:
        for item in new_file.infolist():
            data = new_file.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                entry = next(
                    e for e in config["config"]["layers"] if e["config"]["name"] == layer.name
                )
                entry["class_name"] = "CachedMultiHeadAttention"
                entry["registered_name"] = "keras_transformer>CachedMultiHeadAttention"
                entry["module"] = "keras_transformer.layers.cached_multi_head_attention"
                former = entry["config"]
                for kind in ("regularizer", "constraint"):
                    former.pop(f"kernel_{kind}"), former.pop(f"bias_{kind}")
                former["output_dim"] = former.pop("output_shape")[0]
                data = json.dumps(config).encode()
            old_file.writestr(item, data)
    restored = keras.saving.load_model(old)
    assert isinstance(restored.layers[-1], MultiHeadAttention)
    assert restored.layers[-1].get_config()["output_shape"] == (6,)
    assert_close(restored([query, value]), model([query, value]), atol=0)
