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


def test_needs_encoder_sequence_or_cache():
    layer = DecoderLayer(num_heads=4, d_ff=32)
    layer(TARGET, MEMORY)
    with pytest.raises(ValueError, match="encoder_sequence"):
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
    self_cache = decoder.initial_self_attention_cache(2, 8)
    cross_cache = decoder.cross_attention_cache(MEMORY)
    for t in range(5):
        step, self_cache = decoder(
            TARGET[:, t : t + 1],
            encoder_padding_mask=MEMORY_MASK,
            self_attention_cache=self_cache,
            cross_attention_cache=cross_cache,
            cache_update_index=t,
        )
        assert_close(step[:, 0], full[:, t], atol=1e-4)
    assert tuple(self_cache[0][0].shape) == (2, 4, 8, 4)
