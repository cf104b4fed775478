import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import Decoder
from keras_transformer.layers import DecoderLayer
from tests import reference
from tests.layers import weight_counts
from tests.test_case import assert_close
from tests.test_case import run_layer_test

RNG = np.random.default_rng(0)
TARGET = RNG.normal(size=(2, 5, 16)).astype("float32")
MEMORY = RNG.normal(size=(2, 7, 16)).astype("float32")
MEMORY_MASK = np.array([[1] * 7, [1] * 3 + [0] * 4], bool)


def test_layer_contract():
    run_layer_test(
        DecoderLayer,
        dict(num_heads=4, d_ff=32, dropout=0.1),
        {
            "decoder_sequence": TARGET,
            "encoder_sequence": MEMORY,
            "encoder_padding_mask": MEMORY_MASK,
        },
        expected_output_shape=(2, 5, 16),
        expected_num_trainable_weights=weight_counts.DECODER_LAYER,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_equals_reference(norm_first):
    layer = DecoderLayer(num_heads=4, d_ff=32, norm_first=norm_first)
    out = layer(TARGET, MEMORY, encoder_padding_mask=MEMORY_MASK)
    expected = reference.decoder_layer(TARGET, MEMORY, layer, MEMORY_MASK)
    assert_close(out, expected, atol=1e-4)


def test_future_positions_are_invisible():
    layer = DecoderLayer(num_heads=4, d_ff=32)
    changed = TARGET.copy()
    changed[:, 3:] = RNG.normal(size=(2, 2, 16))
    a = ops.convert_to_numpy(layer(TARGET, MEMORY))
    b = ops.convert_to_numpy(layer(changed, MEMORY))
    assert_close(b[:, :3], a[:, :3], atol=1e-5)
    assert not np.allclose(b[:, 3:], a[:, 3:])


def test_needs_encoder_sequence():
    layer = DecoderLayer(num_heads=4, d_ff=32)
    layer(TARGET, MEMORY)
    with pytest.raises(ValueError, match="call_with_cache.*Received: encoder_sequence=None"):
        layer(TARGET)


def test_decoder_stack_contract():
    run_layer_test(
        Decoder,
        dict(num_layers=2, num_heads=4, d_ff=32, norm_first=True),
        {"decoder_sequence": TARGET, "encoder_sequence": MEMORY},
        expected_output_shape=(2, 5, 16),
        # Two layers, then the final norm of a pre-norm stack.
        expected_num_trainable_weights=2 * weight_counts.DECODER_LAYER + weight_counts.NORM,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_equal_full_pass(norm_first):
    decoder = Decoder(num_layers=2, num_heads=4, d_ff=32, norm_first=norm_first)
    full = ops.convert_to_numpy(decoder(TARGET, MEMORY, encoder_padding_mask=MEMORY_MASK))
    cache = decoder.initial_cache(MEMORY, MEMORY_MASK, cache_length=8)
    for t in range(5):
        step, cache = decoder.call_with_cache(TARGET[:, t : t + 1], cache, t)
        assert_close(step[:, 0], full[:, t], atol=1e-4)
    assert tuple(cache["self_attention"][0]["key"].shape) == (2, 4, 8, 4)
    # Two positions at once, into a fresh cache, give the same.
    cache = decoder.initial_cache(MEMORY, MEMORY_MASK, cache_length=8)
    _, cache = decoder.call_with_cache(TARGET[:, :3], cache, 0)
    pair, _ = decoder.call_with_cache(TARGET[:, 3:5], cache, 3)
    assert_close(pair, full[:, 3:5], atol=1e-4)


def test_grouped_rows_share_the_encoder_cache():
    """Three rows per sentence against one copy of each sentence's encoder
    keys/values equal the same rows against a repeated copy."""
    layer = DecoderLayer(num_heads=4, d_ff=32)
    layer(TARGET, MEMORY)
    rows = RNG.normal(size=(6, 1, 16)).astype("float32")
    attention = layer.self_attention
    shared = {
        "self_attention": attention.initial_cache(6, 4),
        "cross_attention": layer.cross_attention.project_memory(MEMORY),
        "encoder_padding_mask": MEMORY_MASK,
    }
    repeated = {
        "self_attention": attention.initial_cache(6, 4),
        "cross_attention": layer.cross_attention.project_memory(np.repeat(MEMORY, 3, 0)),
        "encoder_padding_mask": np.repeat(MEMORY_MASK, 3, 0),
    }
    grouped, _ = layer.call_with_cache(rows, shared, 0)
    expected, _ = layer.call_with_cache(rows, repeated, 0)
    assert_close(grouped, expected, atol=1e-5)


def test_attention_scores_equal_the_sublayers_probabilities():
    layer = DecoderLayer(num_heads=4, d_ff=32, norm_first=True)
    scores = layer.attention_scores(TARGET, MEMORY, encoder_padding_mask=MEMORY_MASK)
    self_scores = ops.convert_to_numpy(scores["self_attention"])
    cross = ops.convert_to_numpy(scores["cross_attention"])
    assert self_scores.shape == (2, 4, 5, 5) and cross.shape == (2, 4, 5, 7)
    np.testing.assert_array_equal(np.triu(self_scores, 1), 0.0)  # causal
    np.testing.assert_array_equal(cross[1, :, :, 3:], 0.0)  # hidden source positions
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)
    # The first sub-layer sees the normalized input (pre-norm).
    y = reference.layer_norm(TARGET, layer.self_attention_norm)
    expected = layer.self_attention.attention_scores(y, y, use_causal_mask=True)
    assert_close(self_scores, expected, atol=1e-6)


def test_cache_misuse_says_what_is_missing():
    decoder = Decoder(num_layers=2, num_heads=4, d_ff=32)
    decoder(TARGET, MEMORY)
    cache = decoder.initial_cache(MEMORY, MEMORY_MASK, cache_length=8)
    with pytest.raises(ValueError, match="missing \\['encoder_padding_mask'\\]"):
        without_mask = {k: v for k, v in cache.items() if k != "encoder_padding_mask"}
        decoder.call_with_cache(TARGET[:, :1], without_mask, 0)
    with pytest.raises(ValueError, match="one entry per layer"):
        decoder.call_with_cache(
            TARGET[:, :1], {**cache, "self_attention": cache["self_attention"][:1]}, 0
        )
    with pytest.raises(ValueError, match="Received: index=None"):
        decoder.call_with_cache(TARGET[:, :1], cache, None)
