"""Parameter counts against Table 3 of the paper (shared 37,000 vocabulary)."""

import functools

import keras
import pytest

from keras_transformer import Transformer

VOCAB = 37000
M = 1e6


def count(**overrides):
    """The base preset's weights with `overrides`, each configuration
    built once (as variables without values: the count needs no memory)."""
    return _count(tuple(sorted(overrides.items())))


@functools.cache
def _count(overrides):
    with keras.StatelessScope():
        model = Transformer.from_preset("base", vocab_size=VOCAB, **dict(overrides))
    return model.count_params()


def test_base_within_4_percent_of_65m():
    assert abs(count() - 65 * M) / (65 * M) < 0.04
    # Exactly: 37,000 x 512 tied embedding + 6 x 3,152,384 + 6 x 4,204,032.
    assert count() == 37000 * 512 + 6 * 3152384 + 6 * 4204032


def test_big_within_3_percent_of_213m():
    with keras.StatelessScope():
        model = Transformer.from_preset("big", vocab_size=VOCAB)
    assert abs(model.count_params() - 213 * M) / (213 * M) < 0.03


@pytest.mark.parametrize(
    "overrides, paper_millions",
    [
        (dict(num_layers=2), 36),
        (dict(num_layers=4), 50),
        (dict(num_layers=8), 80),
        (dict(d_ff=1024), 53),
        (dict(d_ff=4096), 90),
    ],
)
def test_table3_differences_from_base(overrides, paper_millions):
    ours = count(**overrides) - count()
    paper = (paper_millions - 65) * M
    assert abs(ours - paper) < 1.5 * M


@pytest.mark.parametrize("num_heads", [1, 4, 16, 32])
def test_heads_do_not_change_the_count(num_heads):
    # Table 3 row (A) keeps d_k = d_v = d_model / h: the same 65M.
    assert count(num_heads=num_heads) == count()


def test_key_dim_rows_follow_the_table():
    # Row (B): d_k 16 -> 58M, d_k 32 -> 60M (7M and 5M below base).
    assert abs((count(key_dim=16, value_dim=64) - count()) - (-7 * M)) < 1.5 * M
    assert abs((count(key_dim=32, value_dim=64) - count()) - (-5 * M)) < 1.5 * M


def test_untied_embeddings_add_the_matrices():
    assert count(tie_embeddings="target") - count() == VOCAB * 512
    assert count(tie_embeddings="none") - count() == 2 * VOCAB * 512


def test_small_preset_count():
    # d_model 256, d_ff 1024, 3 + 3 layers, a shared 8,000-piece vocabulary.
    d, d_ff, vocab = 256, 1024, 8000
    attention = 4 * (d * d + d)  # query, key, value, output projections
    feed_forward = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * norm
    decoder_layer = 2 * attention + feed_forward + 3 * norm
    model = Transformer.from_preset("small", vocab_size=vocab)
    assert model.count_params() == vocab * d + 3 * encoder_layer + 3 * decoder_layer == 7_577_600
